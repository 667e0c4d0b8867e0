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
    // A case found with a plugin names its kernel only (the library is a path on the finder's machine).
    Registry::global().note_absent("plugin:", "they come from a library: pass --plugin LIB[:OPTIONS] (for a saved "
                                              "case, its printed replay line names it)");
  });
  return Registry::global();
}

#if !defined(ATTNCHECK_HAVE_CUDA)
int register_cuda_kernels(Registry& r) {
  r.note_absent("cuda:", "this build has no CUDA kernels (CMake found no nvcc, or -DATTNCHECK_CUDA=OFF)");
  r.note_absent("twin:cuda:", "the CPU twins come with the CUDA kernels, and this build has none (CMake found no "
                              "nvcc, or -DATTNCHECK_CUDA=OFF); replay on the CPU model (the name without twin:cuda:)");
  return 0;
}
#endif

}  // namespace attncheck
