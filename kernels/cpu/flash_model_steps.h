// flash_model_steps.h — the per-element steps shared by the CPU model's forward and backward passes
// (internal to kernels/cpu/): the spec's rounding formats as one table, input conversion, step 1 (scores of
// one query against all keys), the exp of steps 3, 6 and 9.
//
// Invariants: every function computes in float with -ffp-contract=off (the top CMakeLists.txt), so each
// a*b+c is two roundings unless written as std::fma; rounding to a spec format goes through round_float
// (kernels/formats.h, always inlined): exact for float, bit-identical to round_to for narrower formats.
// Speed (the fuzz target runs ~10 model calls per input): the passes are templates on a Formats accessor.
// FixedFormats<table> makes every format a compile-time constant (the built-in specs' tables: the rounding
// branches vanish and the elementwise loops vectorise); DynamicFormats reads them from the spec at run time
// (any other spec). Both instantiate the same code, so they round identically (FlashModel.FastPathsEqual...).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness/problem.h"
#include "kernels/numerics_spec.h"

namespace attncheck::model_detail {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The data loops below (conversion, transposition, dot products, weighted sums) have no branch that depends on a
// value: under libFuzzer their edge counters would only count loop trips, at a counter update per iteration of
// the hottest loops of a fuzz run. Clang builds keep them out of line and uninstrumented; the models' own
// branches (masks, ties, the max policy, empty rows) keep their coverage.
#if defined(__clang__)
#define ATTNCHECK_DATA_LOOP __attribute__((noinline, no_sanitize("coverage")))
#else
#define ATTNCHECK_DATA_LOOP
#endif

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

// std::exp of every bf16 value, indexed by its 16 storage bits: the function itself on its whole bf16 domain,
// so a lookup is std::exp's result bit for bit (NaN patterns included). Built on first use (65,536 expf calls,
// well under a millisecond; thread-safe static). The paper evaluates exp on bf16 differences: one expf per
// visible key was the largest single cost of its forward pass.
inline const float* bf16_exp_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(std::size_t(1) << 16);
    for (std::uint32_t u = 0; u < t.size(); ++u) t[u] = std::exp(bits_to_float(u << 16));
    return t;
  }();
  return table.data();
}

// round_bf16 of every entry of bf16_exp_table(): exp of a bf16 argument already rounded to bf16, as steps 3 and 9
// round p̄ / p when p_fmt / bwd_p_fmt is bf16 (the paper). The same bits as rounding the lookup at run time (the
// table holds exactly that rounding, NaN patterns kept as round_bf16 keeps them); one rounding less per score.
inline const float* bf16_exp_bf16_table() {
  static const std::vector<float> table = [] {
    const float* e = bf16_exp_table();
    std::vector<float> t(std::size_t(1) << 16);
    for (std::size_t u = 0; u < t.size(); ++u) t[u] = round_bf16(e[u]);
    return t;
  }();
  return table.data();
}

// Spec constants in the float form the kernels use them.
struct Consts {
  float scale;       // Problem::scale (fp32-representable)
  float scale_log2e;  // FA2's params.scale_softmax_log2 = float(softmax_scale * M_LOG2E), the product in double
  float log2e;       // float(M_LOG2E), FA2's backward multiplies LSE by it
  float mask;        // the masked-score value (−inf, or the paper's −max(bf16))
  float beta;        // max policy β as the torch scalar enters an fp32 opmath multiply
  float tol;         // max policy tolerance, likewise
  float sum_min;     // step 4 clamp, already rounded to block_sum_fmt (torch clamps a bf16 tensor)
  const float* exp_bf16;  // bf16_exp_table() when s_fmt is bf16 (exp of rounded differences), else null
  const float* exp_bf16_bf16;  // bf16_exp_bf16_table() when s_fmt is bf16, else null
};

inline Consts make_consts(const NumericsSpec& spec, const Problem& p) {
  Consts c;
  c.scale = static_cast<float>(p.scale);
  c.scale_log2e = static_cast<float>(static_cast<double>(c.scale) * 1.4426950408889634);
  c.log2e = static_cast<float>(1.4426950408889634);
  c.mask = static_cast<float>(spec.mask_value);
  c.beta = static_cast<float>(spec.max_policy.beta);
  c.tol = static_cast<float>(spec.max_policy.tolerance);
  c.sum_min = round_float(static_cast<float>(spec.block_sum_min), spec.block_sum_fmt);
  c.exp_bf16 = spec.s_fmt == Format::kBF16 ? bf16_exp_table() : nullptr;  // looked up once per pass
  c.exp_bf16_bf16 = spec.s_fmt == Format::kBF16 ? bf16_exp_bf16_table() : nullptr;
  return c;
}

