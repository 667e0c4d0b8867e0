// flash_model_steps.h — the per-element steps shared by the CPU model's forward and backward passes
// (internal to kernels/cpu/): the spec's rounding formats as one table, input conversion, step 1 (scores of
// one query against all keys), the exp of steps 3, 6 and 9.
//
// Invariants: every function computes in float with -ffp-contract=off (the top CMakeLists.txt), so each
// a*b+c is two roundings unless written as std::fma; rounding to a spec format goes through rnd(), which is
// round_float (kernels/formats.h) spelled out so that it inlines: exact for float, bit-identical to round_to
// for narrower formats.
// Speed (the fuzz target runs ~10 model calls per input): the passes are templates on a Formats accessor.
// FixedFormats<table> makes every format a compile-time constant (the built-in specs' tables: the rounding
// branches vanish and the elementwise loops vectorise); DynamicFormats reads them from the spec at run time
// (any other spec). Both instantiate the same code, so they round identically (FlashModel.FastPathsEqual...).
#pragma once

#include <cmath>
#include <vector>

#include "harness/problem.h"
#include "kernels/numerics_spec.h"

namespace attncheck::model_detail {

// Every rounding format of a spec, plus the choices that change the arithmetic (not the max policy, not tiles).
struct FormatTable {
  Format qk, s, max, p, pv_in, block_sum, block_out, rescale, acc, rowsum, out_div, out, lse, log_l;  // forward
  Format delta_prod, delta, bwd_p, dp, ds_term, ds, grad_partial, grad_acc, grad_out;                // backward
  bool scale_in_exp, folded, reciprocal;
  constexpr bool operator==(const FormatTable&) const = default;
};

inline FormatTable format_table(const NumericsSpec& s) {
  return {s.qk_fmt,         s.s_fmt,     s.max_fmt,   s.p_fmt,    s.pv_in_fmt,        s.block_sum_fmt,
          s.block_out_fmt,  s.rescale_fmt, s.acc_fmt, s.rowsum_fmt, s.out_div_fmt,    s.out_fmt,
          s.lse_fmt,        s.log_l_fmt, s.delta_prod_fmt, s.delta_fmt, s.bwd_p_fmt,  s.dp_fmt,
          s.ds_term_fmt,    s.ds_fmt,    s.grad_partial_fmt, s.grad_acc_fmt, s.grad_out_fmt,
          s.scale_in_exp,   s.exp_mode == ExpMode::kExp2Folded, s.reciprocal_normalise};
}

// The built-in specs' tables (numerics_spec.cpp; -fixed variants share their base's). A test pins them to
// builtin_spec(), so a spec edit that the table misses only loses the fast path, never changes a result.
constexpr Format kF = Format::kF32, kB = Format::kBF16;
constexpr FormatTable kFa2Formats{kF, kF, kF, kF, kB, kF, kF, kF, kF, kF, kF, kB, kF, kF,
                                  kF, kF, kF, kF, kF, kB, kF, kF, kB, true, true, true};
constexpr FormatTable kPaperFormats{kB, kB, kB, kB, kB, kB, kB, kB, kB, kB, kB, kB, kB, kB,
                                    kB, kB, kB, kB, kB, kB, kB, kB, kB, false, false, false};

template <FormatTable kTable>
struct FixedFormats {
  static constexpr FormatTable get() { return kTable; }
};
struct DynamicFormats {
  FormatTable table;
  FormatTable get() const { return table; }
};

// round_float(x, f) (kernels/formats.h), always inlined: with a constant f it is the identity or one bf16 add-mask.
[[gnu::always_inline]] inline float rnd(float x, Format f) {
  if (f == Format::kF32 || f == Format::kF64) return x;
  if (f == Format::kBF16) return round_bf16(x);
  return round_float(x, f);
}

// Spec constants in the float form the kernels use them.
struct Consts {
  float scale;       // Problem::scale (fp32-representable)
  float scale_log2;  // FA2's params.scale_softmax_log2 = float(softmax_scale * M_LOG2E), the product in double
  float log2e;       // float(M_LOG2E), FA2's backward multiplies LSE by it
  float mask;        // the masked-score value (−inf, or the paper's −max(bf16))
  float beta;        // max policy β as the torch scalar enters an fp32 opmath multiply
  float tol;         // max policy tolerance, likewise
  float sum_min;     // step 4 clamp, already rounded to block_sum_fmt (torch clamps a bf16 tensor)
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
  return c;
}

inline std::vector<float> to_float(const std::vector<double>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);  // exact: inputs are ≤ fp32
  return out;
}

// One (batch, kv head) slice of a [.., n, d] tensor transposed to [d][n] floats: column t of every row is
// contiguous, so dots() can run over all rows at once.
inline void transpose_slice(const std::vector<double>& x, std::size_t at, int n, int d, std::vector<float>& out) {
  out.resize(std::size_t(n) * d);
  for (int j = 0; j < n; ++j)
    for (int t = 0; t < d; ++t) out[std::size_t(t) * n + j] = static_cast<float>(x[at + std::size_t(j) * d + t]);
}

// step 1 (and dP of step 9), the dot products: out[j] = Σ_t a[t]·bt[t][j] for j < n, each accumulated in fp32
// in head-dimension order starting from 0 (products of ≤ 12-bit significands are exact in fp32, so
// mul-then-add equals fma here). The n sums are independent, so the loop over j vectorises without changing
// any sum's order: each out[j] is the scalar loop `acc = acc + a[t] * b_j[t]` bit for bit.
inline void dots(const float* a, const float* bt, int n, int d, float* out) {
  for (int j = 0; j < n; ++j) out[j] = 0.0f;
  for (int t = 0; t < d; ++t) {
    const float x = a[t];
    const float* col = bt + std::size_t(t) * n;
    for (int j = 0; j < n; ++j) out[j] = out[j] + x * col[j];
  }
}

// step 1 after the dot product: rounded to qk_fmt; the paper scales in s_fmt; bias is added in fp32 (fa2 adds
// fp32(bias/scale) to the unscaled score, as FA2 adds ALiBi).
[[gnu::always_inline]] inline float finish_score(const FormatTable& f, const Consts& c, float acc,
                                                 const double* bias) {
  float s = rnd(acc, f.qk);
  if (!f.scale_in_exp) s = rnd(s * c.scale, f.s);
  if (bias) {
    const float b = static_cast<float>(*bias);
    s = f.scale_in_exp ? rnd(s + b / c.scale, f.s) : rnd(s + b, f.s);
  }
  return s;
}

// exp(s − m) as the spec evaluates it (steps 3 and 9), before rounding to p_fmt / bwd_p_fmt.
// folded (fa2): exp2(fma(s, scale·log2e, −m_scaled)); m_scaled is m·scale·log2e (forward) or LSE·log2e
// (backward), computed once per row by the caller. Otherwise (paper): exp(round(s − m, s_fmt)).
[[gnu::always_inline]] inline float exp_shifted(const FormatTable& f, const Consts& c, float s, float m,
                                                float m_scaled) {
  if (f.folded) return std::exp2(std::fma(s, c.scale_log2, -m_scaled));
  return std::exp(rnd(s - m, f.s));
}

}  // namespace attncheck::model_detail
