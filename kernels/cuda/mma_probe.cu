// mma_probe.cu — one warp per probe executes exactly one mma.sync m16n8k16 bf16->fp32 on inputs read from
// global memory in the fragment layout of mma_ops.cuh, and writes D. Used by mma_probe_test (TENSOR_CORES.md).
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/mma_ops.cuh"
#include "kernels/cuda/mma_probe.h"

namespace attncheck::cuda {
namespace {

__device__ std::uint32_t pack_pair(const float* x, int i0, int i1) { return pack_bf16(x[i0], x[i1]); }

__global__ void mma_probe_kernel(const float* a, const float* b, const float* c, float* d, int count) {
  const int probe = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (probe >= count) return;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* A = a + probe * 256;  // [m][k]
  const float* B = b + probe * 128;  // [k][n]
  const float* C = c + probe * 128;
  float* D = d + probe * 128;
  const std::uint32_t fa[4] = {pack_pair(A, g * 16 + 2 * t, g * 16 + 2 * t + 1),
                               pack_pair(A, (g + 8) * 16 + 2 * t, (g + 8) * 16 + 2 * t + 1),
                               pack_pair(A, g * 16 + 2 * t + 8, g * 16 + 2 * t + 9),
                               pack_pair(A, (g + 8) * 16 + 2 * t + 8, (g + 8) * 16 + 2 * t + 9)};
  const std::uint32_t b0 = pack_pair(B, (2 * t) * 8 + g, (2 * t + 1) * 8 + g);
  const std::uint32_t b1 = pack_pair(B, (2 * t + 8) * 8 + g, (2 * t + 9) * 8 + g);
  const float fc[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  float fd[4];
  mma_bf16_16816(fd, fa, b0, b1, fc);
  D[g * 8 + 2 * t] = fd[0];
  D[g * 8 + 2 * t + 1] = fd[1];
  D[(g + 8) * 8 + 2 * t] = fd[2];
  D[(g + 8) * 8 + 2 * t + 1] = fd[3];
}

}  // namespace

std::vector<float> run_mma_probes(const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& c, int count) {
  if (count <= 0 || a.size() != std::size_t(count) * 256 || b.size() != std::size_t(count) * 128 ||
      c.size() != std::size_t(count) * 128)
    throw Error("run_mma_probes: sizes do not match count");
  DeviceBuffer<float> da(a.size()), db(b.size()), dc(c.size()), dd(c.size());
  da.upload(a), db.upload(b), dc.upload(c);
  constexpr int kWarps = 4;
  mma_probe_kernel<<<(count + kWarps - 1) / kWarps, kWarps * 32>>>(da.get(), db.get(), dc.get(), dd.get(), count);
  ATTN_CUDA_CHECK(cudaGetLastError());
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  return dd.download();
}

}  // namespace attncheck::cuda