ATTNCHECK_DATA_LOOP inline std::vector<float> to_float(const std::vector<double>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);  // exact: inputs are ≤ fp32
  return out;
}

// Row lengths padded to whole register blocks (kLanes floats): the padding is zeros, and what the loops below
// compute in it is never read.
constexpr int kLanes = 8;
inline int padded(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

// x as `rows` rows of d floats, each stored in `stride` (>= d) floats, the rest zero.
ATTNCHECK_DATA_LOOP inline std::vector<float> to_float_rows(const std::vector<double>& x, std::size_t rows, int d,
                                                            int stride) {
  std::vector<float> out(rows * stride, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (int t = 0; t < d; ++t) out[r * stride + t] = static_cast<float>(x[r * d + t]);  // exact: inputs are ≤ fp32
  return out;
}

// One (batch, head) slice of a [.., n, d] tensor transposed to [d][stride] floats (stride >= n, zero padded):
// column t of every row is contiguous, so dots() can run over all rows at once.
ATTNCHECK_DATA_LOOP inline void transpose_slice(const std::vector<double>& x, std::size_t at, int n, int d,
                                                int stride, std::vector<float>& out) {
  out.assign(std::size_t(stride) * d, 0.0f);
  for (int j = 0; j < n; ++j)
    for (int t = 0; t < d; ++t) out[std::size_t(t) * stride + j] = static_cast<float>(x[at + std::size_t(j) * d + t]);
}

// The inner loop of the passes, register-blocked: out[l] = out[l] + Σ_k x[k]·m[k][l] over k = 0..n−1 in
// order (m's rows `stride` floats apart), for kBlocks·kLanes columns l whose sums stay in registers across the
// whole reduction (the fixed-length lane loops unroll) instead of a load and a store per term; up to 4 blocks
// (8 SSE registers) keep enough additions in flight to hide their latency.
template <int kBlocks>
[[gnu::always_inline]] inline void add_weighted_rows_block(const float* x, const float* m, std::size_t stride, int n,
                                                           float* out) {
  float acc[kBlocks * kLanes];
  for (int l = 0; l < kBlocks * kLanes; ++l) acc[l] = out[l];
  for (int k = 0; k < n; ++k) {
    const float w = x[k];
    const float* row = m + std::size_t(k) * stride;
    for (int l = 0; l < kBlocks * kLanes; ++l) acc[l] = acc[l] + w * row[l];
  }
  for (int l = 0; l < kBlocks * kLanes; ++l) out[l] = acc[l];
}

// add_weighted_rows_block over the columns of `width`: blocks of kMax, then one block of what is left (kMax − 1 at
// most): each column its own block lane, so the blocking changes no sum.
template <int kBlocks>
[[gnu::always_inline]] inline void add_weighted_rows_tail(int blocks, const float* w, const float* rows, int n,
                                                          int width, float* out) {
  if constexpr (kBlocks > 0) {
    if (blocks == kBlocks) return add_weighted_rows_block<kBlocks>(w, rows, width, n, out);
    add_weighted_rows_tail<kBlocks - 1>(blocks, w, rows, n, width, out);
  }
}
template <int kMax>
[[gnu::always_inline]] inline void add_weighted_rows_blocks(const float* w, const float* rows, int n, int width,
                                                            float* out) {
  int c0 = 0;
  for (; width - c0 >= kMax * kLanes; c0 += kMax * kLanes)
    add_weighted_rows_block<kMax>(w, rows + c0, width, n, out + c0);
  add_weighted_rows_tail<kMax - 1>((width - c0) / kLanes, w, rows + c0, n, width, out + c0);
}

// On x86-64 CPUs with AVX2 (checked once, at run time: the binaries stay baseline x86-64, and the GPU bundle's host
// code runs on any host), the same loops compiled for AVX2: 8-float registers, up to 8 blocks (64 sums) in flight.
// Same bits: each out[t] is still its own sequential sum of mul-then-add in the same order, and nothing is
// contracted (the "avx2" target does not enable FMA, and the build passes -ffp-contract=off: CMakeLists.txt). Test:
// FlashModel.WeightedRowSumsAreTheScalarLoopBitForBitOnEveryPath. Measured: kernels/cpu/README.md. A data loop like
// the others (ATTNCHECK_DATA_LOOP: no coverage counters under libFuzzer, where most sums take this path).
#if defined(__x86_64__) && defined(__GNUC__)
#define ATTNCHECK_AVX2_DISPATCH 1
[[gnu::target("avx2")]] ATTNCHECK_DATA_LOOP inline void add_weighted_rows_avx2(const float* w, const float* rows,
                                                                              int n, int width, float* out) {
  add_weighted_rows_blocks<8>(w, rows, n, width, out);
}
inline bool have_avx2() {
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));  // init: safe before main too
  return yes;
}
#endif

