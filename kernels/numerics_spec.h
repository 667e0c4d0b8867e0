// numerics_spec.h — where a flash-attention implementation rounds, as data.
//
// A NumericsSpec names the format of every rounding point of a tiled (FlashAttention-2 style) forward and
// backward pass. The CPU model (kernels/cpu/flash_model.*) reads it step by step; the CUDA kernels
// (kernels/cuda/) implement the same steps with the same `// step N:` labels, so the two read side by side.
// Each built-in kernel is one named spec (builtin_spec below). Formats are applied with round_to/round_float
// (kernels/formats.h); "fp32" means an IEEE float operation (the CPU model computes in float).
//
// Forward, per query tile (tile_q rows) and key tile (tile_k keys), per row:
//   step 1: s_j = q·k_j, products exact, accumulated in fp32 in key-dimension order, rounded to qk_fmt.
//           If !scale_in_exp: s_j = round(s_j · scale, s_fmt) (the paper multiplies S by scale in bf16).
//           Bias (if any) is added in fp32 after scaling; masked keys get mask_value.
//   step 2: r = max_j s_j over the tile (in s_fmt, exact); the max policy may shift it (see MaxPolicySpec),
//           m_new = round(max(m_old, r'), max_fmt). Both maxima leave NaN out (fmaxf's rule; a NaN score comes
//           only from an inf − inf inside an overflowing dot product).
//   step 3: p̄_j = exp(s_j − m_new), by exp_mode, rounded to p_fmt; masked keys give 0.
//   step 4: block row sum Σ_j p̄_j accumulated in fp32, rounded to block_sum_fmt.
//   step 5: block output Σ_j round(p̄_j, pv_in_fmt) · v_j accumulated in fp32 (key order), rounded to block_out_fmt.
//   step 6: α = exp(m_old − m_new) by exp_mode, rounded to rescale_fmt;
//           l = round(round(α·l, rowsum_fmt) + block sum, rowsum_fmt);
//           acc = round(round(α·acc, acc_fmt) + block output, acc_fmt).
//           (fa2 keeps everything in fp32 here: acc_fmt = rowsum_fmt = fp32.)
//   step 7: after the last tile: o = acc / l (divide) or acc · round(1/l, fp32) (reciprocal), in out_div_fmt,
//           then rounded to out_fmt. LSE = m·(scale if scale_in_exp) + log(l), rounded to lse_fmt.
//           A row with no visible key gives O = 0, LSE = −inf.
// Backward (FlashAttention-2 algorithm 2, recomputing P from LSE):
//   step 8: δ_i = Σ_c round(dO_ic · O_ic, delta_prod_fmt) accumulated in fp32, rounded to delta_fmt.
//   step 9: per (key tile, query tile): s as in step 1; p = exp(s − LSE) by exp_mode, rounded to bwd_p_fmt;
//           dV_j += Σ_i round(p_ij, pv_in_fmt) · dO_i;  dP_ij = dO_i·v_j (fp32, rounded to dp_fmt);
//           dS_ij = p_ij · (dP_ij − δ_i) in fp32, rounded to ds_fmt (times scale first if !scale_in_exp);
//           dQ_i += dS_ij · k_j; dK_j += dS_ij · q_i; each tile's partial rounded to grad_partial_fmt and the
//           running sums kept in grad_acc_fmt.
//   step 10: dQ, dK multiplied by scale if scale_in_exp (fa2 scales at the end), rounded to grad_out_fmt.
//            GQA: each query head's dK, dV are rounded to grad_out_fmt, then summed over the group in fp32 and
//            rounded to grad_out_fmt once (FA2's mha_bwd: dk_expanded then at::sum; autograd of an expanded K).
// Additions: block_sum_min (step 4 clamp), log_l_fmt (step 7), ds_term_fmt (step 9) — see the fields.
// fa2 specifics the fields imply: m = −inf is replaced by 0 in every subtraction (FA2's Check_inf); the
// rescale is exp2((m_old − m_new)·c) with c = fp32(scale·log2e); LSE = fmaf(m, scale, logf(l)) (what nvcc
// makes of FA2's `row_max * scale + __logf(row_sum)`); bias enters unscaled scores as fp32(bias / scale).
// The max policy shifts only a finite tile max: fa2's all-masked tile (r = −inf) is left alone, while the
// paper's all-masked tile (r = −max(bf16), finite, every key tied) shifts to 0 exactly as the public code does.
#pragma once

