// flash_model_steps.h — the per-element steps shared by the CPU model's forward and backward passes
// (internal to kernels/cpu/): input conversion, step 1 (one score), the exp of steps 3, 6 and 9.
//
// Invariants: every function computes in float with -ffp-contract=off (the top CMakeLists.txt), so each
// a*b+c is two roundings unless written as std::fma; rounding to a spec format goes through round_float
// (kernels/formats.h), which is exact for float and bit-identical to round_to for narrower formats.
#pragma once

#include <cmath>
#include <vector>

#include "harness/problem.h"
#include "kernels/numerics_spec.h"

namespace attncheck::model_detail {

// Spec constants in the float form the kernels use them.
struct Consts {
  float scale;       // Problem::scale (fp32-representable)
  float scale_log2;  // FA2's params.scale_softmax_log2 = float(softmax_scale * M_LOG2E), the product in double
  float log2e;       // float(M_LOG2E), FA2's backward multiplies LSE by it
  float mask;        // the masked-score value (−inf, or the paper's −max(bf16))
  float beta;        // max policy β as the torch scalar enters an fp32 opmath multiply
  float tol;         // max policy tolerance, likewise
  float sum_min;     // step 4 clamp, already rounded to block_sum_fmt (torch clamps a bf16 tensor)
  bool folded;       // exp_mode == kExp2Folded
};

inline Consts make_consts(const NumericsSpec& spec, const Problem& p) {
  Consts c;
  c.scale = static_cast<float>(p.scale);
  c.scale_log2 = static_cast<float>(static_cast<double>(c.scale) * 1.4426950408889634);
  c.log2e = static_cast<float>(1.4426950408889634);
  c.mask = static_cast<float>(spec.mask_value);
  c.beta = static_cast<float>(spec.max_policy.beta);
  c.tol = static_cast<float>(spec.max_policy.tolerance);
  c.sum_min = round_float(static_cast<float>(spec.block_sum_min), spec.block_sum_fmt);
  c.folded = spec.exp_mode == ExpMode::kExp2Folded;
  return c;
}

inline std::vector<float> to_float(const std::vector<double>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);  // exact: inputs are ≤ fp32
  return out;
}

// step 1: one visible score. q·k accumulated in fp32 in head-dimension order (products of ≤ 12-bit
// significands are exact in fp32, so mul-then-add equals fma here), rounded to qk_fmt; the paper scales in
// s_fmt; bias is added in fp32 (fa2 adds fp32(bias/scale) to the unscaled score, as FA2 adds ALiBi).
inline float step1_score(const NumericsSpec& spec, const Consts& c, const float* q, const float* k, int d,
                         const double* bias) {
  float acc = 0.0f;
  for (int t = 0; t < d; ++t) acc = acc + q[t] * k[t];
  float s = round_float(acc, spec.qk_fmt);
  if (!spec.scale_in_exp) s = round_float(s * c.scale, spec.s_fmt);
  if (bias) {
    const float b = static_cast<float>(*bias);
    s = spec.scale_in_exp ? round_float(s + b / c.scale, spec.s_fmt) : round_float(s + b, spec.s_fmt);
  }
  return s;
}

// exp(s − m) as the spec evaluates it (steps 3 and 9), before rounding to p_fmt / bwd_p_fmt.
// folded (fa2): exp2(fma(s, scale·log2e, −m_scaled)); m_scaled is m·scale·log2e (forward) or LSE·log2e
// (backward), computed once per row by the caller. Otherwise (paper): exp(round(s − m, s_fmt)).
inline float exp_shifted(const NumericsSpec& spec, const Consts& c, float s, float m, float m_scaled) {
  if (c.folded) return std::exp2(std::fma(s, c.scale_log2, -m_scaled));
  return std::exp(round_float(s - m, spec.s_fmt));
}

}  // namespace attncheck::model_detail
