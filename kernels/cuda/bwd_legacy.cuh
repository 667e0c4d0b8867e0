// bwd_legacy.cuh — the first CUDA backward (flash_bwd.cu as of commit a009d47), kept verbatim but for this header
// and the namespace, as the bit-for-bit reference of bwd_regress.cu: every later backward must give the same bits.
// Not part of the library. The original description follows.
//
// FlashAttention-2's backward pass (algorithm 2) on tensor cores, deterministic, one template
// over the numerics (device_spec.h), with the step labels of kernels/numerics_spec.h and the CPU model
// (kernels/cpu/flash_model_backward.cpp).
//
//   bwd_delta_kernel   step 8: δ_i = Σ_c round(dO_ic·O_ic, delta_prod_fmt), fp32 in column order (one thread
//                      per row, so the order is the model's exactly).
//   bwd_dkdv_kernel    step 9 for dK, dV: one block per (64-key tile, query head, batch), 4 warps of 16 keys;
//                      walks the query tiles (64 rows) in increasing order; per tile the partial Σ over the
//                      tile's queries is rounded to grad_partial_fmt and added to the running sum (grad_acc_fmt).
//                      step 10: dK·scale (fa2), rounded to grad_out_fmt, per query head (workspace).
//   bwd_dq_kernel      step 9 for dQ: one block per (64-query tile, head, batch), walks the key tiles in
//                      increasing order, partial per tile as above; step 10: dQ·scale (fa2) -> grad_out_fmt.
//   bwd_group_kernel   step 10 (GQA): dK, dV of the group's query heads summed in fp32 in head order, rounded.
// P and dS are recomputed identically by both step-9 kernels. Tiles no query of the tile can see (causal)
// are skipped: their p, dS are 0 and their partials add exactly 0. No atomics: same input, same bits.
// Rounding: explicit __fadd_rn/__fmul_rn/__fmaf_rn, file built with -fmad=false (see flash_fwd.cu).
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/mma_ops.cuh"

namespace attncheck::cuda::legacy {
namespace {

constexpr int kNWarps = 4;
constexpr int kTile = 64;  // = tile_q = tile_k of the built-in specs
constexpr float kLog2e = 1.44269504088896340736f;  // float(M_LOG2E): FA2's backward multiplies LSE by it

template <int kD, class Spec>
__global__ void bwd_delta_kernel(const BwdParams p) {
  const std::size_t rows = std::size_t(p.batch) * p.heads_q * p.n_q;
  const std::size_t row = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  // step 8: δ = Σ_c round(dO·O, delta_prod_fmt) in fp32, column order (zero padding adds +0: no change).
  const uint4* d_o = reinterpret_cast<const uint4*>(p.d_o + row * kD);
  const uint4* o = reinterpret_cast<const uint4*>(p.o + row * kD);
  float acc = 0.f;
#pragma unroll 4
  for (int c8 = 0; c8 < kD / 8; ++c8) {
    const uint4 a = d_o[c8], b = o[c8];
    const std::uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float a0 = __uint_as_float(aw[w] << 16), a1 = __uint_as_float(aw[w] & 0xffff0000u);
      const float b0 = __uint_as_float(bw[w] << 16), b1 = __uint_as_float(bw[w] & 0xffff0000u);
      acc = __fadd_rn(acc, round_float(__fmul_rn(a0, b0), Spec::delta_prod_fmt));
      acc = __fadd_rn(acc, round_float(__fmul_rn(a1, b1), Spec::delta_prod_fmt));
    }
  }
  p.delta[row] = round_float(acc, Spec::delta_fmt);
}

// Shared by both step-9 kernels: one score after the tensor cores (step 1), its p (step 9) and dS.
template <class Spec>
struct Step9 {
  float scale, scale_log2e;
  // step 1: round to qk_fmt; the paper scales in s_fmt.
  __device__ __forceinline__ float score(float acc) const {
    float x = round_float(acc, Spec::qk_fmt);
    if constexpr (!Spec::scale_in_exp) x = round_float(__fmul_rn(x, scale), Spec::s_fmt);
    return x;
  }
  // step 9: p = exp(s − LSE) by exp_mode, rounded to bwd_p_fmt (fa2: exp2(fma(s, scale·log2e, −LSE·log2e))).
  __device__ __forceinline__ float prob(float s, float lse, float lse_scaled) const {
    float e;
    if constexpr (Spec::exp2_folded) e = exp2f(__fmaf_rn(s, scale_log2e, -lse_scaled));
    else e = expf(round_float(__fsub_rn(s, lse), Spec::s_fmt));
    return round_float(e, Spec::bwd_p_fmt);
  }
  // step 9: dS = p ∘ (dP − δ) in fp32 (terms rounded to ds_term_fmt; the paper folds the scale into p first),
  // rounded to ds_fmt.
  __device__ __forceinline__ float ds(float pr, float dp_acc, float delta) const {
    const float dp = round_float(dp_acc, Spec::dp_fmt);
    const float t1 = Spec::scale_in_exp ? pr : round_float(__fmul_rn(pr, scale), Spec::ds_term_fmt);
    const float t2 = round_float(__fsub_rn(dp, delta), Spec::ds_term_fmt);
    return round_float(__fmul_rn(t1, t2), Spec::ds_fmt);
  }
};

// Loads a [rows][kD] bf16 tile (rows past `valid` zero-filled) into swizzled shared memory.
template <int kD>
__device__ __forceinline__ void load_tile(std::uint16_t* dst, const std::uint16_t* src, int valid) {
  constexpr int kChunks = kD / 8;
  for (int c = threadIdx.x; c < kTile * kChunks; c += kNWarps * 32) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool ok = r < valid;
    cp_async_16(&dst[swz<kD>(r, col)], src + std::size_t(ok ? r : 0) * kD + col, ok);
  }
}

