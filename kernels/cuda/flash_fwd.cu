// flash_fwd.cu — FlashAttention-2 style forward pass on tensor cores (mma.sync m16n8k16, bf16 -> fp32),
// one template over the numerics (device_spec.h) that reads step by step like the CPU model
// (kernels/cpu/flash_model.*, kernels/numerics_spec.h): the same `// step N:` labels in the same order.
//
// Work split: one block = one query tile of kBlockM = 16·kNWarps rows of one (batch, head); each warp owns 16
// query rows; a thread holds two rows (g and g+8, g = lane/4) and, per 8-key slice, keys 2t and 2t+1
// (t = lane%4). Key tiles of tile_k = 64 keys stream through shared memory (cp.async, double buffered).
// Q stays in registers as mma A fragments. fa2 numerics skip key tiles that no row of the block can see
// (causal), as FlashAttention-2 does; the paper's numerics visit every tile, as its PyTorch code (and the CPU
// model) does. Out-of-range keys (j >= n_k, tails) do not exist for any step. Interior tiles run a copy of the
// steps compiled without per-element mask checks.
// Rounding: every fp32 operation is an explicit __fadd_rn/__fmul_rn/__fmaf_rn (the file is also built with
// -fmad=false), so nothing is contracted behind the spec's back. Each row reduction over the four lanes of a
// quad runs in the fixed order ((t0+t1)+(t2+t3)); within a thread keys are summed in increasing order.
// Inside one mma the tensor cores accumulate as TENSOR_CORES.md describes (not sequential fp32).
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/cuda/mma_ops.cuh"

namespace attncheck::cuda {

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kFa2: return "fa2";
    case Variant::kFa2Fixed: return "fa2-fixed";
    case Variant::kPaper: return "paper";
    case Variant::kPaperFixed: return "paper-fixed";
  }
  return "?";
}
bool variant_is_fixed(Variant v) { return v == Variant::kFa2Fixed || v == Variant::kPaperFixed; }

