// mma_model.h — a parameterised model of how one mma.sync m16n8k16 (bf16 x bf16 + fp32 -> fp32) adds up one
// output element, d = c + Σ_{k<16} a_k·b_k, usable from host and device code.
//
// The model (after Fasi et al. 2021 and Khattak & Mikaitis 2025 on NVIDIA tensor cores): the 16 products are
// split into groups of `group` consecutive k; per group, the products (exact: 8-bit x 8-bit significands) and
// the running value are aligned to the largest exponent among them, each is cut to a multiple of
// 2^max(emax − frac_bits, −158) (toward zero, down, or to nearest: `cut`), the cut terms are summed exactly,
// and the sum is rounded once to fp32 (toward zero or to nearest). mma_probe measures which parameters the
// hardware follows (TENSOR_CORES.md); kMeasuredMmaModel holds the answer so a CPU twin of the CUDA kernels can
// call mma_k16(...) where the CUDA kernel issues an mma. Edges (TENSOR_CORES.md, rule 7; H100 and H200 unless said):
// a sum of 2^128 or more is ±inf and stays so through later k16 steps; non-finite inputs add as IEEE adds;
// subnormals are kept and align at exponent −126 (H200); no cut is finer than 2^-158 (H200); a zero result is +0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

#include "kernels/formats.h"

