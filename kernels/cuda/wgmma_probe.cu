// wgmma_probe.cu — one block of one warpgroup computes S = C0 + Q·Kᵀ and O = C0 + P·V twice: with the forward's
// own wgmma chains and shared-memory layout (wgmma_qk, wgmma_pv_half, sw128_offset), and with mma.sync m16n8k16
// chains (each warp its 16 rows, fragments straight from global memory). Used by mma_probe_test (WgmmaProbe.*).
// See wgmma_probe.h.
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/cuda/mma_ops.cuh"
#include "kernels/cuda/wgmma_ops.cuh"
#include "kernels/cuda/wgmma_probe.h"

namespace attncheck::cuda {
namespace {

constexpr int kRows = 64, kD = 128, kKeys = 64;

__device__ std::uint32_t pair_at(const std::uint16_t* x, int i) { return x[i] | (std::uint32_t(x[i + 1]) << 16); }

__global__ void wgmma_probe_kernel(const std::uint16_t* q, const std::uint16_t* k, const std::uint16_t* v,
                                   const std::uint16_t* p, float c0, float* s_wg, float* s_mm, float* o_wg,
                                   float* o_mm) {
  extern __shared__ std::uint8_t raw[];
  auto* sq = reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t(1023));
  std::uint16_t* sk = sq + kRows * kD;
  std::uint16_t* sv = sk + kKeys * kD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int i = threadIdx.x; i < kRows * kD; i += blockDim.x) {
    sq[sw128_offset(i / kD, i % kD, kRows)] = q[i];
    sk[sw128_offset(i / kD, i % kD, kKeys)] = k[i];
    sv[sw128_offset(i / kD, i % kD, kKeys)] = v[i];
  }
  fence_proxy_async();
  __syncthreads();
  // This thread's rows are r0 and r0 + 8; accumulator element e of 8-column slice j is column 8j + 2t + e % 2.
  const int r0 = 16 * warp + g;
  auto out_index = [&](int j, int e, int cols) { return (r0 + 8 * (e / 2)) * cols + 8 * j + 2 * t + e % 2; };
  float d[32];
  // S with wgmma (the forward's step-1 chain, from C) ...
  for (float& x : d) x = c0;
  wgmma_qk<kD / 16, true>(d, smem_addr(sq), kRows, smem_addr(sk));
  wgmma_wait<0>();
  for (int i = 0; i < 32; ++i) s_wg[out_index(i / 4, i % 4, kKeys)] = d[i];
  // ... and with mma.sync, 8 n8 slices per warp.
  for (int j = 0; j < kKeys / 8; ++j) {
    float c[4] = {c0, c0, c0, c0};
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int k0 = 16 * kk + 2 * t;
      const std::uint32_t fa[4] = {pair_at(q, r0 * kD + k0), pair_at(q, (r0 + 8) * kD + k0),
                                   pair_at(q, r0 * kD + k0 + 8), pair_at(q, (r0 + 8) * kD + k0 + 8)};
      const int key = 8 * j + g;
      mma_bf16_16816(c, fa, pair_at(k, key * kD + k0), pair_at(k, key * kD + k0 + 8), c);
    }
    for (int e = 0; e < 4; ++e) s_mm[out_index(j, e, kKeys)] = c[e];
  }
  // O in two 64-column halves with wgmma (as step 5), P's A fragments from registers ...
  std::uint32_t pf[4][4];
  for (int js = 0; js < 4; ++js) {
    const int k0 = 16 * js + 2 * t;
    pf[js][0] = pair_at(p, r0 * kKeys + k0), pf[js][1] = pair_at(p, (r0 + 8) * kKeys + k0);
    pf[js][2] = pair_at(p, r0 * kKeys + k0 + 8), pf[js][3] = pair_at(p, (r0 + 8) * kKeys + k0 + 8);
  }
  for (int h = 0; h < kD / 64; ++h) {
    for (float& x : d) x = c0;
    wgmma_pv_half<true>(d, pf, smem_addr(sv), h);
    wgmma_wait<0>();
    for (int i = 0; i < 32; ++i) o_wg[out_index(8 * h + i / 4, i % 4, kD)] = d[i];
  }
  // ... and with mma.sync, 16 n8 slices per warp (B fragment: keys 2t, 2t+1 of column 8j + g).
  for (int j = 0; j < kD / 8; ++j) {
    float c[4] = {c0, c0, c0, c0};
    const int col = 8 * j + g;
    for (int js = 0; js < 4; ++js) {
      const int k0 = 16 * js + 2 * t;
      const std::uint32_t b0 = v[k0 * kD + col] | (std::uint32_t(v[(k0 + 1) * kD + col]) << 16);
      const std::uint32_t b1 = v[(k0 + 8) * kD + col] | (std::uint32_t(v[(k0 + 9) * kD + col]) << 16);
      mma_bf16_16816(c, pf[js], b0, b1, c);
    }
    for (int e = 0; e < 4; ++e) o_mm[out_index(j, e, kD)] = c[e];
  }
}

}  // namespace

WgmmaProbeOutput run_wgmma_probe(const std::vector<std::uint16_t>& q, const std::vector<std::uint16_t>& k,
                                 const std::vector<std::uint16_t>& v, const std::vector<std::uint16_t>& p, float c0) {
  if (!fwd_has_wgmma()) throw Error("run_wgmma_probe: this build has no wgmma (not built for sm_90a)");
  if (q.size() != std::size_t(kRows) * kD || k.size() != std::size_t(kKeys) * kD || v.size() != k.size() ||
      p.size() != std::size_t(kRows) * kKeys)
    throw Error("run_wgmma_probe: Q, K, V must be 64 x 128 and P 64 x 64");
  DeviceBuffer<std::uint16_t> dq(q.size()), dk(k.size()), dv(v.size()), dp(p.size());
  dq.upload(q), dk.upload(k), dv.upload(v), dp.upload(p);
  DeviceBuffer<float> s_wg(kRows * kKeys), s_mm(kRows * kKeys), o_wg(kRows * kD), o_mm(kRows * kD);
  constexpr int kSmem = (kRows + 2 * kKeys) * kD * 2 + 1024;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(wgmma_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  wgmma_probe_kernel<<<1, 128, kSmem>>>(dq.get(), dk.get(), dv.get(), dp.get(), c0, s_wg.get(), s_mm.get(),
                                        o_wg.get(), o_mm.get());
  ATTN_CUDA_CHECK(cudaGetLastError());
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  return {s_wg.download(), s_mm.download(), o_wg.download(), o_mm.download()};
}

}  // namespace attncheck::cuda
