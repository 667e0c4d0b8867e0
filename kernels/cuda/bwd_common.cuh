// bwd_common.cuh — device helpers of the CUDA backward (flash_bwd.cu): bf16 rounding by cvt, the step-9 formulas
// for one score (p and dS), precomputed ldmatrix lane offsets, tile loads, and the partial-sum GEMM of step 9
// (partial per 64-wide k tile rounded to grad_partial_fmt, added in grad_acc_fmt). Included by flash_bwd.cu only
// (built with -fmad=false); nothing here depends on the work split, so every split gives the same bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/mma_ops.cuh"

namespace attncheck::cuda::bwd {

constexpr int kTile = 64;  // = tile_q = tile_k of the built-in specs
constexpr float kLog2e = 1.44269504088896340736f;  // float(M_LOG2E): FA2's backward multiplies LSE by it

// x rounded to format F (fp32: itself; bf16: one cvt). For arithmetic results only (flash_bwd.cu's file comment:
// every NaN there is canonical).
template <Format F>
__device__ __forceinline__ float rnd(float x) {
  static_assert(F == Format::kF32 || F == Format::kBF16, "device formats are fp32 and bf16");
  if constexpr (F == Format::kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  else return x;
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 4 : 0));
}

// step 9 for one score: p (from the tensor cores' s and LSE) and dS (from dP and δ).
template <class Spec>
struct Step9 {
  float scale, scale_log2e;
  // step 1: round to qk_fmt; the paper scales in s_fmt.
  __device__ __forceinline__ float score(float acc) const {
    float x = rnd<Spec::qk_fmt>(acc);
    if constexpr (!Spec::scale_in_exp) x = rnd<Spec::s_fmt>(__fmul_rn(x, scale));
    return x;
  }
  // step 9: p = exp(s − LSE) by exp_mode, rounded to bwd_p_fmt (fa2: exp2(fma(s, scale·log2e, −LSE·log2e))).
  __device__ __forceinline__ float prob(float s, float lse) const {
    float e;
    if constexpr (Spec::exp2_folded) e = exp2f(__fmaf_rn(s, scale_log2e, -__fmul_rn(lse, kLog2e)));
    else e = expf(rnd<Spec::s_fmt>(__fsub_rn(s, lse)));
    return rnd<Spec::bwd_p_fmt>(e);
  }
  // step 9: dS = p ∘ (dP − δ) in fp32 (terms rounded to ds_term_fmt; the paper folds the scale into p first),
  // not yet rounded to ds_fmt (the caller rounds pairs).
  __device__ __forceinline__ float ds(float pr, float dp_acc, float delta) const {
    const float dp = rnd<Spec::dp_fmt>(dp_acc);
    const float t1 = Spec::scale_in_exp ? pr : rnd<Spec::ds_term_fmt>(__fmul_rn(pr, scale));
    const float t2 = rnd<Spec::ds_term_fmt>(__fsub_rn(dp, delta));
    return __fmul_rn(t1, t2);
  }
};
static_assert(Fa2::tile_q == kTile && Fa2::tile_k == kTile && Paper::tile_q == kTile && Paper::tile_k == kTile,
              "the backward's tiles are the specs' tiles");
static_assert(Fa2::ds_fmt == Format::kBF16 && Paper::ds_fmt == Format::kBF16, "the dS workspace holds bf16");
static_assert(Fa2::pv_in_fmt == Format::kBF16 && Paper::pv_in_fmt == Format::kBF16, "P enters the mma as bf16");

// Per-lane ldmatrix byte offsets inside a swizzled [rows][kD] tile (mma_ops.cuh swz), for k16 step (or 16-column
// slice) j % 4; the rest of the address is a compile-time constant 128·(j / 4) plus the 16-row block. With the XOR
// swizzle, chunk 2j + c of row 8·r8 + l8 lies at 8·(j / 4) + ((2·(j % 4)) ^ (c ^ l8)) (see flash_fwd.cu k_off).
//   pattern A: row (idx % 2)·8 + l8, chunk half c = idx / 2 — A operands, and B operands read transposed;
//   pattern B: row (idx / 2)·8 + l8, chunk half c = idx % 2 — B operands read plain.
template <int kD>
__device__ __forceinline__ void lane_offsets(std::uint32_t (&a)[4], std::uint32_t (&b)[4], int lane) {
  const int idx = lane / 8, l8 = lane % 8;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[j] = 2 * (((idx % 2) * 8 + l8) * kD + 8 * ((2 * j) ^ ((idx / 2) ^ l8)));
    b[j] = 2 * (((idx / 2) * 8 + l8) * kD + 8 * ((2 * j) ^ ((idx % 2) ^ l8)));
  }
}