// The weighted row sums of steps 5 and 9: out[t] = out[t] + w[j]·rows[j][t] for j = 0..n−1 in order (row j at
// rows + j·width, width = padded(d), a multiple of kLanes), each out[t] its own fp32 sum in key (or query)
// order, as the loop `for j: for t:` adds them.
ATTNCHECK_DATA_LOOP inline void add_weighted_rows(const float* w, const float* rows, int n, int width, float* out) {
#ifdef ATTNCHECK_AVX2_DISPATCH
  // A short sum stays inline (a call and the check cost more than it: fa2 with 1-key tiles ran 15% slower).
  if (n >= 8 && have_avx2()) return add_weighted_rows_avx2(w, rows, n, width, out);
#endif
  add_weighted_rows_blocks<4>(w, rows, n, width, out);  // SSE: 4 blocks are 8 registers
}

// step 1 (and dP of step 9), the dot products: out[j] = Σ_t a[t]·bt[t][j] for j < width (bt: [d][width],
// width = padded(n)), each accumulated in fp32 in head-dimension order starting from 0 (products of ≤ 12-bit
// significands are exact in fp32, so mul-then-add equals fma here). The sums are independent, so they run side
// by side without changing any sum's order: each out[j] is the scalar loop `acc = acc + a[t] * b_j[t]` bit for
// bit. It is the weighted row sum above with the roles swapped: weights a[t], rows bt[t].
ATTNCHECK_DATA_LOOP inline void dots(const float* a, const float* bt, int width, int d, float* out) {
  std::fill(out, out + width, 0.0f);
  add_weighted_rows(a, bt, d, width, out);
}

// step 1 after the dot product: rounded to qk_fmt; the paper scales in s_fmt; bias is added in fp32 (fa2 adds
// fp32(bias/scale) to the unscaled score, as FA2 adds ALiBi).
[[gnu::always_inline]] inline float finish_score(const FormatTable& f, const Consts& c, float acc,
                                                 const double* bias) {
  float s = round_float(acc, f.qk);
  if (!f.scale_in_exp) s = round_float(s * c.scale, f.s);
  if (bias) {
    const float b = static_cast<float>(*bias);
    s = f.scale_in_exp ? round_float(s + b / c.scale, f.s) : round_float(s + b, f.s);
  }
  return s;
}

// exp(x) for x rounded to s_fmt (std::exp of that float; a table lookup when s_fmt is bf16).
[[gnu::always_inline]] inline float exp_of_rounded(const FormatTable& f, const Consts& c, float x) {
  if (f.s == Format::kBF16) return c.exp_bf16[float_to_bits(x) >> 16];
  return std::exp(x);
}

// exp(s − m) as the spec evaluates it (steps 3 and 9), before rounding to p_fmt / bwd_p_fmt.
// folded (fa2): exp2(fma(s, scale·log2e, −m_scaled)); m_scaled is m·scale·log2e (forward) or LSE·log2e
// (backward), computed once per row by the caller. Otherwise (paper): exp(round(s − m, s_fmt)).
[[gnu::always_inline]] inline float exp_shifted(const FormatTable& f, const Consts& c, float s, float m,
                                                float m_scaled) {
  if (f.folded) return std::exp2(std::fma(s, c.scale_log2e, -m_scaled));
  return exp_of_rounded(f, c, round_float(s - m, f.s));
}

// exp_shifted rounded to `out` (p_fmt or bwd_p_fmt): for the paper's formats (bf16 difference, bf16 result) one
// lookup in the pre-rounded table, else the rounding of exp_shifted.
[[gnu::always_inline]] inline float exp_shifted_to(const FormatTable& f, const Consts& c, float s, float m,
                                                   float m_scaled, Format out) {
  if (!f.folded && f.s == Format::kBF16 && out == Format::kBF16)
    return c.exp_bf16_bf16[float_to_bits(round_float(s - m, f.s)) >> 16];
  return round_float(exp_shifted(f, c, s, m, m_scaled), out);
}

// round_float(x, to) for an x already rounded to `from`: the identity when both are the same fp32 or bf16
// (round_bf16 is idempotent: a bf16 value's low 16 bits are 0, so the rounding increment never carries, and a
// NaN is returned as it is); with FixedFormats the test folds away and so does the rounding.
[[gnu::always_inline]] inline bool rounds_to_itself(Format from, Format to) {
  return from == to && (to == Format::kBF16 || to == Format::kF32);
}
[[gnu::always_inline]] inline float round_again(float x, Format from, Format to) {
  return rounds_to_itself(from, to) ? x : round_float(x, to);
}

}  // namespace attncheck::model_detail