namespace {

constexpr int kNWarps = 4;  // 64 query rows per block (= tile_q of the built-in specs)

template <int kD, class Spec>
__global__ void __launch_bounds__(kNWarps * 32) flash_fwd_kernel(const FwdParams p) {
  constexpr int kBlockM = 16 * kNWarps;
  constexpr int kBlockN = Spec::tile_k;
  static_assert(kBlockN == 64, "the fragment code below assumes 64-key tiles");
  constexpr int kThreads = kNWarps * 32;
  constexpr int kNT = kBlockN / 8;  // 8-key slices of a key tile
  constexpr int kDT = kD / 8;       // 8-column slices of the output
  constexpr int kKQ = kD / 16;      // k16 steps of q·k
  constexpr int kChunks = kD / 8;   // 16-byte chunks per row
  extern __shared__ __align__(128) std::uint16_t smem[];
  std::uint16_t* sQ = smem;
  std::uint16_t* sK = sQ + kBlockM * kD;  // [2][kBlockN][kD]
  std::uint16_t* sV = sK + 2 * kBlockN * kD;

  const int m_block = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* gq = p.q + (std::size_t(b) * p.heads_q + h) * p.n_q * kD;
  const std::uint16_t* gk = p.k + (std::size_t(b) * p.heads_kv + hk) * p.n_k * kD;
  const std::uint16_t* gv = p.v + (std::size_t(b) * p.heads_kv + hk) * p.n_k * kD;
  const int row0 = m_block * kBlockM;
  const int diag = p.n_k - p.n_q;  // query i sees key j iff j <= i + diag (bottom-right causal)
  const int last_row = min(row0 + kBlockM, p.n_q) - 1;
  // fa2 skips key tiles no row of the block can see (FA2's n_block_max): with mask −inf such a tile is an
  // exact no-op of steps 2-6. The paper's code visits every tile: its finite mask value ties every key of an
  // all-masked tile, so the fixed policy shifts the max to 0 there, and the model does the same.
  const int n_end = (p.causal && !Spec::paper) ? min(p.n_k, last_row + diag + 1) : p.n_k;
  const int n_blocks = n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;

  for (int c = threadIdx.x; c < kBlockM * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool ok = row0 + r < p.n_q;
    cp_async_16(&sQ[swz<kD>(r, col)], gq + std::size_t(ok ? row0 + r : 0) * kD + col, ok);
  }
  auto load_kv = [&](int nb, int buf) {
    std::uint16_t* k_dst = sK + buf * kBlockN * kD;
    std::uint16_t* v_dst = sV + buf * kBlockN * kD;
    for (int c = threadIdx.x; c < kBlockN * kChunks; c += kThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const int j = nb * kBlockN + r;
      const bool ok = j < p.n_k;
      const std::size_t off = std::size_t(ok ? j : 0) * kD + col;
      cp_async_16(&k_dst[swz<kD>(r, col)], gk + off, ok);
      cp_async_16(&v_dst[swz<kD>(r, col)], gv + off, ok);
    }
  };
  if (n_blocks > 0) load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // Q fragments for this warp's 16 rows (A operand, row-major [row][d]).
  std::uint32_t qf[kKQ][4];
  {
    const int idx = lane / 8;
    const int r = warp * 16 + (idx % 2) * 8 + lane % 8;
#pragma unroll
    for (int kk = 0; kk < kKQ; ++kk) ldsm_x4(qf[kk], &sQ[swz<kD>(r, kk * 16 + (idx / 2) * 8)]);
  }

  // Per thread: rows ri = 0 (g) and ri = 1 (g + 8) of the warp's 16.
  int row[2];
  row[0] = row0 + warp * 16 + g;
  row[1] = row[0] + 8;
  float m_run[2] = {Spec::mask_value, Spec::mask_value};  // running max (the PyTorch code starts at its sentinel)
  float l_run[2] = {0.f, 0.f};
  float acc[kDT][4];
#pragma unroll
  for (int n = 0; n < kDT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int nb = 0; nb < n_blocks; ++nb) {
    if (nb > 0) {
      cp_async_wait<0>();
      __syncthreads();  // tile nb has landed; every warp is done with the buffer refilled next
    }
    if (nb + 1 < n_blocks) load_kv(nb + 1, (nb + 1) & 1);
    cp_async_commit();
    const std::uint16_t* tK = sK + (nb & 1) * kBlockN * kD;
    const std::uint16_t* tV = sV + (nb & 1) * kBlockN * kD;
    const int n0 = nb * kBlockN;
    // Only the tail tile and tiles crossing the causal diagonal need per-element masks; the steps are
    // compiled twice (with and without the checks) so interior tiles carry none of them.
    const bool tile_needs_mask = (n0 + kBlockN > p.n_k) || (p.causal && n0 + kBlockN - 1 > row0 + diag);
    auto tile_steps = [&](auto mask_tag) {
      constexpr bool need_mask = decltype(mask_tag)::value;

      // step 1: s_j = q·k_j on the tensor cores (fp32 accumulation, TENSOR_CORES.md), rounded to qk_fmt;
      //         scaled in s_fmt when the scale is not folded into the exponent; masked keys get mask_value.
      float s[kNT][4];
  #pragma unroll
      for (int n = 0; n < kNT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      {
        const int idx = lane / 8;
  #pragma unroll
        for (int kk = 0; kk < kKQ; ++kk) {
  #pragma unroll
          for (int np = 0; np < kNT / 2; ++np) {
            std::uint32_t kb[4];
            ldsm_x4(kb, &tK[swz<kD>(np * 16 + (idx / 2) * 8 + lane % 8, kk * 16 + (idx % 2) * 8)]);
            mma_bf16_16816(s[2 * np], qf[kk], kb[0], kb[1], s[2 * np]);
            mma_bf16_16816(s[2 * np + 1], qf[kk], kb[2], kb[3], s[2 * np + 1]);
          }
        }
      }
      // exists: key inside [0, n_k); visible: exists and not causally masked for this element's row.
      auto key_of = [&](int n, int i) { return n0 + n * 8 + 2 * t + (i & 1); };
      auto exists = [&](int n, int i) { return !need_mask || key_of(n, i) < p.n_k; };
      auto visible = [&](int n, int i) {
        if (!need_mask) return true;
        const int j = key_of(n, i);
        return j < p.n_k && (!p.causal || j <= row[i >> 1] + diag);
      };
  #pragma unroll
      for (int n = 0; n < kNT; ++n) {
  #pragma unroll
        for (int i = 0; i < 4; ++i) {
          float x = round_float(s[n][i], Spec::qk_fmt);
          if constexpr (!Spec::scale_in_exp) x = round_float(__fmul_rn(x, p.scale), Spec::s_fmt);
          if (!visible(n, i)) x = exists(n, i) ? Spec::mask_value : -INFINITY;
          s[n][i] = x;
        }
      }

      // step 2: r = the tile's row max (exact); the fixed policy shifts it when c > 1 scores lie within the
      //         tolerance of r; m_new = round(max(m_old, r'), max_fmt). Reductions over the quad by shuffles.
      float m_new[2], alpha[2];
  #pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        float r = -INFINITY;
  #pragma unroll
        for (int n = 0; n < kNT; ++n) r = fmaxf(r, fmaxf(s[n][2 * ri], s[n][2 * ri + 1]));
        r = quad_max(r);
        if constexpr (Spec::fixed) {
          // The public code counts `attn_weights >= block_row_maxes - 1e-3` on bf16 tensors: fp32 opmath, s_fmt.
          // Every lane counts (the shuffles need the whole warp); only a finite r is shifted: fa2's all-masked
          // tile (r = −inf) is left alone.
          const float thr = round_float(__fsub_rn(r, p.tolerance), Spec::s_fmt);
          int c = 0;
  #pragma unroll
          for (int n = 0; n < kNT; ++n)
  #pragma unroll
            for (int i = 2 * ri; i < 2 * ri + 2; ++i) c += (exists(n, i) && s[n][i] >= thr) ? 1 : 0;
          c = quad_count(c);
          if (c > 1 && isfinite(r)) r = r > 0.f ? round_float(__fmul_rn(p.beta, r), Spec::max_fmt) : (r < 0.f ? 0.f : r);
        }
        m_new[ri] = round_float(fmaxf(m_run[ri], r), Spec::max_fmt);
        // step 6 (first half): α = exp(m_old − m_new) by exp_mode, rounded to rescale_fmt.
        if constexpr (Spec::exp2_folded) {
          const float m_cur = m_new[ri] == -INFINITY ? 0.f : m_new[ri];  // FA2: no (−inf) − (−inf)
          alpha[ri] = round_float(exp2f(__fmul_rn(__fsub_rn(m_run[ri], m_cur), p.scale_log2e)), Spec::rescale_fmt);
        } else {
          const float d = round_float(__fsub_rn(m_run[ri], m_new[ri]), Spec::s_fmt);
          alpha[ri] = round_float(expf(d), Spec::rescale_fmt);
        }
      }

      // step 3: p̄_j = exp(s_j − m_new) by exp_mode, rounded to p_fmt; masked keys give 0.
  #pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        const float m_scaled = m_new[ri] == -INFINITY ? 0.f : __fmul_rn(m_new[ri], p.scale_log2e);
  #pragma unroll
        for (int n = 0; n < kNT; ++n)
  #pragma unroll
          for (int i = 2 * ri; i < 2 * ri + 2; ++i) {
            float e;
            if constexpr (Spec::exp2_folded) {
              e = exp2f(__fmaf_rn(s[n][i], p.scale_log2e, -m_scaled));
            } else {
              e = expf(round_float(__fsub_rn(s[n][i], m_new[ri]), Spec::s_fmt));
            }
            s[n][i] = visible(n, i) ? round_float(e, Spec::p_fmt) : 0.f;
          }
      }

      // step 4: block row sum Σ_j p̄_j in fp32 (each thread in key order, then the quad), rounded to block_sum_fmt.
      float block_sum[2];
  #pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        float part = 0.f;
  #pragma unroll
        for (int n = 0; n < kNT; ++n) part = __fadd_rn(__fadd_rn(part, s[n][2 * ri]), s[n][2 * ri + 1]);
        block_sum[ri] = round_float(quad_sum(part), Spec::block_sum_fmt);
        if (block_sum[ri] < Spec::block_sum_min) block_sum[ri] = round_float(Spec::block_sum_min, Spec::block_sum_fmt);
      }

      // step 5: block output Σ_j round(p̄_j, pv_in_fmt)·v_j on the tensor cores (fp32), rounded to block_out_fmt;
      // step 6: acc = round(round(α·acc, acc_fmt) + block output, acc_fmt), per 8-column slice as it is ready.
      std::uint32_t pf[kNT / 2][4];
  #pragma unroll
      for (int js = 0; js < kNT / 2; ++js) {
        pf[js][0] = pack_bf16(round_float(s[2 * js][0], Spec::pv_in_fmt), round_float(s[2 * js][1], Spec::pv_in_fmt));
        pf[js][1] = pack_bf16(round_float(s[2 * js][2], Spec::pv_in_fmt), round_float(s[2 * js][3], Spec::pv_in_fmt));
        pf[js][2] = pack_bf16(round_float(s[2 * js + 1][0], Spec::pv_in_fmt), round_float(s[2 * js + 1][1], Spec::pv_in_fmt));
        pf[js][3] = pack_bf16(round_float(s[2 * js + 1][2], Spec::pv_in_fmt), round_float(s[2 * js + 1][3], Spec::pv_in_fmt));
      }
      {
        const int idx = lane / 8;
  #pragma unroll
        for (int dp = 0; dp < kDT / 2; ++dp) {
          float blk[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  #pragma unroll
          for (int js = 0; js < kNT / 2; ++js) {
            std::uint32_t vb[4];
            ldsm_x4_t(vb, &tV[swz<kD>(js * 16 + (idx % 2) * 8 + lane % 8, dp * 16 + (idx / 2) * 8)]);
            mma_bf16_16816(blk[0], pf[js], vb[0], vb[1], blk[0]);
            mma_bf16_16816(blk[1], pf[js], vb[2], vb[3], blk[1]);
          }
  #pragma unroll
          for (int u = 0; u < 2; ++u)
  #pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float scaled = round_float(__fmul_rn(alpha[i >> 1], acc[2 * dp + u][i]), Spec::acc_fmt);
              acc[2 * dp + u][i] =
                  round_float(__fadd_rn(scaled, round_float(blk[u][i], Spec::block_out_fmt)), Spec::acc_fmt);
            }
        }
      }
      // step 6 (rest): l = round(round(α·l, rowsum_fmt) + block sum, rowsum_fmt); m_old = m_new.
  #pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        l_run[ri] = round_float(__fadd_rn(round_float(__fmul_rn(alpha[ri], l_run[ri]), Spec::rowsum_fmt), block_sum[ri]),
                                Spec::rowsum_fmt);
        m_run[ri] = m_new[ri];
      }
    };
    if (tile_needs_mask) tile_steps(std::true_type{});
    else tile_steps(std::false_type{});
  }

  // step 7: o = acc / l (divide) or acc · round(1/l, fp32) (reciprocal) in out_div_fmt, then out_fmt;
  //         LSE = m·(scale if scale_in_exp) + round(log(l), log_l_fmt) in lse_fmt. A row with no visible key
  //         (or, in fa2, a running max still −inf) gives O = 0, LSE = −inf. FA2's empty sum (l = 0 or NaN):
  //         1/l is taken as 1 and LSE = +inf.
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int i_row = row[ri];
    if (i_row >= p.n_q) continue;
    const float l = l_run[ri], m = m_run[ri];
    const bool empty_row = !(p.n_k > 0 && (!p.causal || i_row + diag >= 0)) || m == -INFINITY;
    const bool empty_sum = !(l != 0.f);
    const float inv = empty_sum ? 1.f : round_float(__fdiv_rn(1.f, l), Spec::out_div_fmt);
    std::uint16_t* go = p.o + ((std::size_t(b) * p.heads_q + h) * p.n_q + i_row) * kD;