namespace attncheck {

enum class MmaCut : unsigned char { kTowardZero, kFloor, kNearest };  // how aligned terms lose low bits

struct MmaModel {
  int group = 16;                    // products summed together per step (16 = the whole k16 at once)
  int frac_bits = 24;                // bits kept below the alignment exponent
  MmaCut cut = MmaCut::kTowardZero;  // kFloor = two's-complement truncation (negative terms round down)
  bool round_nearest = false;        // final rounding to fp32: nearest-even (else toward zero)
  bool c_in_align = true;            // the running value is aligned with the products (else added after)
  bool align_exp_sum = false;        // a product's alignment exponent is e(a)+e(b) (its significand may
                                     // reach [2, 4)), else the exponent of the exact product
  constexpr bool operator==(const MmaModel& o) const {  // by hand: the CUDA targets build as C++17
    return group == o.group && frac_bits == o.frac_bits && cut == o.cut && round_nearest == o.round_nearest &&
           c_in_align == o.c_in_align && align_exp_sum == o.align_exp_sum;
  }
};

// What mma_probe_test measured on an H200 (sm_90); TENSOR_CORES.md has the evidence.
constexpr MmaModel kMeasuredMmaModel{16, 25, MmaCut::kTowardZero, false, true, true};

namespace mma_detail {
ATTN_HD double cut(double x, double quantum, MmaCut how) {
  const double r = x / quantum;  // exact: power-of-two scaling
  switch (how) {
    case MmaCut::kFloor: return std::floor(r) * quantum;
    case MmaCut::kNearest: return std::rint(r) * quantum;
    default: return std::trunc(r) * quantum;
  }
}
ATTN_HD float to_f32(double x, bool nearest) {
  // Toward zero (or nearest-even, a model the probes rejected), except that a sum of 2^128 or more is ±inf, as on the
  // GPU (an all-overflowing row's max is −inf on the H200: gpu_matches_cpu_model on large_logits), not the largest
  // finite value IEEE's toward-zero would give. Below 2^128 it truncates: FLT_MAX + 2^103 is FLT_MAX, FLT_MAX + 2^104
  // is +inf (H100 and H200, EdgeInputsAsTheModelSays); rounding to nearest first had made the former +inf.
  // A sum that becomes zero is +0 whatever its sign (−1.5·2^-150 gives +0 on the H100 and the H200).
  float f = static_cast<float>(x);
  if (!nearest) {
    if (std::fabs(x) >= 0x1p128) return x > 0 ? INFINITY : -INFINITY;
    if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);  // from +inf too: FLT_MAX
  }
  return f == 0.0f ? 0.0f : f;
}
// The exponent an operand or the running value aligns at: its own, but −126 (fp32's and bf16's smallest normal
// exponent) for a subnormal, whose exponent field reads as emin. Operands: a bf16 2^-130 times 2^100 sets emax at
// −26, not −30 (the H200, EdgeInputsAsTheModelSays); c: a subnormal c among products near 2^-140 (the H200,
// MeasuredModelHoldsOverTheWholeRange: 9,872 of its 51,200 such outputs are wrong with c at its own exponent).
// x finite, nonzero.
ATTN_HD int align_exponent(float x) { return std::max(ilogb_normal(x), -126); }
// The finest cut: terms are never cut below 2^-158 (9 bits under fp32's smallest subnormal), whatever emax — fitted
// on the H200 (MeasuredModelHoldsOverTheWholeRange, sums near 2^-149: a floor at 2^-158 gives 0 of 204,800 outputs
// wrong; none, or 2^-159, 48 to 67; 2^-157, 84).
constexpr int kFinestCutExponent = -158;
constexpr int kNoExponent = -100000;  // below any exponent: what a sum of nothing but zeros aligns at
// Exact aligned sum of n terms (alignment exponents e[i]), rounded to fp32.
ATTN_HD float aligned_sum(const double* t, const int* e, int n, const MmaModel& m) {
  int emax = kNoExponent;
  for (int i = 0; i < n; ++i)
    if (t[i] != 0.0) emax = std::max(emax, e[i]);
  const double q = std::ldexp(1.0, std::max(emax - m.frac_bits, kFinestCutExponent));
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += cut(t[i], q, m.cut);  // exact: the terms span few bits
  return to_f32(s, m.round_nearest);
}
// A k16 step with an overflowed running value or p̄ (±inf) or a NaN among its inputs, as IEEE adds: ±inf absorbs
// finite products, inf − inf and inf·0 are NaN. (The aligned path would take ilogb(±inf) = INT_MAX as an exponent:
// an int overflow in e(a) + e(b), then a cut by an infinite quantum — NaN or ±inf by accident.) As on the H100 and
// the H200 (EdgeInputsAsTheModelSays). Returns false, leaving `out` alone, when every input is finite.
ATTN_HD bool non_finite_step(const float* a, const float* b, float c, float& out) {
  bool finite = std::isfinite(c);
  for (int k = 0; k < 16; ++k) finite = finite && std::isfinite(a[k]) && std::isfinite(b[k]);
  if (finite) return false;
  double z = c;
  for (int k = 0; k < 16; ++k) z += static_cast<double>(a[k]) * static_cast<double>(b[k]);
  out = static_cast<float>(z);
  return true;
}
// kMeasuredMmaModel's fast forms (mma_k16_measured, k16_measured_avx2) read exponents from the float bits: the field
// F gives align_exponent = max(F, 1) − 127 (a subnormal's field 0 reads as −126), F = 255 is ±inf or NaN.
ATTN_HD int exponent_field(std::uint32_t bits) { return static_cast<int>((bits >> 23) & 0xffu); }
// The products' emax joined by c's alignment exponent where c is nonzero (±0 aligns nowhere).
ATTN_HD int measured_emax_with_c(int products_emax, std::uint32_t c_bits) {
  if ((c_bits << 1) == 0u) return products_emax;
  return std::max(products_emax, std::max(exponent_field(c_bits), 1) - 127);
}
// The exponent of q, the quantum every term is cut to: 2^(emax − 25), never finer than 2^-158.
ATTN_HD int measured_shift(int emax) { return std::max(emax - kMeasuredMmaModel.frac_bits, kFinestCutExponent); }
// The step's result from the products' terms over q = 2^shift, each truncated toward zero and summed (an integer
// below 2^32, exact in double): c's term joins them, and the sum times q is rounded toward zero to fp32.
ATTN_HD float measured_result(double products_over_q, float c, int shift) {
  const double c_over_q = static_cast<double>(static_cast<long long>(static_cast<double>(c) * exp2_int(-shift)));
  return to_f32((products_over_q + c_over_q) * exp2_int(shift), kMeasuredMmaModel.round_nearest);
}
}  // namespace mma_detail

// One output element: c + Σ_{k<16} a[k]·b[k] under model m (a, b hold bf16 values; c an fp32 value), as the
// parameters say, step by step (mma_k16 below takes a faster path for kMeasuredMmaModel, the same bits).
ATTN_HD float mma_k16_generic(const float* a, const float* b, float c, const MmaModel& m) {
  float acc = c;
  if (mma_detail::non_finite_step(a, b, c, acc)) return acc;
  for (int k0 = 0; k0 < 16; k0 += m.group) {
    double t[17];
    int e[17];
    int n = 0;
    if (m.c_in_align && acc != 0.0f) e[n] = mma_detail::align_exponent(acc), t[n++] = acc;
    for (int k = k0; k < k0 + m.group; ++k) {
      const double prod = static_cast<double>(a[k]) * static_cast<double>(b[k]);
      if (prod == 0.0) continue;
      e[n] = m.align_exp_sum ? mma_detail::align_exponent(a[k]) + mma_detail::align_exponent(b[k]) : std::ilogb(prod);
      t[n++] = prod;
    }
    if (n == 0) {  // nothing but zeros: +0, whatever their signs (an aligned sum has no −0: the H100's probes)
      acc = m.c_in_align ? 0.0f : acc + 0.0f;
      continue;
    }
    const float s = mma_detail::aligned_sum(t, e, n, m);
    acc = m.c_in_align ? s : mma_detail::to_f32(static_cast<double>(acc) + static_cast<double>(s), m.round_nearest);
  }
  return acc;
}

