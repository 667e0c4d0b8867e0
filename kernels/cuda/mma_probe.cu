// mma_probe.cu — one warp per probe executes exactly one mma.sync m16n8k16 bf16->fp32 on inputs read from
// global memory in the fragment layout of mma_ops.cuh, and writes D. Used by mma_probe_test (TENSOR_CORES.md).
// top2_probe_kernel runs the forward's row top-two (quad_top2_rows, the very functions it calls) in both forms.
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

// One warp per 16 rows, in the forward's fragment layout: lane (g, t) holds keys 8n + 2t, 8n + 2t + 1 of rows g
// and g + 8, as s[n][0..3] in flash_fwd.cu.
__global__ void top2_probe_kernel(const float* scores, float* out, int tiles) {
  const int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* x = scores + std::size_t(tile) * 16 * 64;
  float s[8][4];
  for (int n = 0; n < 8; ++n)
    for (int i = 0; i < 4; ++i) s[n][i] = x[(g + 8 * (i / 2)) * 64 + 8 * n + 2 * t + i % 2];
  float* o = out + std::size_t(tile) * 16 * kTop2Outputs;
  // fp32 top two; packed top two (prmt, then the from-cvt form); packed row max (both forms).
  float r[kTop2Outputs][2];  // r[k][ri]: output k of row g + 8·ri
  quad_top2_rows(s, r[0], r[1]);
  quad_top2_rows_bf16<false>(s, r[2], r[3]);
  quad_top2_rows_bf16<true>(s, r[4], r[5]);
  quad_max_rows_bf16<false>(s, r[6]);
  quad_max_rows_bf16<true>(s, r[7]);
  if (t == 0)
    for (int ri = 0; ri < 2; ++ri)
      for (int k = 0; k < kTop2Outputs; ++k) o[(g + 8 * ri) * kTop2Outputs + k] = r[k][ri];
}

}  // namespace

std::vector<float> run_top2_probes(const std::vector<float>& scores, int rows) {
  if (rows <= 0 || rows % 16 != 0 || scores.size() != std::size_t(rows) * 64)
    throw Error("run_top2_probes: rows must be a positive multiple of 16 and scores rows x 64");
  DeviceBuffer<float> ds(scores.size()), dout(std::size_t(rows) * kTop2Outputs);
  ds.upload(scores);
  const int tiles = rows / 16;
  constexpr int kWarps = 4;
  top2_probe_kernel<<<(tiles + kWarps - 1) / kWarps, kWarps * 32>>>(ds.get(), dout.get(), tiles);
  ATTN_CUDA_CHECK(cudaGetLastError());
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  return dout.download();
}

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
