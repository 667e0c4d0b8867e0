// formats.h — storage formats and their rounding, usable from host and CUDA device code.
//
// Every value attncheck handles is carried as a double that is exactly representable in some format
// (all formats here are subsets of binary64). Rounding is defined once, generically, from a format's
// precision p (significand bits including the implicit one), minimum normal exponent emin and largest
// finite value; bf16 from float additionally has a bit-trick fast path that is checked against the
// generic one exhaustively in formats_test.cpp.
//
// Invariants:
//   - round_to(x, f) is round-to-nearest, ties-to-even, single rounding from the double x (double -> bf16
//     never goes through float: double rounding is itself a bias source).
//   - ±0 keep their sign; subnormals are gradual; overflow gives ±inf (or the format's max with
//     Overflow::kSaturate). e4m3 (OCP) has no infinity: overflow gives NaN unless saturating.
//   - NaN in gives NaN out.
// Run the tests: ctest -R formats
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ATTN_HD __host__ __device__ inline
#define ATTN_HD_ALWAYS_INLINE __host__ __device__ __forceinline__
#else
#define ATTN_HD inline
#define ATTN_HD_ALWAYS_INLINE [[gnu::always_inline]] inline
#endif

namespace attncheck {

enum class Format : std::uint8_t { kF64 = 0, kF32, kBF16, kF16, kE4M3, kE5M2 };
constexpr int kFormatCount = 6;

// What happens to finite values beyond the largest finite value of the format.
enum class Overflow : std::uint8_t { kInf, kSaturate };

struct FormatInfo {
  int precision;      // significand bits, implicit bit included
  int emin;           // exponent of the smallest normal number
  int emax;           // exponent of the largest finite number
  int exponent_bias;  // bias of the stored exponent field
  int bits;           // storage width
  bool has_inf;       // e4m3 (OCP) has none
  double max_finite;
};

ATTN_HD FormatInfo format_info(Format f) {
  switch (f) {
    case Format::kF64: return {53, -1022, 1023, 1023, 64, true, 1.7976931348623157e308};
    case Format::kF32: return {24, -126, 127, 127, 32, true, 3.4028234663852886e38};
    case Format::kBF16: return {8, -126, 127, 127, 16, true, 3.3895313892515355e38};
    case Format::kF16: return {11, -14, 15, 15, 16, true, 65504.0};
    case Format::kE4M3: return {4, -6, 8, 7, 8, false, 448.0};
    case Format::kE5M2: return {3, -14, 15, 15, 8, true, 57344.0};
  }
  return {53, -1022, 1023, 1023, 64, true, 1.7976931348623157e308};
}

// The raw bits of a double and back (host and device).
ATTN_HD std::uint64_t double_to_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(d));
#else
  std::uint64_t u;
  __builtin_memcpy(&u, &d, sizeof u);
  return u;
#endif
}
ATTN_HD double bits_to_double(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  __builtin_memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// 2^e and ilogb(x) read from / written into the exponent field: exact, and no libm call on the hot paths of
// round_to, ulp and representable (std::ldexp / std::ilogb were ~8% of a fuzz execution). Outside the normal
// double range (e < -1022, subnormal or zero x) they defer to the library.
ATTN_HD double exp2_int(int e) {
  if (e < -1022 || e > 1023) return std::ldexp(1.0, e);
  return bits_to_double(static_cast<std::uint64_t>(e + 1023) << 52);
}
ATTN_HD int ilogb_normal(double x) {  // x finite, nonzero
  const int biased = static_cast<int>((double_to_bits(x) >> 52) & 0x7ff);
  return biased != 0 ? biased - 1023 : std::ilogb(x);
}

// Exponent of the quantum (spacing) of the format at |x|, for finite nonzero x; emin's quantum below.
ATTN_HD int quantum_exponent(double x, const FormatInfo& fi) {
  int e = (x == 0.0) ? fi.emin : ilogb_normal(x);
  if (e < fi.emin) e = fi.emin;
  if (e > fi.emax) e = fi.emax;
  return e - (fi.precision - 1);
}

ATTN_HD double apply_overflow(double r, const FormatInfo& fi, Overflow ov) {
  if (std::fabs(r) <= fi.max_finite) return r;
  if (ov == Overflow::kSaturate) return std::copysign(fi.max_finite, r);
  return fi.has_inf ? std::copysign(HUGE_VAL, r) : NAN;
}

// Round-to-nearest-even of x to format f, returned as the (exact) double value.
ATTN_HD double round_to(double x, Format f, Overflow ov = Overflow::kInf) {
  if (f == Format::kF64) return x;
  const FormatInfo fi = format_info(f);
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return fi.has_inf ? x : (ov == Overflow::kSaturate ? std::copysign(fi.max_finite, x) : NAN);
  if (x == 0.0) return x;
  // x / q is exact (power-of-two scaling, no double underflow for these formats); rint rounds half to even.
  const double q = exp2_int(quantum_exponent(x, fi));
  double r = std::rint(x / q) * q;
  if (r == 0.0) r = std::copysign(0.0, x);
  return apply_overflow(r, fi, ov);
}

// Stochastic rounding: the upper neighbour with probability (x - lo) / (hi - lo), u uniform in [0, 1).
// Unbiased: E[result] = x for x inside the finite range.
ATTN_HD double round_stochastic(double x, Format f, double u, Overflow ov = Overflow::kInf) {
  if (f == Format::kF64 || std::isnan(x) || std::isinf(x) || x == 0.0) return round_to(x, f, ov);
  const FormatInfo fi = format_info(f);
  const double q = exp2_int(quantum_exponent(x, fi));
  const double lo = std::floor(x / q) * q;  // exact: both neighbours are on the grid of x's binade
  const double frac = (x - lo) / q;
  double r = (u < frac) ? lo + q : lo;
  if (r == 0.0) r = std::copysign(0.0, x);
  return apply_overflow(r, fi, ov);
}

// Unit in the last place of format f at x: the spacing of the format's numbers in x's binade
// (subnormal spacing below emin; the spacing at the top binade beyond the largest finite value).
ATTN_HD double ulp(double x, Format f) {
  const FormatInfo fi = format_info(f);
  if (std::isnan(x)) return NAN;
  if (std::isinf(x)) x = fi.max_finite;
  return exp2_int(quantum_exponent(x, fi));
}

// Float fast paths used inside the CPU models' inner loops. Bitwise identical to round_to (tested).
ATTN_HD float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}
ATTN_HD std::uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ATTN_HD float round_bf16(float x) {
  std::uint32_t u = float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                // ties to even; carries into the exponent correctly
  return bits_to_float(u & 0xffff0000u);
}