// Loads rows [0, kRows) of a [rows][kD] bf16 matrix (rows past `valid` zero-filled) into swizzled smem. A thread
// copies chunk threadIdx.x % (kD / 8) of rows threadIdx.x / (kD / 8) + k·kPass: kPass is a multiple of 8, so the
// swizzle (row % 8) is the same for all k and every address is one base plus a constant (no hoisted per-k
// addresses eating registers in the kernels' loops).
template <int kD, int kRows, int kThreads>
__device__ __forceinline__ void load_rows(std::uint16_t* dst, const std::uint16_t* src, int valid) {
  constexpr int kChunks = kD / 8, kPass = kThreads / kChunks;
  static_assert(kPass % 8 == 0 && kRows % kPass == 0, "rows per pass keep the swizzle phase");
  const int r0 = threadIdx.x / kChunks, col = (threadIdx.x % kChunks) * 8;
  std::uint16_t* d = dst + swz<kD>(r0, col);
  const std::uint16_t* s = src + r0 * kD + col;
#pragma unroll
  for (int k = 0; k < kRows / kPass; ++k) {
    const bool ok = r0 + k * kPass < valid;
    cp_async_16(d + k * kPass * kD, ok ? s + k * kPass * kD : src, ok);
  }
}

// acc[16·kMT x kD] (C layout) += round(A[16·kMT x 64] · B[64 x kD], partial), B stored [k = 64][n = kD] in smem at
// byte address b_base, read transposed (pattern A offsets). Per 16-column slice the partial is a chain of four k16
// mmas from 0, rounded to grad_partial_fmt, added to acc in grad_acc_fmt. kG slices at a time: 2·kMT·kG independent
// chains (more hide the mma latency, fewer save registers).
template <int kD, class Spec, int kMT, int kG>
__device__ __forceinline__ void add_partial(float (&acc)[kMT][kD / 8][4], const std::uint32_t (&a)[kMT][4][4],
                                            std::uint32_t b_base, const std::uint32_t (&off_a)[4]) {
#pragma unroll
  for (int dp2 = 0; dp2 < kD / 16; dp2 += kG) {
    float part[kG][kMT][2][4];
#pragma unroll
    for (int e = 0; e < kG; ++e)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int u = 0; u < 2; ++u) part[e][mt][u][0] = part[e][mt][u][1] = part[e][mt][u][2] = part[e][mt][u][3] = 0.f;
#pragma unroll
    for (int js = 0; js < 4; ++js)
#pragma unroll
      for (int e = 0; e < kG; ++e) {
        const int dp = dp2 + e;
        std::uint32_t b[4];
        ldsm_x4_t_at(b, b_base + off_a[dp % 4] + 2 * js * 16 * kD + 128 * (dp / 4));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_bf16_16816_n16(part[e][mt][0], part[e][mt][1], a[mt][js], b);
      }
#pragma unroll
    for (int e = 0; e < kG; ++e)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
          for (int i = 0; i < 4; i += 2) {
            float* x = &acc[mt][2 * (dp2 + e) + u][i];
            float p0 = part[e][mt][u][i], p1 = part[e][mt][u][i + 1];
            round_pair<Spec::grad_partial_fmt>(p0, p1);
            float s0 = __fadd_rn(x[0], p0), s1 = __fadd_rn(x[1], p1);
            round_pair<Spec::grad_acc_fmt>(s0, s1);
            x[0] = s0, x[1] = s1;
          }
  }
}

}  // namespace attncheck::cuda::bwd