// C-layout accumulator pairs (16 x 64) -> bf16 A fragments over k = the 64 columns.
__device__ __forceinline__ void c_to_a(const float (&c)[8][4], std::uint32_t (&a)[4][4]) {
#pragma unroll
  for (int js = 0; js < 4; ++js) {
    a[js][0] = pack_bf16(c[2 * js][0], c[2 * js][1]);
    a[js][1] = pack_bf16(c[2 * js][2], c[2 * js][3]);
    a[js][2] = pack_bf16(c[2 * js + 1][0], c[2 * js + 1][1]);
    a[js][3] = pack_bf16(c[2 * js + 1][2], c[2 * js + 1][3]);
  }
}

// acc[16 x kD] (C layout) += round(A[16 x 64] · B[64 x kD], partial) with B stored [k=64][n=kD] in smem.
template <int kD, class Spec>
__device__ __forceinline__ void add_partial(float (&acc)[kD / 8][4], const std::uint32_t (&a)[4][4],
                                            const std::uint16_t* sB, int lane) {
  const int idx = lane / 8;
#pragma unroll
  for (int dp = 0; dp < kD / 16; ++dp) {
    float part[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int js = 0; js < 4; ++js) {
      std::uint32_t b[4];
      ldsm_x4_t(b, &sB[swz<kD>(js * 16 + (idx % 2) * 8 + lane % 8, dp * 16 + (idx / 2) * 8)]);
      mma_bf16_16816(part[0], a[js], b[0], b[1], part[0]);
      mma_bf16_16816(part[1], a[js], b[2], b[3], part[1]);
    }
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[2 * dp + u][i] = round_float(
            __fadd_rn(acc[2 * dp + u][i], round_float(part[u][i], Spec::grad_partial_fmt)), Spec::grad_acc_fmt);
  }
}

// C[16 x 64] = A-rows (16 x kD, smem [row][kD] at a_row0) · B^T, B stored [64][kD] in smem (both non-trans).
template <int kD>
__device__ __forceinline__ void gemm_abt(float (&c)[8][4], const std::uint16_t* sA, int a_row0,
                                         const std::uint16_t* sB, int lane) {
  const int idx = lane / 8;
#pragma unroll
  for (int n = 0; n < 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    std::uint32_t a[4];
    ldsm_x4(a, &sA[swz<kD>(a_row0 + (idx % 2) * 8 + lane % 8, kk * 16 + (idx / 2) * 8)]);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      std::uint32_t b[4];
      ldsm_x4(b, &sB[swz<kD>(np * 16 + (idx / 2) * 8 + lane % 8, kk * 16 + (idx % 2) * 8)]);
      mma_bf16_16816(c[2 * np], a, b[0], b[1], c[2 * np]);
      mma_bf16_16816(c[2 * np + 1], a, b[2], b[3], c[2 * np + 1]);
    }
  }
}

