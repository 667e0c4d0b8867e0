// example_plugin_test.cpp — the example plugin (example/example_plugin.c), loaded through the C ABI, against
// the fp64 reference under FlashAttention's accuracy rule (reference/accuracy.h): it passes on every shape
// and feature (causal, keep-mask, bias, GQA, n_q != n_k) with its defect off, and the skip_rescale defect is
// caught. The baseline of the rule is `plain` (kernels/cpu/plain_attention.h: eager bf16 attention).
// Run: ctest -R example_plugin_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "harness/plugin/plugin_loader.h"
#include "harness/plugin/test_instances.h"
#include "kernels/cpu/plain_attention.h"
#include "reference/accuracy.h"
#include "reference/reference.h"

namespace attncheck {
namespace {

using plugin_test::make_problem;
using plugin_test::random_instance;

// Sets ATTNCHECK_EXAMPLE_DEFECT for one scope (the example reads it at every call; children inherit it).
struct DefectScope {
  explicit DefectScope(const char* defect) { setenv("ATTNCHECK_EXAMPLE_DEFECT", defect, 1); }
  ~DefectScope() { unsetenv("ATTNCHECK_EXAMPLE_DEFECT"); }
};

const Kernel& example() {
  static Registry r;
  static const Kernel& k = [] () -> const Kernel& {
    PluginOptions o;  // isolation on, as attncheck runs it by default
    load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, o);
    return r.get("plugin:example");
  }();
  return k;
}

struct Verdict {
  AccuracyCheck o, lse;
};

// FlashAttention's rule with its own factor 2 and the default fp32 floor (accuracy.h derives both). The
// example accumulates in fp32 like the reference kernels of that rule, so no extra factor is needed.
Verdict judge(const Instance& in) {
  const ForwardOutput k = example().forward(in);
  const ForwardOutput plain = plain_forward(in);
  const ReferenceForward exact = reference_forward(in);
  return {accuracy_rule(k.o, plain.o, exact.o), accuracy_rule(k.lse, plain.lse, exact.lse)};
}

struct Shape {
  int batch, heads_q, heads_kv, n_q, n_k, head_dim;
  bool causal, mask, bias;
};

const Shape kShapes[] = {
    {1, 1, 1, 1, 1, 1, false, false, false},    // the smallest problem
    {1, 1, 1, 1, 9, 8, false, false, false},    // one row, three key tiles
    {1, 2, 2, 17, 33, 16, false, false, false}, // ragged last tile
    {2, 4, 2, 16, 16, 32, true, false, false},  // causal, GQA
    {1, 4, 1, 7, 29, 64, true, false, false},   // causal with n_q < n_k (bottom-right), MQA
    {1, 2, 1, 20, 5, 8, true, false, false},    // n_q > n_k: the first rows see no key (O = 0, LSE = -inf)
    {1, 2, 2, 12, 40, 16, false, true, false},  // keep-mask (some rows fully masked by chance)
    {1, 2, 1, 12, 24, 16, true, true, true},    // everything at once
    {1, 1, 1, 64, 128, 64, false, false, true}, // longer rows with bias
};

TEST(ExamplePlugin, MeetsTheAccuracyRuleWithItsDefectOff) {
  unsetenv("ATTNCHECK_EXAMPLE_DEFECT");
  for (const Shape& s : kShapes)
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const Instance in = random_instance(
          make_problem(s.batch, s.heads_q, s.heads_kv, s.n_q, s.n_k, s.head_dim, s.causal, s.mask, s.bias), seed);
      const Verdict v = judge(in);
      EXPECT_TRUE(v.o.ok) << in.problem.describe() << " seed " << seed << ": O " << v.o.message;
      EXPECT_TRUE(v.lse.ok) << in.problem.describe() << " seed " << seed << ": LSE " << v.lse.message;
    }
}

TEST(ExamplePlugin, BackwardMeetsTheAccuracyRule) {
  unsetenv("ATTNCHECK_EXAMPLE_DEFECT");
  static Registry r;
  if (!r.find("plugin:example_bwd")) load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, PluginOptions{});
  const Kernel& k = r.get("plugin:example_bwd");
  for (const Shape& s : kShapes)
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      const Instance in = random_instance(
          make_problem(s.batch, s.heads_q, s.heads_kv, s.n_q, s.n_k, s.head_dim, s.causal, s.mask, s.bias), seed);
      const BackwardOutput g = k.backward(in, k.forward(in));
      const BackwardOutput plain = plain_backward(in);
      const ReferenceBackward exact = reference_backward(in);
      // dQ sums n_k fp32 terms per element, dK and dV sum n_q · group terms: accuracy.h's
      // fp32_accumulation_floor_scale(n) is the floor for an fp32 sum of n terms (derived there).
      const std::size_t group = static_cast<std::size_t>(s.heads_q / s.heads_kv);
      const AccuracyCheck dq = accuracy_rule(g.dq, plain.dq, exact.dq, 2.0, fp32_accumulation_floor_scale(s.n_k));
      const AccuracyCheck dk =
          accuracy_rule(g.dk, plain.dk, exact.dk, 2.0, fp32_accumulation_floor_scale(s.n_q * group));
      const AccuracyCheck dv =
          accuracy_rule(g.dv, plain.dv, exact.dv, 2.0, fp32_accumulation_floor_scale(s.n_q * group));
      EXPECT_TRUE(dq.ok) << in.problem.describe() << " seed " << seed << ": dQ " << dq.message;
      EXPECT_TRUE(dk.ok) << in.problem.describe() << " seed " << seed << ": dK " << dk.message;
      EXPECT_TRUE(dv.ok) << in.problem.describe() << " seed " << seed << ": dV " << dv.message;
      ASSERT_EQ(g.delta.size(), exact.delta.size());
    }
}

