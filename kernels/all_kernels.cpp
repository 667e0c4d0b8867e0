// all_kernels.cpp — the default registry: built-in CPU kernels, then CUDA kernels where the build has CUDA
// and a device is present.
#include <mutex>

#include "harness/kernel.h"

namespace attncheck {

Registry& default_registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_kernels(Registry::global());
    register_cuda_kernels(Registry::global());
  });
  return Registry::global();
}

#if !defined(ATTNCHECK_HAVE_CUDA)
int register_cuda_kernels(Registry& r) {
  r.note_absent("cuda:", "this build has no CUDA kernels (CMake found no nvcc, or -DATTNCHECK_CUDA=OFF)");
  return 0;
}
#endif

}  // namespace attncheck
