// statistics_test.cpp — the bias statistic is honest: a kernel with a known bias fails with the right mean,
// an unbiased noisy kernel passes, a bias below ε passes however large its z, the Šidák threshold is right, and
// the null controls pass the tie family. Synthetic kernels: test_kernels.h.
// Run: ctest -R statistics_test   (label unit)
#include <gtest/gtest.h>

#include <cmath>

#include "properties/props.h"
#include "properties/test_kernels.h"

namespace attncheck {
namespace {

using testing::make_kernel;
using testing::rounded_reference;

TEST(Statistics, SidakThreshold) {
  EXPECT_NEAR(sidak_z(6.0, 1), 6.0, 1e-9);
  const double z5 = sidak_z(6.0, 5);
  // α1 = erfc(6/√2) ≈ 1.97e-9; α5 ≈ α1/5 ≈ 3.95e-10; Φ^-1(1 − α5/2) ≈ 6.26.
  EXPECT_NEAR(z5, 6.256, 0.01);
  EXPECT_NEAR(std::erfc(z5 / std::sqrt(2.0)) * 5, std::erfc(6.0 / std::sqrt(2.0)), 1e-12);
  EXPECT_GT(sidak_z(6.0, 10), z5);
}

TEST(Statistics, OneUlpUpIsABiasOfOneUlp) {
  auto k = make_kernel("up", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (double& x : o.o) x = x + ulp(x, Format::kBF16);
    return o;
  });
  Budget b;
  b.instances = 16;
  const BiasStatistic s = bias_statistic(*k, default_family("normal"), b);
  EXPECT_TRUE(s.fails);
  EXPECT_EQ(s.stats["tensor"], "O");
  // Each error is exact-to-rounded (within ±0.5 ulp, mean ≈ 0) plus one ulp of the rounded value: mean ≈ 1.
  EXPECT_NEAR(s.stats["mean_ulp"].get<double>(), 1.0, 0.1);
  EXPECT_GT(s.stats["z"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(s.z_crit, 6.0);  // forward only: one tensor, no adjustment
  const Outcome o = get_property("unbiased").check(*k, default_family("normal"), b);
  EXPECT_EQ(o.status, Status::kFail) << o.message;  // calibrated: oracle and stochastic pass this family
  EXPECT_TRUE(o.stats.contains("calibration"));
}

TEST(Statistics, SymmetricNoisePassesAndSmallBiasIsBelowEpsilon) {
  // ±1 ulp with equal probability, from the instance seed: unbiased.
  auto noisy = make_kernel("noisy", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (std::size_t i = 0; i < o.o.size(); ++i)
      o.o[i] += ((mix64(in.seed ^ i) & 1) ? 1 : -1) * ulp(o.o[i], Format::kBF16);
    return o;
  });
  Budget b;
  b.instances = 32;
  EXPECT_EQ(get_property("unbiased").check(*noisy, default_family("normal"), b).status, Status::kPass);
  // +1 ulp on one element in 64: mean ≈ 1/64 ≈ 0.016 ulp < ε = 0.05, though z is large.
  auto slight = make_kernel("slight", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (std::size_t i = 0; i < o.o.size(); i += 64) o.o[i] += ulp(o.o[i], Format::kBF16);
    return o;
  });
  const BiasStatistic s = bias_statistic(*slight, default_family("normal"), b);
  EXPECT_FALSE(s.fails) << s.message;
  EXPECT_LT(std::fabs(s.stats["mean_ulp"].get<double>()), 0.05);
}

TEST(Statistics, NullControlsPassTheTieFamily) {
  Budget b;
  b.instances = 32;
  for (const char* name : {"oracle", "stochastic"}) {
    const Outcome o = get_property("unbiased").check(default_registry().get(name), default_family("tied_max"), b);
    EXPECT_EQ(o.status, Status::kPass) << name << ": " << o.message;
    EXPECT_EQ(o.stats["tensors_tested"], default_registry().get(name).caps().backward ? 5 : 1);
  }
}

}  // namespace
}  // namespace attncheck
