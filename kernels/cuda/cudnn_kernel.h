// cudnn_kernel.h — cuDNN's fused SDPA as the attncheck Kernel `cuda:cudnn` (cudnn_kernel.cpp), and its
// registrar. register_cudnn_kernels() registers it when a CUDA device is present and libcudnn 9 loads; it
// returns how many it registered (0 or 1) and is called from register_cuda_kernels().
#pragma once

#include <memory>

#include "harness/kernel.h"

namespace attncheck {

int register_cudnn_kernels(Registry& r);

namespace cuda {
// nullptr when the build has no cuDNN (tests skip then).
std::unique_ptr<Kernel> make_cudnn_kernel();
}  // namespace cuda

}  // namespace attncheck