// Round a float to format f and return it as float (every format but f64 fits in float). Always inlined: with a
// constant f (the CPU models' FixedFormats tables) it folds to the identity or one bf16 rounding.
ATTN_HD_ALWAYS_INLINE float round_float(float x, Format f) {
  if (f == Format::kF32 || f == Format::kF64) return x;
  if (f == Format::kBF16) return round_bf16(x);
  return static_cast<float>(round_to(static_cast<double>(x), f));
}

// ---- bit patterns ------------------------------------------------------------------------------------
// encode: the storage bits of round_to(x, f); decode: the value of storage bits. NaN encodes to the
// format's canonical quiet NaN (sign kept). decode(encode(x)) == round_to(x) for every x.
ATTN_HD std::uint64_t encode(double x, Format f, Overflow ov = Overflow::kInf) {
  const FormatInfo fi = format_info(f);
  if (f == Format::kF64) {
    std::uint64_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
  }
  const int mant_bits = fi.precision - 1;
  const int exp_bits = fi.bits - fi.precision;
  const std::uint64_t exp_all = (1ull << exp_bits) - 1;
  const double r = round_to(x, f, ov);
  const std::uint64_t sign = std::signbit(r) ? (1ull << (fi.bits - 1)) : 0;
  if (std::isnan(r)) {
    if (!fi.has_inf) return sign | (exp_all << mant_bits) | ((1ull << mant_bits) - 1);  // e4m3: S.1111.111
    return sign | (exp_all << mant_bits) | (1ull << (mant_bits - 1));
  }
  if (std::isinf(r)) return sign | (exp_all << mant_bits);
  const double a = std::fabs(r);
  if (a == 0.0) return sign;
  int e = std::ilogb(a);
  if (e < fi.emin) {  // subnormal: exponent field 0, value = mant * 2^(emin - mant_bits)
    const auto mant = static_cast<std::uint64_t>(std::ldexp(a, -(fi.emin - mant_bits)));
    return sign | mant;
  }
  const auto mant = static_cast<std::uint64_t>(std::ldexp(a, mant_bits - e)) - (1ull << mant_bits);
  return sign | (static_cast<std::uint64_t>(e + fi.exponent_bias) << mant_bits) | mant;
}

ATTN_HD double decode(std::uint64_t bits, Format f) {
  const FormatInfo fi = format_info(f);
  if (f == Format::kF64) {
    double d;
    __builtin_memcpy(&d, &bits, sizeof d);
    return d;
  }
  const int mant_bits = fi.precision - 1;
  const int exp_bits = fi.bits - fi.precision;
  const std::uint64_t exp_all = (1ull << exp_bits) - 1;
  const bool neg = (bits >> (fi.bits - 1)) & 1u;
  const std::uint64_t ef = (bits >> mant_bits) & exp_all;
  const std::uint64_t mant = bits & ((1ull << mant_bits) - 1);
  double v;
  if (fi.has_inf && ef == exp_all) {
    v = (mant == 0) ? HUGE_VAL : NAN;
  } else if (!fi.has_inf && ef == exp_all && mant == (1ull << mant_bits) - 1) {
    v = NAN;
  } else if (ef == 0) {
    v = std::ldexp(static_cast<double>(mant), fi.emin - mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant + (1ull << mant_bits)), static_cast<int>(ef) - fi.exponent_bias - mant_bits);
  }
  return neg ? -v : v;
}

// True when x is exactly a value of format f (NaN and ±inf count where the format has them).
ATTN_HD bool representable(double x, Format f) {
  if (std::isnan(x)) return true;
  if (std::isinf(x)) return format_info(f).has_inf;
  // Fast paths (the check runs on every input element of every instance): a value of fp32 survives the trip
  // through float unchanged (a finite x beyond fp32's range becomes inf, != x); a bf16 value is such a float
  // whose low 16 bits are zero (bf16 shares fp32's exponent range, subnormals included; no finite float above
  // bf16's largest value has zero low bits).
  if (f == Format::kF32 || f == Format::kBF16) {
    const float g = static_cast<float>(x);
    if (static_cast<double>(g) != x) return false;
    return f == Format::kF32 || (float_to_bits(g) & 0xffffu) == 0;
  }
  return round_to(x, f, Overflow::kInf) == x;
}

// ---- a counter-based generator (splitmix64 finaliser): same stream on host and device -------------------
ATTN_HD std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in [0, 1) with 53 random bits, a pure function of (seed, counter).
ATTN_HD double uniform01(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(mix64(seed ^ mix64(counter)) >> 11) * 0x1.0p-53;
}

}  // namespace attncheck
