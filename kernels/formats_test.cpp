// formats_test.cpp — unit tests of kernels/formats.h: bit patterns, round-to-nearest-even in every tie class,
// special values, exhaustive 16-bit round trips, the bf16 float fast path against the generic rounding,
// single (not double) rounding from double, ulp(), stochastic rounding and the counter-based generator.
//
// Invariants checked: round_to is RNE with one rounding from double; ±0 keep their sign; NaN stays NaN and
// encodes canonically; overflow gives ±inf (NaN for e4m3) or the max with Overflow::kSaturate.
// All randomness comes from mix64/uniform01 with fixed seeds, so every run checks the same values.
// Run: ctest --test-dir build -R formats   (or ./build/kernels/formats_test)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/formats.h"

namespace attncheck {
namespace {

constexpr Format kNarrow[] = {Format::kF32, Format::kBF16, Format::kF16, Format::kE4M3, Format::kE5M2};

std::uint64_t dbits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
// Same value bit for bit (so -0 != +0), or both NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || dbits(a) == dbits(b); }
#define EXPECT_SAME(a, b) EXPECT_PRED2(same, a, b)

// ---- known bit patterns ---------------------------------------------------------------------------------
struct Pattern {
  Format f;
  double value;
  std::uint64_t bits;
};
constexpr Pattern kPatterns[] = {
    {Format::kBF16, 1.0, 0x3f80}, {Format::kBF16, -2.0, 0xc000}, {Format::kBF16, 0x1.9ap-4, 0x3dcd},  // 0.1 -> 0x3dcd
    {Format::kBF16, 0x1.fep127, 0x7f7f}, {Format::kBF16, 0x1p-126, 0x0080}, {Format::kBF16, 0x1p-133, 0x0001},
    {Format::kBF16, -0x1.fcp-127, 0x807f},  // largest-magnitude negative subnormal
    {Format::kBF16, -2.40625, 0xc01a}, {Format::kBF16, -4.71875, 0xc097},  // the paper's Fig. 6 values
    {Format::kF16, 1.0, 0x3c00}, {Format::kF16, -2.0, 0xc000}, {Format::kF16, 0x1.998p-4, 0x2e66},
    {Format::kF16, 65504.0, 0x7bff}, {Format::kF16, 0x1p-14, 0x0400}, {Format::kF16, 0x1p-24, 0x0001},
    {Format::kF32, 1.0, 0x3f800000}, {Format::kF32, 0x1.99999ap-4, 0x3dcccccd}, {Format::kF32, 0x1p-149, 0x1},
    {Format::kF32, 0x1.fffffep127, 0x7f7fffff}, {Format::kF32, -0x1p-126, 0x80800000},
    {Format::kE4M3, 1.0, 0x38}, {Format::kE4M3, 448.0, 0x7e}, {Format::kE4M3, -448.0, 0xfe},
    {Format::kE4M3, 256.0, 0x78}, {Format::kE4M3, 0x1p-6, 0x08}, {Format::kE4M3, 0x1p-9, 0x01},
    {Format::kE4M3, 0x1.cp-7, 0x07},  // largest subnormal 7/8 * 2^-6
    {Format::kE5M2, 1.0, 0x3c}, {Format::kE5M2, 57344.0, 0x7b}, {Format::kE5M2, 0x1p-14, 0x04},
    {Format::kE5M2, 0x1p-16, 0x01}, {Format::kE5M2, -1.5, 0xbe},
};

TEST(formats, known_bit_patterns_encode_and_decode) {
  for (const Pattern& p : kPatterns) {
    SCOPED_TRACE(testing::Message() << "format " << int(p.f) << " value " << p.value);
    EXPECT_EQ(encode(p.value, p.f), p.bits);
    EXPECT_SAME(decode(p.bits, p.f), p.value);
    EXPECT_TRUE(representable(p.value, p.f));
  }
  // Decimal inputs that are not representable round to the patterns above.
  EXPECT_EQ(encode(0.1, Format::kBF16), 0x3dcdu);
  EXPECT_EQ(encode(0.1, Format::kF16), 0x2e66u);
  EXPECT_EQ(encode(0.1, Format::kF32), 0x3dcccccdu);
  EXPECT_EQ(encode(0.1, Format::kF64), dbits(0.1));
  // Paper, Fig. 6: -4.703125 is an exact bf16 tie and goes to even (-4.6875); a residue past it goes away.
  EXPECT_SAME(round_to(-4.703125, Format::kBF16), -4.6875);
  EXPECT_SAME(round_to(-4.703125 - 0.00087, Format::kBF16), -4.71875);
}

TEST(formats, specials_encode_to_their_patterns) {
  EXPECT_EQ(encode(HUGE_VAL, Format::kBF16), 0x7f80u);
  EXPECT_EQ(encode(-HUGE_VAL, Format::kBF16), 0xff80u);
  EXPECT_EQ(encode(NAN, Format::kBF16), 0x7fc0u);
  EXPECT_EQ(encode(-NAN, Format::kBF16), 0xffc0u);
  EXPECT_EQ(encode(HUGE_VAL, Format::kF16), 0x7c00u);
  EXPECT_EQ(encode(NAN, Format::kF16), 0x7e00u);
  EXPECT_EQ(encode(NAN, Format::kF32), 0x7fc00000u);
  EXPECT_EQ(encode(HUGE_VAL, Format::kE5M2), 0x7cu);
  EXPECT_EQ(encode(NAN, Format::kE5M2), 0x7eu);
  EXPECT_EQ(encode(NAN, Format::kE4M3), 0x7fu);
  EXPECT_EQ(encode(-NAN, Format::kE4M3), 0xffu);
  EXPECT_EQ(encode(HUGE_VAL, Format::kE4M3), 0x7fu);  // no inf in e4m3: inf -> NaN
  EXPECT_EQ(encode(HUGE_VAL, Format::kE4M3, Overflow::kSaturate), 0x7eu);
  EXPECT_EQ(encode(0.0, Format::kBF16), 0x0000u);
  EXPECT_EQ(encode(-0.0, Format::kBF16), 0x8000u);
  EXPECT_EQ(encode(-0.0, Format::kE4M3), 0x80u);
  EXPECT_TRUE(std::isnan(decode(0x7f, Format::kE4M3)));
  EXPECT_TRUE(std::isnan(decode(0xff, Format::kE4M3)));
  EXPECT_TRUE(std::isnan(decode(0x7c01, Format::kF16)));  // signalling-pattern NaN decodes as NaN
  EXPECT_SAME(decode(0x7f80, Format::kBF16), HUGE_VAL);
  EXPECT_SAME(decode(0xfc00, Format::kF16), -HUGE_VAL);
  EXPECT_SAME(decode(0x8000, Format::kBF16), -0.0);
  EXPECT_SAME(decode(0x80, Format::kE4M3), -0.0);
}

// ---- ties to even, every class, in every narrow format ----------------------------------------------------
// With p significand bits, values in [1, 2) are spaced h = 2^(1-p); the subnormal spacing is 2^(emin-p+1).
TEST(formats, ties_round_to_even_in_every_class) {
  for (Format f : kNarrow) {
    const FormatInfo fi = format_info(f);
    SCOPED_TRACE(testing::Message() << "format " << int(f));
    const double h = std::ldexp(1.0, 1 - fi.precision);
    // Tie to even below: 1 + h/2 lies between 1 (even) and 1 + h (odd).
    EXPECT_SAME(round_to(1 + h / 2, f), 1.0);
    EXPECT_SAME(round_to(-(1 + h / 2), f), -1.0);
    // Tie to even above: 1 + 3h/2 lies between 1 + h (odd) and 1 + 2h (even).
    EXPECT_SAME(round_to(1 + 1.5 * h, f), 1 + 2 * h);
    // Just off a tie goes to the nearer neighbour whatever the parity.
    EXPECT_SAME(round_to(std::nextafter(1 + h / 2, 2.0), f), 1 + h);
    EXPECT_SAME(round_to(std::nextafter(1 + 1.5 * h, 0.0), f), 1 + h);
    // Tie carrying into the next binade: 2 - h/2 lies between 2 - h (all-ones significand, odd) and 2.
    EXPECT_SAME(round_to(2 - h / 2, f), 2.0);
    // Ties among subnormals: spacing s; 1.5 s -> 2 s (even), 2.5 s -> 2 s, 3.5 s -> 4 s.
    const double s = std::ldexp(1.0, fi.emin - fi.precision + 1);
    EXPECT_SAME(round_to(1.5 * s, f), 2 * s);
    EXPECT_SAME(round_to(2.5 * s, f), 2 * s);
    EXPECT_SAME(round_to(-3.5 * s, f), -4 * s);
    // Tie at the smallest subnormal: s/2 is halfway between 0 (even) and s: it goes to a zero of its sign.
    EXPECT_SAME(round_to(s / 2, f), 0.0);
    EXPECT_SAME(round_to(-s / 2, f), -0.0);
    EXPECT_SAME(round_to(std::nextafter(s / 2, 1.0), f), s);
    EXPECT_SAME(round_to(s / 4, f), 0.0);
    // Tie between the largest subnormal (odd) and the smallest normal carries into the normal range.
    const double min_normal = std::ldexp(1.0, fi.emin);
    EXPECT_SAME(round_to(min_normal - s / 2, f), min_normal);
  }
}

TEST(formats, overflow_ties_infinities_and_saturation) {
  for (Format f : {Format::kF32, Format::kBF16, Format::kF16, Format::kE5M2}) {
    const FormatInfo fi = format_info(f);
    SCOPED_TRACE(testing::Message() << "format " << int(f));
    const double top = std::ldexp(1.0, fi.emax + 1);      // first value past the format
    const double tie = (fi.max_finite + top) / 2;          // max has an all-ones (odd) significand
    EXPECT_SAME(round_to(tie, f), HUGE_VAL);               // tie into overflow -> inf
    EXPECT_SAME(round_to(-tie, f), -HUGE_VAL);
    EXPECT_SAME(round_to(std::nextafter(tie, 0.0), f), fi.max_finite);
    EXPECT_SAME(round_to(tie, f, Overflow::kSaturate), fi.max_finite);
    EXPECT_SAME(round_to(-1e300, f, Overflow::kSaturate), -fi.max_finite);
    EXPECT_SAME(round_to(HUGE_VAL, f), HUGE_VAL);
    EXPECT_SAME(round_to(0.0, f), 0.0);
    EXPECT_SAME(round_to(-0.0, f), -0.0);
    EXPECT_TRUE(std::isnan(round_to(NAN, f)));
    EXPECT_TRUE(std::isnan(round_to(NAN, f, Overflow::kSaturate)));
  }
  // e4m3 (OCP): max 448 = 1.110b·2^8; the grid continues to 480 (the NaN pattern). 464 is a tie between 448
  // (even) and 480: it stays 448. Past the tie the result would be 480: NaN, or 448 when saturating.
  const Format e4 = Format::kE4M3;
  EXPECT_SAME(round_to(464.0, e4), 448.0);
  EXPECT_TRUE(std::isnan(round_to(std::nextafter(464.0, 1e9), e4)));
  EXPECT_TRUE(std::isnan(round_to(-500.0, e4)));
  EXPECT_TRUE(std::isnan(round_to(HUGE_VAL, e4)));
  EXPECT_SAME(round_to(500.0, e4, Overflow::kSaturate), 448.0);
  EXPECT_SAME(round_to(-HUGE_VAL, e4, Overflow::kSaturate), -448.0);
  EXPECT_FALSE(representable(480.0, e4));
  EXPECT_FALSE(representable(HUGE_VAL, e4));
  EXPECT_TRUE(representable(HUGE_VAL, Format::kBF16));
  EXPECT_TRUE(representable(NAN, e4));
}

// ---- exhaustive checks over every pattern of the 16- and 8-bit formats -------------------------------------
void check_all_patterns(Format f) {
  const FormatInfo fi = format_info(f);
  const std::uint64_t n = 1ull << fi.bits, sign = n >> 1;
  const double overflowed = fi.has_inf ? HUGE_VAL : NAN;
  int failures = 0;
  for (std::uint64_t b = 0; b < n && failures < 10; ++b) {
    const double v = decode(b, f);
    bool ok = true;
    if (std::isnan(v)) {
      // NaN canonicalisation: the canonical NaN of the format with the sign kept.
      ok = encode(v, f) == ((b & sign) | encode(NAN, f)) && std::isnan(round_to(v, f));
    } else {
      ok = encode(v, f) == b && representable(v, f) && same(round_to(v, f), v) &&
           same(round_to(round_to(v, f), f), v) && same(round_to(v, f, Overflow::kSaturate), v);
    }
    // Positive finite patterns: the midpoint to the next value up is a tie that goes to the even pattern,
    // and the doubles just either side of it go to the nearer value. Above the largest finite value the grid
    // continues one ulp further (2^(emax+1), or 480 in e4m3, whose pattern is NaN): that tie overflows
    // unless the largest finite pattern is even (e4m3's 0x7e).
    if (ok && b < sign && std::isfinite(v)) {
      const double next = decode(b + 1, f);
      const bool top = !std::isfinite(next);
      const double up = top ? v + ulp(v, f) : next;
      const double mid = v + (up - v) / 2;  // exact in double
      const double above = top ? overflowed : next;
      ok = up > v && same(round_to(mid, f), (b % 2 == 0) ? v : above) &&
           same(round_to(std::nextafter(mid, 0.0), f), v) && same(round_to(std::nextafter(mid, HUGE_VAL), f), above);
    }
    if (!ok && ++failures <= 10)
      ADD_FAILURE() << "format " << int(f) << " pattern 0x" << std::hex << b << std::dec << " value " << v;
  }
}

TEST(formats, every_bf16_pattern_round_trips) { check_all_patterns(Format::kBF16); }
TEST(formats, every_fp16_pattern_round_trips) { check_all_patterns(Format::kF16); }
TEST(formats, every_fp8_pattern_round_trips) {
  check_all_patterns(Format::kE4M3);
  check_all_patterns(Format::kE5M2);
}

// ---- the bf16 float fast path against the generic rounding --------------------------------------------------
bool fast_matches_generic(std::uint32_t u) {
  const float x = bits_to_float(u);
  const float fast = round_bf16(x);
  const double generic = round_to(static_cast<double>(x), Format::kBF16);
  if (std::isnan(x)) return std::isnan(fast) && std::isnan(generic);
  return float_to_bits(fast) == float_to_bits(static_cast<float>(generic)) &&
         same(static_cast<double>(fast), generic) && same(round_float(x, Format::kBF16), fast);
}

TEST(formats, round_bf16_matches_round_to_for_every_bf16_and_low_half) {
  int failures = 0;
  for (std::uint32_t hi = 0; hi < 0x10000u && failures < 10; ++hi) {
    // Low halves: exact, the tie, just below and above the tie, the largest, and a random one.
    const std::uint32_t lows[] = {0x0000u, 0x8000u, 0x7fffu, 0x8001u, 0xffffu,
                                  static_cast<std::uint32_t>(mix64(hi) & 0xffffu)};
    for (std::uint32_t lo : lows) {
      const std::uint32_t u = (hi << 16) | lo;
      if (!fast_matches_generic(u) && ++failures <= 10) ADD_FAILURE() << "float bits 0x" << std::hex << u;
    }
  }
}

TEST(formats, round_bf16_and_fp32_codec_on_random_floats) {
  int failures = 0;
  for (std::uint64_t i = 0; i < 1000000 && failures < 10; ++i) {
    const auto u = static_cast<std::uint32_t>(mix64(0xbf16 + i * 0x100000001ull));
    bool ok = fast_matches_generic(u);
    const float x = bits_to_float(u);
    if (!std::isnan(x)) ok = ok && encode(x, Format::kF32) == u && same(decode(u, Format::kF32), x);
    if (!ok && ++failures <= 10) ADD_FAILURE() << "float bits 0x" << std::hex << u;
  }
}

#if defined(__FLT16_MANT_DIG__) && defined(__GNUC__) && !defined(__clang__)
// GCC's _Float16 conversion from double is an independent, correctly rounded implementation.
TEST(formats, fp16_rounding_matches_the_compilers_float16) {
  int failures = 0;
  for (std::uint64_t i = 0; i < 200000 && failures < 10; ++i) {
    // Doubles with exponents around fp16's range (2^-30 .. 2^17), random significands and signs.
    const std::uint64_t r = mix64(0xf16 + i);
    const int e = static_cast<int>(r % 48) - 30;
    const double x = std::ldexp(1.0 + static_cast<double>(r >> 12) * 0x1p-52, e) * ((r >> 6 & 1) ? -1 : 1);
    const double want = static_cast<double>(static_cast<_Float16>(x));
    if (!same(round_to(x, Format::kF16), want) && ++failures <= 10) ADD_FAILURE() << "x = " << x;
  }
}
#endif

// ---- single rounding from double ---------------------------------------------------------------------------
TEST(formats, double_to_bf16_is_a_single_rounding) {
  // x = 1 + 2^-8 + 2^-40: just above the bf16 tie 1 + 2^-8, so the correct bf16 value is 1 + 2^-7.
  // Through float, 2^-40 is lost (below half an fp32 ulp), leaving the exact tie, which goes to even: 1.
  const double x = 1.0 + 0x1p-8 + 0x1p-40;
  EXPECT_EQ(static_cast<double>(round_bf16(static_cast<float>(x))), 1.0);  // the double rounding
  EXPECT_SAME(round_to(x, Format::kBF16), 1.0 + 0x1p-7);                    // the direct answer
  EXPECT_SAME(round_to(-x, Format::kBF16), -(1.0 + 0x1p-7));
  // Same effect in fp16: 1 + 2^-11 + 2^-40 -> 1 + 2^-10 directly.
  EXPECT_SAME(round_to(1.0 + 0x1p-11 + 0x1p-40, Format::kF16), 1.0 + 0x1p-10);
}

// ---- ulp ----------------------------------------------------------------------------------------------------
TEST(formats, ulp_at_binade_edges_subnormals_and_zero) {
  const Format b = Format::kBF16;
  EXPECT_EQ(ulp(1.0, b), 0x1p-7);
  EXPECT_EQ(ulp(-1.0, b), 0x1p-7);
  EXPECT_EQ(ulp(std::nextafter(2.0, 0.0), b), 0x1p-7);  // still the [1, 2) binade
  EXPECT_EQ(ulp(2.0, b), 0x1p-6);
  EXPECT_EQ(ulp(std::nextafter(1.0, 0.0), b), 0x1p-8);
  EXPECT_EQ(ulp(0x1p-126, b), 0x1p-133);  // smallest normal: same spacing as the subnormals
  EXPECT_EQ(ulp(0x1p-130, b), 0x1p-133);
  EXPECT_EQ(ulp(0x1p-140, b), 0x1p-133);  // below the smallest subnormal
  EXPECT_EQ(ulp(0.0, b), 0x1p-133);
  EXPECT_EQ(ulp(-0.0, b), 0x1p-133);
  EXPECT_EQ(ulp(format_info(b).max_finite, b), 0x1p120);
  EXPECT_EQ(ulp(HUGE_VAL, b), 0x1p120);
  EXPECT_EQ(ulp(1e300, b), 0x1p120);
  EXPECT_TRUE(std::isnan(ulp(NAN, b)));
  EXPECT_EQ(ulp(1.0, Format::kF16), 0x1p-10);
  EXPECT_EQ(ulp(0.0, Format::kF16), 0x1p-24);
  EXPECT_EQ(ulp(65504.0, Format::kF16), 32.0);
  EXPECT_EQ(ulp(1.0, Format::kF32), 0x1p-23);
  EXPECT_EQ(ulp(0.0, Format::kF32), 0x1p-149);
  EXPECT_EQ(ulp(1.0, Format::kE4M3), 0x1p-3);
  EXPECT_EQ(ulp(0.0, Format::kE4M3), 0x1p-9);
  EXPECT_EQ(ulp(448.0, Format::kE4M3), 32.0);
  EXPECT_EQ(ulp(1.0, Format::kE5M2), 0x1p-2);
  EXPECT_EQ(ulp(1.0, Format::kF64), 0x1p-52);
  // ulp is the distance to the next value up inside a binade, for every positive finite bf16 but the max.
  for (std::uint64_t bits = 1; bits < 0x7f7f; ++bits)
    ASSERT_EQ(decode(bits + 1, b) - decode(bits, b), ulp(decode(bits, b), b)) << "bf16 0x" << std::hex << bits;
}

// ---- stochastic rounding ------------------------------------------------------------------------------------
// The two format values around x (|x| rounded down and up in magnitude), via the bit patterns.
void neighbours(double x, Format f, double* down, double* up) {
  const double a = std::fabs(x);
  const std::uint64_t b = encode(a, f);
  const double v = decode(b, f);
  const double lo = (v > a) ? decode(b - 1, f) : v;
  const double hi = (v < a) ? decode(b + 1, f) : v;
  *down = std::copysign(lo, x);
  *up = std::copysign(hi, x);
}

TEST(formats, stochastic_rounding_returns_a_neighbour_and_keeps_exact_values) {
  for (std::uint64_t bits = 0; bits < 0x10000; ++bits) {  // every finite bf16 stays as it is, whatever u
    const double v = decode(bits, Format::kBF16);
    if (!std::isfinite(v)) continue;
    for (double u : {0.0, 0.5, 0x1.fffffffffffffp-1})
      ASSERT_PRED2(same, round_stochastic(v, Format::kBF16, u), v) << "bf16 0x" << std::hex << bits;
  }
  int failures = 0;
  for (std::uint64_t i = 0; i < 200000 && failures < 10; ++i) {
    const std::uint64_t r = mix64(0x5eed + i);
    const Format f = (i % 2) ? Format::kBF16 : Format::kF16;
    const int e = static_cast<int>(r % 40) - 26;  // fp16 subnormals through normal values below 2^14
    const double x = std::ldexp(1.0 + static_cast<double>(r >> 12) * 0x1p-52, e) * ((r >> 6 & 1) ? -1 : 1);
    double down, up;
    neighbours(x, f, &down, &up);
    const double got = round_stochastic(x, f, uniform01(7, i));
    if (!(same(got, down) || same(got, up)) && ++failures <= 10)
      ADD_FAILURE() << "x " << x << " gave " << got << ", neighbours " << down << ", " << up;
  }
  // The decision is u < frac: at u == frac it rounds down, just below it rounds up.
  const double x = 1.0 + 0.25 * 0x1p-7;  // frac = 1/4 in bf16
  EXPECT_SAME(round_stochastic(x, Format::kBF16, 0.25), 1.0);
  EXPECT_SAME(round_stochastic(x, Format::kBF16, std::nextafter(0.25, 0.0)), 1.0 + 0x1p-7);
  // -2^-134 lies halfway between -2^-133 and 0: the upper neighbour (toward +inf) is a zero of x's sign.
  EXPECT_SAME(round_stochastic(-0x1p-134, Format::kBF16, 0.1), -0.0);
  EXPECT_SAME(round_stochastic(-0x1p-134, Format::kBF16, 0.9), -0x1p-133);
  EXPECT_SAME(round_stochastic(format_info(Format::kBF16).max_finite * 1.001, Format::kBF16, 0.0), HUGE_VAL);
}

TEST(formats, stochastic_rounding_is_unbiased) {
  // Per draw the result is down + q·B with B ~ Bernoulli(frac), q = up - down. Over N independent draws the
  // mean error has standard deviation q·σ and the up-frequency σ, σ = sqrt(frac(1-frac)/N). Bound: 6σ.
  // A correct implementation exceeds it with probability 2·Φ(-6) ≈ 2e-9 over seeds (the seeds are fixed, so
  // this is one draw, not a flake). Power: round-to-nearest is off by min(frac, 1-frac) ≥ 0.01 in frequency,
  // while 6σ = 6·sqrt(frac(1-frac)/2^16) is below min(frac, 1-frac) in every case below (0.0117 at frac 0.5,
  // 0.0070 at 0.1 or 0.9, 0.0023 at 0.01 or 0.99): each would fail a rounding that ignores u.
  constexpr int kN = 1 << 16;
  struct Case {
    double x;
    Format f;
  };
  const Case cases[] = {
      {1.0 + 0.3 * 0x1p-7, Format::kBF16},          {-(1.0 + 0.5 * 0x1p-7), Format::kBF16},
      {2.0 - 0.01 * 0x1p-7, Format::kBF16},         {1.0 + 0.01 * 0x1p-7, Format::kBF16},
      {0.7 * 0x1p-133, Format::kBF16},              {-(3.0 + 0.9) * 0x1p-24, Format::kF16},
      {1000.0 + 0.37 * 0.5, Format::kF16},          {-(2.40625 - 2.296875 - 0.00087), Format::kBF16},
  };
  for (std::size_t c = 0; c < std::size(cases); ++c) {
    const double x = cases[c].x;
    const Format f = cases[c].f;
    double down, up;
    neighbours(x, f, &down, &up);
    ASSERT_NE(down, up) << "case " << c << " must not be exact";
    const double q = std::fabs(up - down), frac = std::fabs(x - down) / q;
    double sum = 0;
    int n_up = 0;
    for (int i = 0; i < kN; ++i) {
      const double r = round_stochastic(x, f, uniform01(1000 + c, i));
      sum += r - x;  // error; exact in double (both on a fine grid near x)
      n_up += (r == up);
    }
    const double sigma_freq = std::sqrt(frac * (1 - frac) / kN);
    EXPECT_LE(std::fabs(sum / kN), 6 * q * sigma_freq) << "case " << c << ": mean error " << sum / kN;
    EXPECT_LE(std::fabs(double(n_up) / kN - frac), 6 * sigma_freq) << "case " << c << ": frac " << frac;
  }
}

// ---- the counter-based generator ----------------------------------------------------------------------------
TEST(formats, uniform01_is_in_unit_interval_deterministic_and_uniform) {
  EXPECT_EQ(mix64(0), 0xe220a8397b1dcdafull);  // splitmix64's first output from state 0: pins the stream
  EXPECT_LT(static_cast<double>((1ull << 53) - 1) * 0x1.0p-53, 1.0);  // the largest possible draw
  double sum = 0;
  for (std::uint64_t i = 0; i < 1000000; ++i) {
    const double u = uniform01(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of N uniforms: σ = sqrt(1/12/N) = 2.9e-4 for N = 10^6; 6σ as above.
  EXPECT_NEAR(sum / 1e6, 0.5, 6 * std::sqrt(1.0 / 12 / 1e6));
  EXPECT_EQ(uniform01(42, 17), uniform01(42, 17));
  EXPECT_NE(uniform01(42, 17), uniform01(43, 17));
  EXPECT_NE(uniform01(42, 17), uniform01(42, 18));
}

// representable's fp32/bf16 fast paths and exp2_int/ilogb_normal against their definitions: on every bf16
// pattern and its neighbours in double and float, and on doubles drawn across the whole exponent range
// (subnormal doubles, fp32 subnormals, beyond fp32's range, ±0).
TEST(formats, fast_paths_equal_the_generic_definitions) {
  auto generic = [](double x, Format f) { return std::isnan(x) || (std::isinf(x) ? format_info(f).has_inf : round_to(x, f) == x); };
  int failures = 0;
  auto check = [&](double x) {
    for (Format f : {Format::kF32, Format::kBF16, Format::kF16, Format::kE4M3})
      if (representable(x, f) != generic(x, f) && ++failures <= 10)
        ADD_FAILURE() << "representable(" << x << ", format " << int(f) << ")";
    if (std::isfinite(x) && x != 0.0) {
      if (ilogb_normal(x) != std::ilogb(x) && ++failures <= 10) ADD_FAILURE() << "ilogb_normal(" << x << ")";
    }
  };
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const double v = bits_to_float(b << 16);
    check(v);
    check(std::nextafter(v, 0.0));
    check(std::nextafter(v, HUGE_VAL));
    check(static_cast<double>(std::nextafter(static_cast<float>(v), HUGE_VALF)));
  }
  for (std::uint64_t i = 0; i < 200000; ++i) {
    const double u = uniform01(7, i), w = uniform01(8, i);
    check(std::ldexp(0.5 + u / 2, static_cast<int>(w * 2200) - 1100) * (i % 2 ? -1 : 1));
  }
  for (int e = -1100; e <= 1100; ++e)
    if (exp2_int(e) != std::ldexp(1.0, e) && ++failures <= 10) ADD_FAILURE() << "exp2_int(" << e << ")";
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace attncheck
