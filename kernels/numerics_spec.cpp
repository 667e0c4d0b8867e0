// numerics_spec.cpp — the built-in numerics specs: fa2, fa2-fixed, paper, paper-fixed, fa2-psum.
//
// Each spec lists where one implementation rounds (see numerics_spec.h for the steps). "paper" follows
// ucker/why-low-precision-training-fails/attention.py with bf16 tensors: every torch op on bf16 tensors
// computes in fp32 and rounds its result to bf16 once. "fa2" follows FlashAttention-2's CUDA kernels
// (flash_fwd_kernel.h, softmax.h, flash_bwd_kernel.h). The -fixed variants add the paper's Algorithm 1
// (MaxPolicy::kPaperShift, beta 2, tolerance 1e-3, as in the public code's STABLE=1 branch). fa2-psum is
// another fix: fa2 with O divided by the sum of the weights P̄V multiplies (numerics_spec.h).
// Tested through the models: ctest -R "FlashModel|PaperTransliteration"
#include "kernels/numerics_spec.h"

#include "harness/problem.h"

namespace attncheck {
namespace {

NumericsSpec fa2_spec() {
  NumericsSpec s;  // the struct's defaults are fa2's numerics; spelled out here so the spec reads as a table
  s.name = "fa2";
  // forward
  s.qk_fmt = Format::kF32;        // tensor-core Q·Kᵀ with fp32 accumulators
  s.scale_in_exp = true;          // scale folded into exp2's argument (scale·log2e)
  s.s_fmt = Format::kF32;
  s.max_fmt = Format::kF32;
  s.exp_mode = ExpMode::kExp2Folded;
  s.p_fmt = Format::kF32;         // p̄ in fp32 registers; the row sum reads these
  s.pv_in_fmt = Format::kBF16;    // converted to bf16 for the P̄V MMA
  s.block_sum_fmt = Format::kF32;
  s.block_out_fmt = Format::kF32;
  s.rescale_fmt = Format::kF32;
  s.acc_fmt = Format::kF32;       // acc_o stays in fp32 registers across key blocks
  s.rowsum_fmt = Format::kF32;
  s.reciprocal_normalise = true;  // o = acc · (1/l)
  s.out_div_fmt = Format::kF32;
  s.out_fmt = Format::kBF16;      // one rounding of the normalised output
  s.lse_fmt = Format::kF32;
  s.mask_value = -HUGE_VAL;       // masked scores are −inf; m = −inf is handled as 0 in subtractions
  s.block_sum_min = 0.0;
  s.log_l_fmt = Format::kF32;
  // backward
  s.delta_prod_fmt = Format::kF32;  // bf16·bf16 is exact in fp32
  s.delta_fmt = Format::kF32;
  s.bwd_p_fmt = Format::kF32;
  s.dp_fmt = Format::kF32;
  s.ds_term_fmt = Format::kF32;
  s.ds_fmt = Format::kBF16;         // dS cast to bf16 for the dQ, dK MMAs
  s.grad_partial_fmt = Format::kF32;
  s.grad_acc_fmt = Format::kF32;
  s.grad_out_fmt = Format::kBF16;
  return s;
}

NumericsSpec paper_spec() {
  NumericsSpec s;
  s.name = "paper";
  // forward: attn_weights = einsum(q, k) * scale -> bf16(bf16(Q·Kᵀ) · scale)
  s.qk_fmt = Format::kBF16;
  s.scale_in_exp = false;
  s.s_fmt = Format::kBF16;
  s.max_fmt = Format::kBF16;                 // amax and torch.maximum on bf16 tensors
  s.exp_mode = ExpMode::kExpOfRoundedDiff;   // torch.exp(attn_weights - new_row_maxes)
  s.p_fmt = Format::kBF16;
  s.pv_in_fmt = Format::kBF16;
  s.block_sum_fmt = Format::kBF16;           // exp_weights.sum(-1) on bf16: fp32 accumulate, one rounding
  s.block_out_fmt = Format::kBF16;           // einsum(exp_weights, vc): fp32 accumulate, one rounding
  s.rescale_fmt = Format::kBF16;             // torch.exp(row_maxes - new_row_maxes)
  s.acc_fmt = Format::kBF16;                 // oc.mul_(α).add_(exp_values): two roundings
  s.rowsum_fmt = Format::kBF16;              // α * row_sums + block_row_sums: two roundings
  s.reciprocal_normalise = false;            // oc.div_(row_sums)
  s.out_div_fmt = Format::kBF16;
  s.out_fmt = Format::kBF16;
  s.lse_fmt = Format::kBF16;                 // all_row_sums.log() + all_row_maxes
  s.log_l_fmt = Format::kBF16;
  s.mask_value = -format_info(Format::kBF16).max_finite;  // -torch.finfo(bf16).max, also the initial max
  s.block_sum_min = 1e-10;                   // .clamp(min = EPSILON)
  // backward
  s.delta_prod_fmt = Format::kBF16;          // D = (doc * oc).sum(-1): bf16 products, then a bf16 sum
  s.delta_fmt = Format::kBF16;
  s.bwd_p_fmt = Format::kBF16;               // p = torch.exp(attn_weights - lsec)
  s.dp_fmt = Format::kBF16;                  // dp = einsum(doc, vc)
  s.ds_term_fmt = Format::kBF16;             // p * scale, dp - D
  s.ds_fmt = Format::kBF16;
  s.grad_partial_fmt = Format::kBF16;        // each einsum chunk rounded
  s.grad_acc_fmt = Format::kBF16;            // dqc.add_(chunk): rounded adds
  s.grad_out_fmt = Format::kBF16;
  return s;
}

void make_fixed(NumericsSpec& s) {
  s.name += "-fixed";
  s.max_policy.kind = MaxPolicy::kPaperShift;
  s.max_policy.beta = 2.0;        // the public code's `2. * block_row_maxes`
  s.max_policy.tolerance = 1e-3;  // the public code's `block_row_maxes - 1e-3`
}

}  // namespace

NumericsSpec builtin_spec(const std::string& name) {
  if (name == "fa2") return fa2_spec();
  if (name == "paper") return paper_spec();
  if (name == "fa2-fixed") {
    NumericsSpec s = fa2_spec();
    make_fixed(s);
    return s;
  }
  if (name == "paper-fixed") {
    NumericsSpec s = paper_spec();
    make_fixed(s);
    return s;
  }
  if (name == "fa2-psum") {
    NumericsSpec s = fa2_spec();
    s.name = name;
    s.normalise_by_pv_sum = true;  // O = Σ p̄ v / Σ p̄ over the bf16 p̄ step 5 multiplies: weights summing to 1
    return s;
  }
  throw Error("unknown numerics spec '" + name + "' (known: fa2, fa2-fixed, paper, paper-fixed, fa2-psum)");
}

}  // namespace attncheck