// kMeasuredMmaModel's k16 step, the generic path's arithmetic without its choices: every product and c (when
// nonzero) aligned to the largest exponent emax, e(a) + e(b) for a product; each cut toward zero to a multiple of
// q = 2^max(emax − 25, −158); the exact sum rounded toward zero to fp32. Exactness, as in the generic path: the
// products of two bf16 (or fp32) values are exact in double; a product is below 4 · 2^(e(a)+e(b)) ≤ 2^(emax+2) and c
// below 2^(emax+1), so a term over q is below 2^27 (the scaling by 1/q is exact: log2 q lies in [−158, 229], within
// double's normal range) and its int64 conversion truncates it exactly toward zero; the
// 17 terms sum to below 2^32 in int64, and that sum times q is exact in double. A zero product (either operand ±0)
// is 0 after scaling and only stays out of emax. Exponents come from the float bits: the field F gives
// align_exponent = max(F, 1) − 127 (a subnormal's field 0 reads as −126), F = 255 is ±inf or NaN (the IEEE step).
// Zero is read from the bits too, so a host running with denormals-are-zero (MXCSR DAZ, e.g. code built with
// -ffast-math in the process) would see subnormal products here that the generic path's product test drops: attncheck
// never sets DAZ (a review, session 32).
// One pass with no branch per product (session 32: the earlier form's skips and per-term exponent calls made a step
// ~70 ns, two thirds of the twin's time; flash_model_bench run_mma_k16). Test:
// MmaModel.TheMeasuredPathIsTheGenericModel (the same bits on random, wide-exponent, cancelling, subnormal,
// signed-zero, overflowing and infinite inputs).
ATTN_HD float mma_k16_measured(const float* a, const float* b, float c) {
  using mma_detail::exponent_field;
  int emax = mma_detail::kNoExponent;
  bool special = false;
  double t[16];
  for (int k = 0; k < 16; ++k) {
    const std::uint32_t x = float_to_bits(a[k]), y = float_to_bits(b[k]);
    const int fx = exponent_field(x), fy = exponent_field(y);
    special = special | (fx == 0xff) | (fy == 0xff);
    const bool zero = ((x << 1) == 0u) | ((y << 1) == 0u);
    const int e = std::max(fx, 1) + std::max(fy, 1) - 254;
    emax = std::max(emax, zero ? mma_detail::kNoExponent : e);
    t[k] = static_cast<double>(a[k]) * static_cast<double>(b[k]);
  }
  const std::uint32_t cu = float_to_bits(c);
  if (special || exponent_field(cu) == 0xff) {
    float ieee = 0.0f;
    mma_detail::non_finite_step(a, b, c, ieee);
    return ieee;
  }
  emax = mma_detail::measured_emax_with_c(emax, cu);
  if (emax == mma_detail::kNoExponent) return 0.0f;  // nothing but zeros: +0, whatever their signs (as generic)
  const int shift = mma_detail::measured_shift(emax);
  const double inv_q = exp2_int(-shift);
  long long s = 0;
  for (int k = 0; k < 16; ++k) s += static_cast<long long>(t[k] * inv_q);  // toward zero, exact (above)
  return mma_detail::measured_result(static_cast<double>(s), c, shift);
}

