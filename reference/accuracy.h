// accuracy.h — FlashAttention's acceptance rule as a pure function: a kernel's error against the exact (fp64)
// result may be at most `factor` times the error of a plain, non-tiled attention in the same low precision,
// plus an fp32 noise floor. Used by the CPU-model unit tests and by the property suite's accuracy property,
// once per tensor (O, LSE, dQ, dK, dV).
//
//   ok  ⇔  max_i |kernel_i − exact_i|  ≤  factor · max_i |plain_i − exact_i|  +  floor   (the bound),
//   (with the output format given: per element, the bound or one ulp of the format, whichever is larger; below)
//   floor = floor_scale · 2^-24 · max_i |exact_i|   (2^-24: fp32's unit roundoff; max over finite entries).
//
// Where this comes from: FlashAttention's tests (tests/test_flash_attn.py) assert
// (out − out_ref).abs().max() ≤ 2·(out_pt − out_ref).abs().max() + atol, with out_pt a plain PyTorch attention
// in the kernel's precision, and (in the later tests) atol = 2·|(out_ref + 0.3) − 0.3 − out_ref|.max(): fp32
// rounding noise at the scale of the output, i.e. about 2–4 unit roundoffs of max|out_ref|. We keep the
// scale-free part of that: by default floor_scale = 4 (4·2^-24·max|exact|: 2 to 4 fp32 ulps of the largest exact
// entry, by where it sits in its binade). It covers the
// case where the plain attention happens to be exact (e.g. an output that is a bf16 value) while the kernel,
// summing in fp32 in another order, lands a few fp32 ulps off. It is 2^14 to 2^15 times smaller than a bf16 ulp, so
// it excuses no bf16-level error. Tensors accumulated in fp32 over long sums (dK, dV over n_q rows) can pass
// floor_scale = fp32_accumulation_floor_scale(n): see there.
//
// Non-finite entries: where exact is ±inf (LSE of a fully masked row) the kernel must give that same value;
// where exact is NaN the kernel must give NaN; where exact is finite a NaN from the kernel always fails. Such
// entries enter neither maximum. Plain entries that are not finite where exact is finite do not enter
// plain_err: a broken baseline must not excuse the kernel.
//
// A kernel's ±inf where exact is finite depends on whether the output format is known (`out_format`):
//   * out_format = kF64 (unknown; the legacy form every caller without a format gets): ±inf passes only where
//     the plain attention overflows to that same inf.
//   * a real format f (bf16 for O/dQ/dK/dV, fp32 for LSE/δ): ±inf passes iff it is a faithful rounding of
//     the exact value in f, i.e. |exact| > max_finite(f) with the same sign. Derivation: in f extended by
//     ±inf, the two neighbours of an exact x with max_finite < |x| are ±max_finite and ±inf, so ±inf is one
//     of them; round-to-nearest picks it once |x| >= max_finite + ulp/2 (the kernel's inf is then the correct
//     rounding; the plain attention, which overflows in an intermediate and gives NaN, cannot be the judge),
//     and stochastic rounding picks it with probability (|x| − max_finite)/ulp. For |x| <= max_finite an inf
//     is never a rounding of x: it fails whatever the plain attention gives (a wrong infinity is not excused
//     by a baseline that overflows too).
// Per-element one-ulp allowance (only with a real format f): entry i passes when
//   |kernel_i − exact_i| <= max(bound, ulp_f(exact_i)),
// ulp_f(x) = the spacing of f's numbers in x's binade (kernels/formats.h). Any faithful rounding of x (round
// to nearest, directed, or stochastic) lies on one of x's two neighbours in f, which are ulp_f(x) apart, so it
// errs by at most ulp_f(x): the output format cannot promise more, and the null controls (`oracle`: one RN
// rounding; `stochastic`: one SR rounding) must pass. The 2× rule alone would reject stochastic rounding
// wherever the plain attention happens to err by < 1/2 ulp. The allowance is per element, at that element's
// own exact value (a tensor-wide "within one ulp of the largest entry" would excuse large relative errors in
// small entries). ok ⇔ every entry passes; kernel_err, plain_err, floor, bound are reported as before.
// Sizes must match (attncheck::Error otherwise). Run its tests: ctest -R accuracy
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/formats.h"

namespace attncheck {

struct AccuracyCheck {
  bool ok = true;
  double kernel_err = 0;  // max |kernel − exact| over entries where both are finite
  double plain_err = 0;   // max |plain − exact| over entries where both are finite
  double floor = 0;       // floor_scale · 2^-24 · max |exact| (finite entries)
  double bound = 0;       // factor · plain_err + floor
  double ratio = 0;       // max over finite entries of |kernel − exact| / that entry's allowance (the bound, or
                          // with a format the larger of it and one ulp); <= 1 iff those entries pass; 1e30 for
                          // an error against a zero allowance, and for a bad non-finite entry (JSON has no
                          // infinity)
  std::size_t worst = 0;  // the deciding index: the first bad non-finite entry, else the entry furthest past
                          // its allowance (failing), else the largest kernel error (passing)
  std::string message;    // one line: verdict, the worst index with its three values, the numbers above
};

constexpr double kDefaultFloorScale = 4.0;

// The floor scale for a tensor whose elements are fp32 sums of n terms. Two summation orders of the same n
// terms each err by at most γ_{n−1}·Σ|t| ≈ (n−1)·2^-24·Σ|t| (Higham, Thm 4.4), so they differ by at most
// 2(n−1)·2^-24·Σ|t|; with terms of one sign Σ|t| = |sum| ≤ max|exact|. Adding the default 4 for the final
// stores gives 2n + 2, rounded up to 4 + 2n. (Mixed signs can exceed this: dQ sums dS rows, which sum to 0, dK sums
// dS columns, dV sums P·dO with dO of either sign; but then the plain attention's error, the rule's main term, grows
// alike.)
double fp32_accumulation_floor_scale(std::size_t n);

// message_on_pass = false leaves `message` empty when ok (everything else is the same): for callers that read
// the message of a failure only (the `accurate` property, five calls per fuzz input: formatting the numbers of
// every passing call was ~1% of a fuzz run).
// `noise` (optional, one entry per element, >= 0): an error the kernel may make that the plain attention cannot
// share, derived by the caller (the `accurate` property's δ/dP cancellation: props_basic.cpp). An element within it
// passes, as one within the bound or one ulp does: each alone explains the error. The allowance is the largest of
// the three, not their sum, so noise never widens the margin of an error the 2x rule already judges (a δ error
// that the rule catches at 1.5x its bound stays caught); the message names it where it is not 0.
AccuracyCheck accuracy_rule(const std::vector<double>& kernel, const std::vector<double>& plain,
                            const std::vector<double>& exact, double factor = 2.0,
                            double floor_scale = kDefaultFloorScale, Format out_format = Format::kF64,
                            bool message_on_pass = true, const std::vector<double>* noise = nullptr);

}  // namespace attncheck