#include <string>

#include "kernels/formats.h"

namespace attncheck {

// How a tile's row max m is chosen.
enum class MaxPolicy : unsigned char {
  kStandard,    // m = max(m_old, r)
  kPaperShift,  // Qiu & Yao, Algorithm 1: if c > 1 scores of the tile lie within `tolerance` of the tile
                // max r (counted as s >= round(r − tolerance, s_fmt), as the public code does in the S format),
                // then r' = beta·r when r > 0, r' = 0 when r < 0, r' = r when r == 0; else r' = r.
};

struct MaxPolicySpec {
  MaxPolicy kind = MaxPolicy::kStandard;
  double beta = 2.0;
  double tolerance = 1e-3;
};

// How exp(s − m) is evaluated.
enum class ExpMode : unsigned char {
  kExpOfRoundedDiff,  // paper (PyTorch bf16 tensors): d = round(s − m, s_fmt); p = round(exp(d), p_fmt)
  kExp2Folded,        // FA2: p = exp2(fma(s, scale·log2e, −m·scale·log2e)) in fp32 (scale_in_exp = true)
};

struct NumericsSpec {
  std::string name;
  // forward
  Format qk_fmt = Format::kF32;
  bool scale_in_exp = true;
  Format s_fmt = Format::kF32;
  Format max_fmt = Format::kF32;
  ExpMode exp_mode = ExpMode::kExp2Folded;
  Format p_fmt = Format::kF32;
  Format pv_in_fmt = Format::kBF16;  // p̄ as it enters the P̄V product (tensor cores take bf16)
  Format block_sum_fmt = Format::kF32;
  Format block_out_fmt = Format::kF32;
  Format rescale_fmt = Format::kF32;
  Format acc_fmt = Format::kF32;
  Format rowsum_fmt = Format::kF32;
  bool reciprocal_normalise = true;  // fa2: o = acc · (1/l); paper: o = acc / l
  Format out_div_fmt = Format::kF32; // format of the normalisation arithmetic (paper: bf16)
  Format out_fmt = Format::kBF16;
  Format lse_fmt = Format::kF32;
  double mask_value = -HUGE_VAL;     // paper: −max(bf16), a finite sentinel
  // Additions (engineer B) for rounding points the fields above cannot express; defaults keep fa2's numerics.
  double block_sum_min = 0.0;        // step 4: block sum = max(block sum, round(block_sum_min, block_sum_fmt))
                                     // after rounding (paper: .clamp(min = 1e-10) on a bf16 tensor); 0 = none
  Format log_l_fmt = Format::kF32;   // step 7: log(l) rounded to this before adding m (paper: bf16)
  bool normalise_by_pv_sum = false;  // steps 4, 6, 7 (fa2-psum): a second row sum l̄ of round(p̄, pv_in_fmt), the
                                     // weights P̄V multiplies, kept as l is (block_sum_fmt, α, rowsum_fmt); O = acc/l̄,
                                     // LSE still from l
  int tile_q = 64;
  int tile_k = 64;
  MaxPolicySpec max_policy;
  // backward
  Format delta_prod_fmt = Format::kF32;
  Format delta_fmt = Format::kF32;
  Format bwd_p_fmt = Format::kF32;
  Format dp_fmt = Format::kF32;
  Format ds_term_fmt = Format::kF32; // step 9 (addition): p·scale (when !scale_in_exp) and dP − δ are each
                                     // rounded to this before their product (paper: bf16, torch's
                                     // left-to-right `p * scale * (dp - D)` on bf16 tensors)
  Format ds_fmt = Format::kBF16;
  Format grad_partial_fmt = Format::kF32;
  Format grad_acc_fmt = Format::kF32;
  Format grad_out_fmt = Format::kBF16;
};

// "fa2", "fa2-fixed", "paper", "paper-fixed" (fixed = MaxPolicy::kPaperShift, beta 2, tolerance 1e-3), and
// "fa2-psum", another fix, built to weigh against the paper's (kernels/cpu/README.md, "Another fix"): fa2 with
// normalise_by_pv_sum, O divided by the sum of the bf16 p̄ that P̄V multiplies.
// Throws attncheck::Error for other names.
NumericsSpec builtin_spec(const std::string& name);

}  // namespace attncheck
