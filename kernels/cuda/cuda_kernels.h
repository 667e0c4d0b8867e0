// cuda_kernels.h — factory for the CUDA kernels as attncheck Kernels (cuda_kernels.cpp); tests and the
// benchmark use it directly, everything else goes through register_cuda_kernels() (harness/kernel.h).
#pragma once

#include <memory>

#include "harness/kernel.h"
#include "kernels/cuda/flash_fwd.h"

namespace attncheck::cuda {

// beta, tol: the fixed variants' max policy (ignored by cuda:fa2 and cuda:paper).
std::unique_ptr<Kernel> make_cuda_kernel(Variant v, float beta = 2.0f, float tol = 1e-3f);

}  // namespace attncheck::cuda