template <int kD, class Spec>
__global__ void __launch_bounds__(kNWarps * 32) bwd_dkdv_kernel(const BwdParams p) {
  extern __shared__ __align__(128) std::uint16_t smem[];
  std::uint16_t* sK = smem;                // [64][kD] this block's keys
  std::uint16_t* sV = sK + kTile * kD;
  std::uint16_t* sQ = sV + kTile * kD;     // [64][kD] current query tile
  std::uint16_t* sdO = sQ + kTile * kD;
  float* sLse = reinterpret_cast<float*>(sdO + kTile * kD);  // [64] LSE·(1 or log2e) and LSE
  float* sLseScaled = sLse + kTile;
  float* sDelta = sLseScaled + kTile;
  const Step9<Spec> st{p.scale, p.scale_log2e};

  const int n_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int j0 = n_block * kTile;
  const int diag = p.n_k - p.n_q;
  const std::size_t kv_off = (std::size_t(b) * p.heads_kv + hk) * p.n_k;
  const std::size_t q_off = (std::size_t(b) * p.heads_q + h) * p.n_q;
  load_tile<kD>(sK, p.k + (kv_off + j0) * kD, p.n_k - j0);
  load_tile<kD>(sV, p.v + (kv_off + j0) * kD, p.n_k - j0);
  // First query tile with a row that sees key j0: i + diag >= j0.
  const int i_first = p.causal ? max(0, j0 - diag) : 0;
  float dk_acc[kD / 8][4], dv_acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dk_acc[n][i] = dv_acc[n][i] = 0.f;
  const int key[2] = {j0 + warp * 16 + g, j0 + warp * 16 + g + 8};  // this thread's two keys (C rows)

  for (int i0 = (i_first / kTile) * kTile; i0 < p.n_q; i0 += kTile) {
    __syncthreads();  // previous tile fully consumed
    load_tile<kD>(sQ, p.q + (q_off + i0) * kD, p.n_q - i0);
    load_tile<kD>(sdO, p.d_o + (q_off + i0) * kD, p.n_q - i0);
    cp_async_commit();
    for (int r = threadIdx.x; r < kTile; r += kNWarps * 32) {
      const bool ok = i0 + r < p.n_q;
      const float lse = ok ? p.lse[q_off + i0 + r] : INFINITY;
      sLse[r] = lse;
      sLseScaled[r] = __fmul_rn(lse, kLog2e);
      sDelta[r] = ok ? p.delta[q_off + i0 + r] : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();
    // step 9: s^T (keys x queries) = K·Qᵀ, p, dPᵀ = V·dOᵀ, dS.
    float pt[8][4], dst[8][4];
    gemm_abt<kD>(pt, sK, warp * 16, sQ, lane);
    gemm_abt<kD>(dst, sV, warp * 16, sdO, lane);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int qc = n * 8 + 2 * t + (i & 1), qi = i0 + qc, kj = key[i >> 1];
        const bool vis = qi < p.n_q && kj < p.n_k && (!p.causal || kj <= qi + diag);
        const float pr = vis ? st.prob(st.score(pt[n][i]), sLse[qc], sLseScaled[qc]) : 0.f;
        dst[n][i] = vis ? st.ds(pr, dst[n][i], sDelta[qc]) : 0.f;
        pt[n][i] = round_float(pr, Spec::pv_in_fmt);
      }
    std::uint32_t pa[4][4], dsa[4][4];
    c_to_a(pt, pa);
    c_to_a(dst, dsa);
    // dV_j += Σ_i round(p_ij)·dO_i ; dK_j += Σ_i dS_ij·q_i (partials per query tile).
    add_partial<kD, Spec>(dv_acc, pa, sdO, lane);
    add_partial<kD, Spec>(dk_acc, dsa, sQ, lane);
  }
  cp_async_wait<0>();  // no copy may outlive the block (a block whose keys no query sees skips the loop)
  // step 10: dK·scale (fa2), rounded to grad_out_fmt, per query head.
  const float post = Spec::scale_in_exp ? p.scale : 1.f;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    if (key[ri] >= p.n_k) continue;
    const std::size_t off = ((std::size_t(b) * p.heads_q + h) * p.n_k + key[ri]) * kD;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int c = n * 8 + 2 * t;
      *reinterpret_cast<std::uint32_t*>(p.dk_head + off + c) =
          pack_bf16(round_float(__fmul_rn(dk_acc[n][2 * ri], post), Spec::grad_out_fmt),
                    round_float(__fmul_rn(dk_acc[n][2 * ri + 1], post), Spec::grad_out_fmt));
      *reinterpret_cast<std::uint32_t*>(p.dv_head + off + c) =
          pack_bf16(round_float(dv_acc[n][2 * ri], Spec::grad_out_fmt), round_float(dv_acc[n][2 * ri + 1], Spec::grad_out_fmt));
    }
  }
}