// On x86-64 hosts with AVX2 (checked once, at run time: the binaries stay baseline x86-64), the same step with eight
// lanes: the exponent fields, zero flags and emax of the 16 products in two 8 × int32 registers, the products in four
// 4 × double registers, each term over q truncated toward zero by cvttpd2dq (a term over q is below 2^27, above, so
// within int32) and summed back in double (integers below 2^32: exact). The same bits as mma_k16_measured; returns
// false, leaving `out` alone, when an input is ±inf or NaN (the caller takes mma_k16_measured's IEEE step). Test:
// MmaModel.TheMeasuredPathIsTheGenericModel (both paths against the generic model). Speed: flash_model_bench
// run_mma_k16 and run_twin_*.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define ATTNCHECK_MMA_AVX2 1
namespace mma_detail {
[[gnu::target("avx2")]] inline bool k16_measured_avx2(const float* a, const float* b, float c, float& out) {
  const __m256i field_mask = _mm256_set1_epi32(0xff), one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  __m256i e[2], special = zero;
  for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 8 * h));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 * h));
    const __m256i fx = _mm256_and_si256(_mm256_srli_epi32(x, 23), field_mask);
    const __m256i fy = _mm256_and_si256(_mm256_srli_epi32(y, 23), field_mask);
    const __m256i inf_or_nan = _mm256_or_si256(_mm256_cmpeq_epi32(fx, field_mask), _mm256_cmpeq_epi32(fy, field_mask));
    special = _mm256_or_si256(special, inf_or_nan);
    const __m256i is_zero = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_slli_epi32(x, 1), zero),
                                            _mm256_cmpeq_epi32(_mm256_slli_epi32(y, 1), zero));
    const __m256i sum = _mm256_sub_epi32(_mm256_add_epi32(_mm256_max_epi32(fx, one), _mm256_max_epi32(fy, one)),
                                         _mm256_set1_epi32(254));
    e[h] = _mm256_blendv_epi8(sum, _mm256_set1_epi32(kNoExponent), is_zero);
  }
  const std::uint32_t cu = float_to_bits(c);
  if (!_mm256_testz_si256(special, special) || exponent_field(cu) == 0xff) return false;
  __m256i m = _mm256_max_epi32(e[0], e[1]);
  __m128i m4 = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
  m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
  const int emax = measured_emax_with_c(_mm_cvtsi128_si32(m4), cu);
  if (emax == kNoExponent) {  // nothing but zeros: +0
    out = 0.0f;
    return true;
  }
  const int shift = measured_shift(emax);
  const __m256d inv_q = _mm256_set1_pd(exp2_int(-shift));
  __m256d s = _mm256_setzero_pd();
  for (int g = 0; g < 4; ++g) {
    const __m256d t = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + 4 * g)), _mm256_cvtps_pd(_mm_loadu_ps(b + 4 * g)));
    s = _mm256_add_pd(s, _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(_mm256_mul_pd(t, inv_q))));  // exact (above)
  }
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  out = measured_result(_mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2))), c, shift);
  return true;
}
inline bool host_has_avx2() {
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));  // init: safe before main too
  return yes;
}
}  // namespace mma_detail
#endif

ATTN_HD float mma_k16(const float* a, const float* b, float c, const MmaModel& m = kMeasuredMmaModel) {
  if (!(m == kMeasuredMmaModel)) return mma_k16_generic(a, b, c, m);
#if defined(ATTNCHECK_MMA_AVX2)
  if (float out; mma_detail::host_has_avx2() && mma_detail::k16_measured_avx2(a, b, c, out)) return out;
#endif
  return mma_k16_measured(a, b, c);
}

// A dot product of length d (a multiple of 16 after zero padding) as the CUDA kernels compute it: k16 steps in
// increasing k, each step's result feeding the next as c, starting from c0.
ATTN_HD float mma_dot(const float* a, const float* b, int d, float c0 = 0.0f, const MmaModel& m = kMeasuredMmaModel) {
  float acc = c0;
  int k0 = 0;
  for (; k0 + 16 <= d; k0 += 16) acc = mma_k16(a + k0, b + k0, acc, m);
  if (k0 < d) {  // the last, partial step: zero-padded
    float aa[16], bb[16];
    for (int k = 0; k < 16; ++k) {
      aa[k] = k0 + k < d ? a[k0 + k] : 0.0f;
      bb[k] = k0 + k < d ? b[k0 + k] : 0.0f;
    }
    acc = mma_k16(aa, bb, acc, m);
  }
  return acc;
}

// Padding. The kernels pad the head dim to 64 or 128 and a tile's rows or keys to 64 with +0 in both operands; the
// twin calls mma_dot over the unpadded length, as the padding's k16 steps change no bit under kMeasuredMmaModel: a
// step of sixteen +0·+0 products leaves a finite nonzero c (24 significant bits, aligned to its own exponent or, a
// subnormal, to −126, and cut at 2^(e − 25)) as it is; ±inf and NaN pass through as IEEE adds; a zero is +0 before
// and after (the model, like the H100 and the H200, never gives −0). Test: MmaModel.ThePaddingStepsChangeNoBit.

}  // namespace attncheck