TEST(ExamplePlugin, FailsTheAccuracyRuleWithSkipRescale) {
  DefectScope defect("skip_rescale");
  // Any row whose running max grows after the first key tile goes wrong; with 32 normal keys in tiles of 4
  // every instance has such rows, so every seed must fail.
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const Instance in = random_instance(make_problem(1, 2, 1, 8, 32, 16), seed);
    const Verdict v = judge(in);
    EXPECT_FALSE(v.o.ok) << "seed " << seed << ": " << v.o.message;
    EXPECT_GT(v.o.kernel_err, 4 * v.o.bound) << v.o.message;  // far outside, not at the edge
  }
  // The smallest failing shape needs a second key tile: n_k = 5 with the tile of 4. d = 1, scale 1, q = 1:
  // keys 0..3 are 0 (score 0, value 0), key 4 is 1 (score 1, value 1).
  Instance in = random_instance(make_problem(1, 1, 1, 1, 5, 1), 1);
  in.problem.scale = 1.0;
  in.q = {1.0};
  in.k = {0.0, 0.0, 0.0, 0.0, 1.0};
  in.v = {0.0, 0.0, 0.0, 0.0, 1.0};
  const Verdict v = judge(in);
  EXPECT_FALSE(v.o.ok) << v.o.message;
  // Exact O = e / (4 + e) = 0.405. Rescaled, the first tile's weights become exp(0 - 1) each; without the
  // rescale they stay exp(0) = 1 while key 4 gets exp(1 - 1) = 1, so O = 1 / (4 + 1) = 0.2.
  EXPECT_EQ(example().forward(in).o[0], round_to(1.0 / 5.0, Format::kBF16));
}

TEST(ExamplePlugin, TruncatePMovesTheResultsByLessThanItsBound) {
  const Instance in = random_instance(make_problem(1, 2, 2, 16, 32, 16), 4);
  const ForwardOutput good = example().forward(in);
  DefectScope defect("truncate_p");
  const ForwardOutput bad = example().forward(in);
  ASSERT_EQ(good.o.size(), bad.o.size());
  // Bound: truncate_p changes only p̄_j (the row sum l keeps the fp32 p_j): toward zero instead of to
  // nearest moves p̄_j by less than one bf16 ulp, < 2^-7 · p_j. So O = Σ p̄_j v_j / l moves by less than
  // 2^-7 · Σ p_j |v_j| / l <= 2^-7 · max|v| before the output rounding, plus one bf16 ulp of O for rounding
  // both results (half an ulp each).
  double max_v = 0;
  for (double x : in.v) max_v = std::max(max_v, std::abs(x));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < good.o.size(); ++i) {
    differ += good.o[i] != bad.o[i];
    EXPECT_LE(std::abs(good.o[i] - bad.o[i]), 0x1p-7 * max_v + ulp(good.o[i], Format::kBF16)) << i;
  }
  EXPECT_GT(differ, good.o.size() / 10);  // the defect is live: it moves a good share of the outputs
}

// init's options are per load, all or nothing: a second load in one process starts from the defaults (it kept the
// first load's defect), and a failed init leaves the plugin as it was (it kept the options read before the bad one).
// The library's globals are shared by every load in the process, so each step reads the last good init's options.
TEST(ExamplePlugin, EachInitStartsFromTheDefaultsAndAFailedOneChangesNothing) {
  const Instance in = random_instance(make_problem(1, 2, 2, 17, 33, 16), 7);
  const auto load = [](Registry& r, const char* options) -> const Kernel& {
    PluginOptions o;
    o.init_options = options;
    load_plugin(ATTNCHECK_EXAMPLE_PLUGIN, r, o);
    return r.get("plugin:example");
  };
  Registry plain, truncating, again, truncating_again, failing, restore;
  const std::vector<double> good = load(plain, "").forward(in).o;
  const std::vector<double> bad = load(truncating, "defect=truncate_p").forward(in).o;
  ASSERT_NE(good, bad);  // the defect is live on this instance
  EXPECT_EQ(load(again, "").forward(in).o, good) << "the second load kept the first load's defect";
  const Kernel& truncate = load(truncating_again, "defect=truncate_p");
  EXPECT_THROW(load(failing, "defect=none,tile_k=0"), Error);
  EXPECT_EQ(truncate.forward(in).o, bad) << "the failed init changed the defect";
  load(restore, "");  // the defaults again, for the tests after this one
}

// Set after the plugin is loaded: per call (an unknown name already in the environment at load fails the load, exit 2:
// PluginCli.AnUnknownDefectInTheEnvironmentIsAUsageError).
TEST(ExamplePlugin, RejectsAnUnknownDefectAsAnError) {
  const Kernel& k = example();
  DefectScope defect("no_such_defect");
  const Instance in = random_instance(make_problem(1, 1, 1, 2, 2, 2), 1);
  try {
    k.forward(in);
    FAIL() << "no fault";
  } catch (const PluginFault& f) {
    EXPECT_EQ(f.kind(), FaultKind::kError);
    EXPECT_NE(f.detail().find("ATTNCHECK_ERR_INVALID"), std::string::npos) << f.what();
  }
}

}  // namespace
}  // namespace attncheck