template <int kD, class Spec>
__global__ void __launch_bounds__(kNWarps * 32) bwd_dq_kernel(const BwdParams p) {
  extern __shared__ __align__(128) std::uint16_t smem[];
  std::uint16_t* sQ = smem;  // [64][kD]
  std::uint16_t* sdO = sQ + kTile * kD;
  std::uint16_t* sK = sdO + kTile * kD;
  std::uint16_t* sV = sK + kTile * kD;
  const Step9<Spec> st{p.scale, p.scale_log2e};
  const int m_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int i0 = m_block * kTile;
  const int diag = p.n_k - p.n_q;
  const std::size_t kv_off = (std::size_t(b) * p.heads_kv + hk) * p.n_k;
  const std::size_t q_off = (std::size_t(b) * p.heads_q + h) * p.n_q;
  load_tile<kD>(sQ, p.q + (q_off + i0) * kD, p.n_q - i0);
  load_tile<kD>(sdO, p.d_o + (q_off + i0) * kD, p.n_q - i0);
  const int row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float lse[2], lse_scaled[2], delta[2];
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const bool ok = row[ri] < p.n_q;
    lse[ri] = ok ? p.lse[q_off + row[ri]] : INFINITY;
    lse_scaled[ri] = __fmul_rn(lse[ri], kLog2e);
    delta[ri] = ok ? p.delta[q_off + row[ri]] : 0.f;
  }
  const int last_row = min(i0 + kTile, p.n_q) - 1;
  const int n_end = p.causal ? min(p.n_k, last_row + diag + 1) : p.n_k;
  float dq_acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dq_acc[n][i] = 0.f;

  for (int j0 = 0; j0 < n_end; j0 += kTile) {
    __syncthreads();
    load_tile<kD>(sK, p.k + (kv_off + j0) * kD, p.n_k - j0);
    load_tile<kD>(sV, p.v + (kv_off + j0) * kD, p.n_k - j0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // step 9: s = Q·Kᵀ, p, dP = dO·Vᵀ, dS (rows = queries).
    float s[8][4], ds[8][4];
    gemm_abt<kD>(s, sQ, warp * 16, sK, lane);
    gemm_abt<kD>(ds, sdO, warp * 16, sV, lane);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int ri = i >> 1, kj = j0 + n * 8 + 2 * t + (i & 1);
        const bool vis = row[ri] < p.n_q && kj < p.n_k && (!p.causal || kj <= row[ri] + diag);
        const float pr = vis ? st.prob(st.score(s[n][i]), lse[ri], lse_scaled[ri]) : 0.f;
        ds[n][i] = vis ? st.ds(pr, ds[n][i], delta[ri]) : 0.f;
      }
    std::uint32_t dsa[4][4];
    c_to_a(ds, dsa);
    // dQ_i += Σ_j dS_ij·k_j (partial per key tile).
    add_partial<kD, Spec>(dq_acc, dsa, sK, lane);
  }
  cp_async_wait<0>();  // as in bwd_dkdv_kernel
  // step 10: dQ·scale (fa2), rounded to grad_out_fmt.
  const float post = Spec::scale_in_exp ? p.scale : 1.f;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    if (row[ri] >= p.n_q) continue;
    const std::size_t off = (q_off + row[ri]) * kD;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
      *reinterpret_cast<std::uint32_t*>(p.dq + off + n * 8 + 2 * t) =
          pack_bf16(round_float(__fmul_rn(dq_acc[n][2 * ri], post), Spec::grad_out_fmt),
                    round_float(__fmul_rn(dq_acc[n][2 * ri + 1], post), Spec::grad_out_fmt));
  }
}

