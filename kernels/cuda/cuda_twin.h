// cuda_twin.h — a CPU twin of the CUDA kernels. Forward (flash_fwd.cu): the same steps in the same order per
// query row, with the tensor-core sums emulated by mma_model.h (kMeasuredMmaModel, fitted on an H200) instead
// of sequential fp32, the per-thread and quad order of the row sums, fa2's tile skipping, and zero-padding of
// the head dim to 64/128. Backward (flash_bwd.cu): the CPU model's backward with the kernel's tensor-core sums.
// What it cannot copy bit for bit: the GPU's exp2f/expf/logf (MUFU approximations, up to 2 fp32 ulps) — the
// host's libm stands in. The tensor cores' edges (subnormals, overflow, inf/NaN, signed zeros) are modelled since
// session 30 (TENSOR_CORES.md, rule 7; held out on an H100 in session 31), and gpu_matches_cpu_model takes the twin's
// sums for the GPU's over the whole range (props_gpu_twin.cpp).
// cuda_kernels_test reports its bitwise agreement with the GPU (ForwardAgreesWithItsCpuTwin,
// BackwardAgreesWithItsCpuTwin). For the CPU model (kernels/cpu/) the reusable part is mma_model.h: mma_dot for
// step 1, a chain of mma_k16 over 16-key slices for step 5.
#pragma once

#include <memory>
#include <string>

#include "harness/kernel.h"
#include "harness/problem.h"
#include "kernels/cuda/flash_fwd.h"

namespace attncheck::cuda {

// The NumericsSpec variant v follows (builtin_spec of its name), with the fixed policy's β and tolerance.
NumericsSpec variant_spec(Variant v, float beta, float tol);

ForwardOutput twin_forward(Variant v, const Instance& in, float beta = 2.0f, float tol = 1e-3f);
// flash_bwd.cu on the CPU: the CPU model's backward (model_backward, whose steps and orders the kernel follows) with
// the kernel's tensor-core sums (mma_model.h) in place of its sequential fp32 ones; from the given O and LSE. What it
// cannot copy bit for bit: the GPU's exp2f/expf.
BackwardOutput twin_backward(Variant v, const Instance& in, const ForwardOutput& fwd, float beta = 2.0f,
                             float tol = 1e-3f);

// twin_forward and twin_backward as a CPU Kernel named "twin:" + the GPU kernel's name (CudaFlashKernel::cpu_twin).
std::unique_ptr<Kernel> make_twin_kernel(Variant v, float beta, float tol, const std::string& gpu_name);

}  // namespace attncheck::cuda