#pragma unroll
    for (int n = 0; n < kDT; ++n) {
      float o2[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float a = acc[n][2 * ri + u];
        const float o = Spec::reciprocal_normalise ? __fmul_rn(a, inv) : __fdiv_rn(a, l);
        o2[u] = empty_row ? 0.f : round_float(round_float(o, Spec::out_div_fmt), Spec::out_fmt);
      }
      *reinterpret_cast<std::uint32_t*>(go + n * 8 + 2 * t) = pack_bf16(o2[0], o2[1]);
    }
    if (t == 0) {
      const float log_l = round_float(logf(l), Spec::log_l_fmt);
      float lse;
      if constexpr (Spec::scale_in_exp) {
        lse = __fmaf_rn(m, p.scale, log_l);  // nvcc contracts FA2's row_max * scale + __logf(row_sum)
        if (empty_sum && Spec::reciprocal_normalise) lse = INFINITY;
      } else {
        lse = __fadd_rn(log_l, m);
      }
      p.lse[(std::size_t(b) * p.heads_q + h) * p.n_q + i_row] = empty_row ? -INFINITY : round_float(lse, Spec::lse_fmt);
    }
  }
}

template <int kD, class Spec>
void launch(const FwdParams& p, cudaStream_t stream) {
  constexpr int kBlockM = 16 * kNWarps;
  constexpr int kSmem = (kBlockM + 4 * Spec::tile_k) * kD * 2;
  auto kernel = flash_fwd_kernel<kD, Spec>;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // gridDim.z is limited to 65535: long batches go in slices.
  constexpr int kMaxZ = 65535;
  for (int b0 = 0; b0 < p.batch; b0 += kMaxZ) {
    FwdParams s = p;
    s.batch = std::min(kMaxZ, p.batch - b0);
    s.q += std::size_t(b0) * p.heads_q * p.n_q * kD;
    s.o += std::size_t(b0) * p.heads_q * p.n_q * kD;
    s.lse += std::size_t(b0) * p.heads_q * p.n_q;
    s.k += std::size_t(b0) * p.heads_kv * p.n_k * kD;
    s.v += std::size_t(b0) * p.heads_kv * p.n_k * kD;
    const dim3 grid((p.n_q + kBlockM - 1) / kBlockM, p.heads_q, s.batch);
    kernel<<<grid, kNWarps * 32, kSmem, stream>>>(s);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }
}

template <int kD>
void launch_variant(Variant v, const FwdParams& p, cudaStream_t stream) {
  switch (v) {
    case Variant::kFa2: return launch<kD, Fa2>(p, stream);
    case Variant::kFa2Fixed: return launch<kD, Fa2Fixed>(p, stream);
    case Variant::kPaper: return launch<kD, Paper>(p, stream);
    case Variant::kPaperFixed: return launch<kD, PaperFixed>(p, stream);
  }
}

}  // namespace

void launch_flash_fwd(Variant variant, int head_dim, const FwdParams& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.n_q <= 0 || p.n_k <= 0)
    throw Error("launch_flash_fwd: bad shape");
  if (head_dim == 64) return launch_variant<64>(variant, p, stream);
  if (head_dim == 128) return launch_variant<128>(variant, p, stream);
  throw Error("launch_flash_fwd: head_dim " + std::to_string(head_dim) + " (kernels exist for 64 and 128)");
}

}  // namespace attncheck::cuda
