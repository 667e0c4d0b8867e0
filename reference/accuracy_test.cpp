// accuracy_test.cpp — unit tests of accuracy_rule (accuracy.h) on synthetic vectors: the 2× rule, the fp32
// floor, non-finite entries, the message, bad arguments; and fp32_accumulation_floor_scale on real fp32 sums.
// Run: ctest --test-dir build -R accuracy
#include <gtest/gtest.h>

#include <cmath>

#include "harness/problem.h"
#include "kernels/formats.h"
#include "reference/accuracy.h"

namespace attncheck {
namespace {

using V = std::vector<double>;
constexpr double kInf = HUGE_VAL;

TEST(accuracy, passes_within_factor_times_the_plain_error) {
  const V exact{1, 2, -3, 0.5};
  const V plain{1.01, 1.98, -3, 0.5};     // plain error 0.02
  const V kernel{1.03, 2, -2.96, 0.5};    // kernel error 0.04 at index 2
  const AccuracyCheck r = accuracy_rule(kernel, plain, exact);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NEAR(r.kernel_err, 0.04, 1e-15);
  EXPECT_NEAR(r.plain_err, 0.02, 1e-15);
  EXPECT_EQ(r.floor, 4 * 0x1p-24 * 3);
  EXPECT_EQ(r.bound, 2 * r.plain_err + r.floor);
  EXPECT_EQ(r.worst, 2u);
  EXPECT_NE(r.message.find("pass"), std::string::npos) << r.message;
}

TEST(accuracy, fails_beyond_it_and_names_the_worst_index) {
  const V exact{1, 2, -3, 0.5};
  const V plain{1.01, 1.98, -3, 0.5};
  const V kernel{1.03, 2, -2.95, 0.5};  // 0.05 > 2·0.02 + 1.8e-7
  const AccuracyCheck r = accuracy_rule(kernel, plain, exact);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst, 2u);
  EXPECT_NE(r.message.find("fail"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("index 2"), std::string::npos) << r.message;
  EXPECT_TRUE(accuracy_rule(kernel, plain, exact, /*factor=*/3.0).ok);  // a documented looser factor
}

TEST(accuracy, fp32_floor_excuses_fp32_noise_but_not_a_bf16_error) {
  const V exact{2.0, -1.0, 0.25};
  const V plain = exact;  // the plain attention happens to be exact
  // floor = 4·2^-24·2 = 2^-21: one fp32 ulp at 2 (2^-22) passes, one bf16 ulp (2^-6) does not.
  EXPECT_TRUE(accuracy_rule(V{2.0 + 0x1p-22, -1.0, 0.25}, plain, exact).ok);
  EXPECT_TRUE(accuracy_rule(V{2.0 - 0x1p-21, -1.0, 0.25}, plain, exact).ok);  // exactly at the bound
  EXPECT_FALSE(accuracy_rule(V{2.0, -1.0 - 0x1p-20, 0.25}, plain, exact).ok);
  EXPECT_FALSE(accuracy_rule(V{2.0 + 0x1p-6, -1.0, 0.25}, plain, exact).ok);
  EXPECT_FALSE(accuracy_rule(V{2.0, -1.0, 0.25 + 0x1p-6}, plain, exact, 2.0, 0.0).ok);
  // All-zero exact (V = 0): no floor; the kernel must be exact when the plain one is.
  EXPECT_TRUE(accuracy_rule(V{0, 0}, V{0, 0}, V{0, 0}).ok);
  EXPECT_FALSE(accuracy_rule(V{0x1p-100, 0}, V{0, 0}, V{0, 0}).ok);
  EXPECT_TRUE(accuracy_rule(V{}, V{}, V{}).ok);
}

TEST(accuracy, infinite_exact_values_must_be_matched) {
  const V exact{-kInf, 1.0};  // LSE of a fully masked row, and of a normal one
  const V plain{-kInf, 1.0};
  EXPECT_TRUE(accuracy_rule(V{-kInf, 1.0}, plain, exact).ok);
  for (double wrong : {-1e30, kInf, std::nan(""), 0.0}) {
    const AccuracyCheck r = accuracy_rule(V{wrong, 1.0}, plain, exact);
    EXPECT_FALSE(r.ok) << wrong;
    EXPECT_EQ(r.worst, 0u);
    EXPECT_NE(r.message.find("index 0"), std::string::npos) << r.message;
  }
  // The plain attention matching does not help a kernel that does not.
  EXPECT_FALSE(accuracy_rule(V{-1e30, 1.0}, V{-1e30, 1.0}, exact).ok);
}

TEST(accuracy, nan_where_exact_is_finite_fails_and_is_reported) {
  const V exact{1, 2, 3};
  const AccuracyCheck r = accuracy_rule(V{1, std::nan(""), 3}, V{1, std::nan(""), 3}, exact, 1e6);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst, 1u);
  EXPECT_NE(r.message.find("NaN"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("index 1"), std::string::npos) << r.message;
  // The ratio says how far out it is: past any allowance (it read 0 when no entry was finite).
  EXPECT_EQ(accuracy_rule(V{std::nan(""), std::nan("")}, V{1, 2}, V{1, 2}).ratio, 1e30);
  // The first bad entry is the one reported, even with a larger finite error elsewhere.
  const AccuracyCheck two = accuracy_rule(V{100, 2, std::nan("")}, V{1, 2, 3}, exact);
  EXPECT_EQ(two.worst, 2u);
  // Exact NaN (undefined): the kernel must be NaN too.
  EXPECT_TRUE(accuracy_rule(V{std::nan(""), 1}, V{0, 1}, V{std::nan(""), 1}).ok);
  EXPECT_FALSE(accuracy_rule(V{0, 1}, V{0, 1}, V{std::nan(""), 1}).ok);
}

TEST(accuracy, overflow_is_excused_only_where_the_plain_attention_overflows_too) {
  const V exact{1e39, 1.0};  // beyond bf16's range
  EXPECT_TRUE(accuracy_rule(V{kInf, 1.0}, V{kInf, 1.0}, exact).ok);
  EXPECT_FALSE(accuracy_rule(V{kInf, 1.0}, V{3.3895313892515355e38, 1.0}, exact).ok);
  EXPECT_FALSE(accuracy_rule(V{-kInf, 1.0}, V{kInf, 1.0}, exact).ok);
  // A non-finite plain entry does not enter plain_err, so it cannot excuse the kernel elsewhere.
  const AccuracyCheck r = accuracy_rule(V{1.0, 1.5}, V{kInf, 1.0}, V{1.0, 1.0});
  EXPECT_EQ(r.plain_err, 0.0);
  EXPECT_FALSE(r.ok);
}

TEST(accuracy, bad_arguments_throw) {
  EXPECT_THROW(accuracy_rule(V{1, 2}, V{1}, V{1, 2}), Error);
  EXPECT_THROW(accuracy_rule(V{1}, V{1}, V{1, 2}), Error);
  EXPECT_THROW(accuracy_rule(V{1}, V{1}, V{1}, -1.0), Error);
  EXPECT_THROW(accuracy_rule(V{1}, V{1}, V{1}, 2.0, std::nan("")), Error);
}

TEST(accuracy, accumulation_floor_covers_two_fp32_summation_orders) {
  // n positive fp32 terms summed forwards and backwards in fp32: the two results differ by fp32 noise that the
  // default floor cannot always excuse (plain exact, kernel in another order), but 4 + 2n can (accuracy.h).
  constexpr std::size_t kN = 4096;
  EXPECT_EQ(fp32_accumulation_floor_scale(kN), 4.0 + 2.0 * kN);
  double worst_ratio = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> t(kN);
    double exact = 0;  // exact: 4096 floats in [0, 1) sum exactly in double (24 + 12 bits)
    for (std::size_t i = 0; i < kN; ++i) t[i] = static_cast<float>(uniform01(seed, i)), exact += t[i];
    float fwd = 0, bwd = 0;
    for (std::size_t i = 0; i < kN; ++i) fwd += t[i], bwd += t[kN - 1 - i];
    const AccuracyCheck r = accuracy_rule(V{bwd}, V{fwd}, V{exact}, 0.0, fp32_accumulation_floor_scale(kN));
    EXPECT_TRUE(r.ok) << r.message;  // factor 0: the floor alone must cover it
    worst_ratio = std::fmax(worst_ratio, std::fabs(bwd - exact) / (0x1p-24 * exact));
  }
  EXPECT_GT(worst_ratio, kDefaultFloorScale) << "the sums should show noise beyond the default floor";
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {
using V2 = std::vector<double>;
constexpr double kInf2 = HUGE_VAL;
constexpr double kBf16Max = 3.3895313892515355e38;  // 0x7f7f: (2 − 2^-7)·2^127

// Regression (fuzzing, 2026-11-30): the exact dQ lies beyond bf16's range; the oracle gives +inf (the correctly
// rounded value), the plain attention NaN (an intermediate overflow). With the format known, inf passes iff it is
// a faithful rounding (|exact| > max_finite, same sign), whatever the plain attention gives.
TEST(accuracy, infinity_is_judged_against_the_output_format) {
  const V2 exact{1e39, -1e39, 1.0};
  const V2 plain{std::nan(""), std::nan(""), 1.0};
  EXPECT_FALSE(accuracy_rule(V2{kInf2, -kInf2, 1.0}, plain, exact).ok) << "legacy form: plain must overflow too";
  EXPECT_TRUE(accuracy_rule(V2{kInf2, -kInf2, 1.0}, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  // The wrong sign, or an infinity where the exact value rounds to a finite bf16, fails, even where the plain
  // attention overflows the same way (a wrong infinity is not excused by the baseline).
  EXPECT_FALSE(accuracy_rule(V2{-kInf2, -kInf2, 1.0}, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  const V2 below{3.0e38, 1.0};
  const AccuracyCheck r = accuracy_rule(V2{kInf2, 1.0}, V2{kInf2, 1.0}, below, 2.0, kDefaultFloorScale, Format::kBF16);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst, 0u);
  EXPECT_NE(r.message.find("finite value of the output format"), std::string::npos) << r.message;
  // Just past the largest finite value (below the round-to-nearest threshold max + ulp/2): both neighbours,
  // max_finite and inf, are faithful roundings (stochastic rounding gives either).
  const V2 just{kBf16Max * (1 + 0x1p-10), 1.0};
  EXPECT_TRUE(accuracy_rule(V2{kInf2, 1.0}, V2{1.0, 1.0}, just, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  EXPECT_TRUE(accuracy_rule(V2{kBf16Max, 1.0}, V2{1.0, 1.0}, just, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  // fp32 (LSE): the same at fp32's range.
  EXPECT_TRUE(accuracy_rule(V2{kInf2}, V2{kInf2}, V2{1e39}, 2.0, kDefaultFloorScale, Format::kF32).ok);
  EXPECT_FALSE(accuracy_rule(V2{kInf2}, V2{kInf2}, V2{3e38}, 2.0, kDefaultFloorScale, Format::kF32).ok);
}

// Regression (fuzzing): a stochastically rounded output errs by up to one ulp per element, which the 2x rule
// alone rejects where the plain attention is nearly exact. The allowance is one ulp of the format at each
// element's own exact value: never a larger entry's ulp.
TEST(accuracy, one_ulp_of_the_format_per_element) {
  const V2 exact{1.0 + 3 * 0x1p-9, 100.0};  // between the bf16 values 1 + 2^-7·{0, 1}
  const V2 plain = exact;                   // the baseline happens to be exact: bound = floor only
  const V2 up{1.0 + 0x1p-7, 100.0};         // the upper neighbour: err 2^-9 < ulp 2^-7
  EXPECT_FALSE(accuracy_rule(up, plain, exact).ok) << "legacy form: the 2x bound alone";
  const AccuracyCheck ok = accuracy_rule(up, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16);
  EXPECT_TRUE(ok.ok);
  EXPECT_GT(ok.kernel_err, ok.bound);  // past the 2x bound, within the ulp: the ratio is against the allowance
  EXPECT_LE(ok.ratio, 1.0);
  EXPECT_TRUE(accuracy_rule(V2{1.0, 100.5}, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  // Past one ulp at that element: fails, although it is below the ulp of the larger entry (0.5 at 100).
  const AccuracyCheck r = accuracy_rule(V2{1.25, 100.0}, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16);
  EXPECT_FALSE(r.ok);
  EXPECT_GT(r.ratio, 1.0);
  EXPECT_EQ(r.worst, 0u);
  EXPECT_FALSE(accuracy_rule(V2{1.0 + 0x1p-6, 100.0}, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  // fp32 for LSE: one fp32 ulp passes, a bf16-sized error does not.
  EXPECT_TRUE(accuracy_rule(V2{2.0 + 0x1p-22}, V2{2.0}, V2{2.0 + 0x1p-23}, 0.0, 0.0, Format::kF32).ok);
  EXPECT_FALSE(accuracy_rule(V2{2.0 + 0x1p-7}, V2{2.0}, V2{2.0 + 0x1p-23}, 0.0, 0.0, Format::kF32).ok);
}

// The kernel-only noise (one allowance per element, the `accurate` property's δ/dP cancellation): an element within
// it passes; it is the largest of bound, ulp and noise, not their sum; a noise entry that is not a finite number
// >= 0 allows nothing (an infinity would pass any error); a size mismatch throws.
TEST(accuracy, kernel_only_noise_per_element) {
  const V2 exact{0.0, 1.0}, plain{0.0, 1.0};  // plain exact: the bound is the floor, 4·2^-24
  const V2 got{1e-6, 1.0 + 0x1p-7};            // element 0: 1e-6 where exact 0; element 1: one bf16 ulp off
  EXPECT_FALSE(accuracy_rule(got, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16).ok);
  const V2 noise{2e-6, 0.0};
  const AccuracyCheck ok = accuracy_rule(got, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, true, &noise);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_LE(ok.ratio, 1.0);
  const V2 half{0.5e-6, 0.0};  // less than the error: fails, and the message names the noise
  const AccuracyCheck no = accuracy_rule(got, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, true, &half);
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.message.find("kernel-only noise (5e-07 at the worst index)"), std::string::npos) << no.message;
  // Not their sum: element 1's error (1 ulp + 2^-9) is past its ulp, and a noise of 2^-9 does not add to it.
  const V2 past{1e-6, 1.0 + 0x1p-7 + 0x1p-9}, n2{2e-6, 0x1p-9};
  EXPECT_FALSE(accuracy_rule(past, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, false, &n2).ok);
  for (double bad : {HUGE_VAL, std::nan(""), -1.0}) {
    const V2 b{bad, 0.0};
    EXPECT_FALSE(accuracy_rule(got, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, false, &b).ok) << bad;
  }
  const std::vector<double> short_noise{1.0};
  EXPECT_THROW(accuracy_rule(got, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, false, &short_noise), Error);
}

}  // namespace
}  // namespace attncheck