// step 10 (GQA): per kv element, Σ over the group's query heads (head order, fp32), rounded to grad_out_fmt.
template <int kD, class Spec>
__global__ void bwd_group_kernel(const BwdParams p) {
  const std::size_t n = std::size_t(p.batch) * p.heads_kv * p.n_k * kD;
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int group = p.heads_q / p.heads_kv;
  const std::size_t per_head = std::size_t(p.n_k) * kD;
  const std::size_t b_hk = e / per_head, rest = e % per_head;
  const std::size_t b = b_hk / p.heads_kv, hk = b_hk % p.heads_kv;
  float sk = 0.f, sv = 0.f;
  for (int gh = 0; gh < group; ++gh) {
    const std::size_t src = ((b * p.heads_q) + hk * group + gh) * per_head + rest;
    sk = __fadd_rn(sk, bf16_bits_to_float(p.dk_head[src]));
    sv = __fadd_rn(sv, bf16_bits_to_float(p.dv_head[src]));
  }
  p.dk[e] = static_cast<std::uint16_t>(__float_as_uint(round_float(sk, Spec::grad_out_fmt)) >> 16);
  p.dv[e] = static_cast<std::uint16_t>(__float_as_uint(round_float(sv, Spec::grad_out_fmt)) >> 16);
}

template <int kD, class Spec>
void launch(const BwdParams& p, cudaStream_t stream) {
  if (p.batch > 65535) throw Error("launch_flash_bwd: batch > 65535");
  const std::size_t rows = std::size_t(p.batch) * p.heads_q * p.n_q;
  bwd_delta_kernel<kD, Spec><<<unsigned((rows + 127) / 128), 128, 0, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
  constexpr int kSmemDkdv = 4 * kTile * kD * 2 + 3 * kTile * 4;
  constexpr int kSmemDq = 4 * kTile * kD * 2;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd_dkdv_kernel<kD, Spec>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemDkdv));
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd_dq_kernel<kD, Spec>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemDq));
  bwd_dkdv_kernel<kD, Spec><<<dim3((p.n_k + kTile - 1) / kTile, p.heads_q, p.batch), kNWarps * 32, kSmemDkdv, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
  bwd_dq_kernel<kD, Spec><<<dim3((p.n_q + kTile - 1) / kTile, p.heads_q, p.batch), kNWarps * 32, kSmemDq, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
  const std::size_t kv = std::size_t(p.batch) * p.heads_kv * p.n_k * kD;
  bwd_group_kernel<kD, Spec><<<unsigned((kv + 255) / 256), 256, 0, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
}

template <int kD>
void launch_variant(Variant v, const BwdParams& p, cudaStream_t stream) {
  switch (v) {
    // The max policy is a forward-only choice: the backward recomputes P from LSE, so fixed = base here.
    case Variant::kFa2:
    case Variant::kFa2Fixed: return launch<kD, Fa2>(p, stream);
    case Variant::kPaper:
    case Variant::kPaperFixed: return launch<kD, Paper>(p, stream);
  }
}

}  // namespace

inline void launch_flash_bwd(Variant variant, int head_dim, const BwdParams& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.n_q <= 0 || p.n_k <= 0)
    throw Error("launch_flash_bwd: bad shape");
  if (head_dim == 64) return launch_variant<64>(variant, p, stream);
  if (head_dim == 128) return launch_variant<128>(variant, p, stream);
  throw Error("launch_flash_bwd: head_dim " + std::to_string(head_dim) + " (kernels exist for 64 and 128)");
}

}  // namespace attncheck::cuda::legacy
