// speed_paths_test.cpp — the shortcuts the kernel fuzz target takes for speed give the bits of the computation they
// replace (harness/fuzz/README.md, issue #5's third round): logit_shift's σ of two copies in one pass, `plain`'s
// backward reusing its forward's P on a shared instance, the accuracy rule without a message on a pass, and the
// memos answering for make_instance_shared's instance by identity.
// Invariants: every comparison is bitwise (memo::same_bits); each test runs every generator's default family on
// a shape with GQA, odd sizes and (half of them) causality, and fails if too few families could be built.
// Run: ctest -R FuzzSpeedPaths
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "harness/fuzz/memo_kernel.h"
#include "kernels/cpu/plain_attention.h"
#include "properties/family.h"
#include "properties/property_util.h"
#include "reference/accuracy.h"
#include "reference/memo.h"
#include "reference/reference.h"

namespace attncheck::fuzz {
namespace {

// Every generator's default family on a shape the fuzzer produces (batch 2, GQA 4:2, odd n and d), causal for
// every other generator. Families a generator rejects on that shape are left out.
std::vector<Family> families() {
  std::vector<Family> out;
  int n = 0;
  for (const GeneratorInfo& g : generators()) {
    Family f = default_family(g.name);
    f.problem = Problem::of_shape(2, 4, 2, 7, 13, 9, /*causal=*/n++ % 2 == 1);
    try {
      make_instance(f, 0);
      out.push_back(f);
    } catch (const Error&) {
    }
  }
  return out;
}

TEST(FuzzSpeedPaths, SigmaOfCopiesDifferingInTheLastQColumnIsEachCopysSigma) {
  int tested = 0;
  for (const Family& f : families()) {
    const Instance in = make_instance(f, 0);
    const Problem& p = in.problem;
    const int last = p.head_dim - 1;
    std::vector<double> zero(p.rows(), 0.0), shifted(p.rows()), own(p.rows());
    Instance a = in, b = in;
    for (std::size_t r = 0; r < p.rows(); ++r) {
      shifted[r] = (r % 2 ? -1.0 : 1.0) * std::ldexp(1.0, static_cast<int>(r % 3));
      own[r] = in.q[r * p.head_dim + last];
      a.q[r * p.head_dim + last] = 0.0;
      b.q[r * p.head_dim + last] = shifted[r];
    }
    const auto sig = score_error_bounds_last_q(in, {&zero, &shifted, &own});
    ASSERT_EQ(sig.size(), 3u);
    EXPECT_TRUE(memo::same_bits(sig[0], score_error_bounds(a))) << f.describe();
    EXPECT_TRUE(memo::same_bits(sig[1], score_error_bounds(b))) << f.describe();
    EXPECT_TRUE(memo::same_bits(sig[2], score_error_bounds(in))) << f.describe();
    ++tested;
  }
  EXPECT_GE(tested, 8);
  const std::vector<double> short_col(1);
  EXPECT_THROW(score_error_bounds_last_q(make_instance(families().at(0), 0), {&short_col}), Error);
}

TEST(FuzzSpeedPaths, PlainBackwardOnASharedInstanceEqualsOneOnACopy) {
  int tested = 0;
  for (const Family& f : families()) {
    const std::shared_ptr<const Instance> shared = make_instance_shared(f, 0);
    ASSERT_EQ(memo::shared_owner(*shared), shared);
    const Instance copy = *shared;  // not shared: plain_backward computes its own P
    ASSERT_EQ(memo::shared_owner(copy), nullptr);
    plain_forward(*shared);
    const BackwardOutput reused = plain_backward(*shared), fresh = plain_backward(copy);
    EXPECT_TRUE(memo::same_bits(reused.dq, fresh.dq) && memo::same_bits(reused.dk, fresh.dk) &&
                memo::same_bits(reused.dv, fresh.dv) && memo::same_bits(reused.delta, fresh.delta))
        << f.describe();
    ++tested;
  }
  EXPECT_GE(tested, 8);
}

TEST(FuzzSpeedPaths, MemosAnswerForTheSharedInstanceWithItsOwnBits) {
  for (const Family& f : families()) {
    const std::shared_ptr<const Instance> shared = make_instance_shared(f, 0);
    const Instance copy = *shared;
    const ReferenceForward a = reference_forward(*shared), b = reference_forward(copy), c = reference_forward(*shared);
    EXPECT_TRUE(memo::same_bits(a.o, b.o) && memo::same_bits(a.o, c.o) && memo::same_bits(a.lse, c.lse));
    MemoKernel m(default_registry().get("paper"));
    const ForwardOutput x = m.forward(*shared), y = m.forward(copy);
    EXPECT_EQ(m.hits(), 1);  // a bit-identical copy is still found by its contents
    EXPECT_TRUE(memo::same_bits(x.o, y.o) && memo::same_bits(x.o, default_registry().get("paper").forward(copy).o));
  }
}

TEST(FuzzSpeedPaths, AccuracyRuleWithoutAPassMessageDiffersOnlyInTheMessage) {
  std::vector<double> exact(64), plain(64), kernel(64);
  for (int i = 0; i < 64; ++i) {
    exact[i] = std::sin(0.37 * i) * std::ldexp(1.0, i % 7 - 3);
    plain[i] = exact[i] * (1 + 0x1p-9 * ((i % 3) - 1));
    kernel[i] = exact[i] * (1 + 0x1p-9 * ((i % 5) - 2));
  }
  for (int fail = 0; fail < 2; ++fail) {
    if (fail) kernel[20] = exact[20] + 4.0;  // far past the bound (~0.03) and one ulp
    const AccuracyCheck full = accuracy_rule(kernel, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16);
    const AccuracyCheck lean = accuracy_rule(kernel, plain, exact, 2.0, kDefaultFloorScale, Format::kBF16, false);
    EXPECT_EQ(full.ok, !fail);
    EXPECT_EQ(lean.ok, full.ok);
    EXPECT_EQ(lean.worst, full.worst);
    for (auto [x, y] : {std::pair{lean.kernel_err, full.kernel_err}, {lean.plain_err, full.plain_err},
                        {lean.floor, full.floor}, {lean.bound, full.bound}, {lean.ratio, full.ratio}})
      EXPECT_EQ(std::bit_cast<std::uint64_t>(x), std::bit_cast<std::uint64_t>(y));
    EXPECT_EQ(lean.message, fail ? full.message : "");
    EXPECT_NE(full.message.find(fail ? "fail" : "pass"), std::string::npos) << full.message;
  }
}

}  // namespace
}  // namespace attncheck::fuzz
