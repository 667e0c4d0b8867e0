// properties_test.cpp — the properties are honest and sharp.
//   Honest: the null controls (oracle, stochastic) pass every (property, family) of the default suite, with
//   three seeds. Sharp: the paper's kernel fails `unbiased` on the tie family and paper-fixed passes it (three
//   seeds); each per-instance property fails a synthetic kernel with exactly the defect it targets and passes
//   the same kernel without the defect.
// Run: ctest -L property   (label property; about half a minute)
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <cstring>

#include "properties/family_internal.h"
#include "properties/property.h"
#include "properties/property_util.h"
#include "properties/props.h"
#include "properties/test_kernels.h"
#include "kernels/cpu/builtin_kernels.h"
#include "properties/family.h"
#include "properties/family_internal.h"
#include "reference/reference.h"

namespace attncheck {
namespace {

using testing::FnKernel;
using testing::make_kernel;
using testing::ModelDefect;
using testing::rounded_reference;
using testing::rounded_reference_backward;

void expect_null_control_passes_default_suite(const char* kernel) {
  const Kernel& k = default_registry().get(kernel);
  for (std::uint64_t seed : {1, 2, 3}) {
    for (SuiteEntry e : suite("default")) {
      e.family.seed = reseeded(e.family.seed, seed);
      const Outcome o = get_property(e.property).check(k, e.family, Budget{});
      // Pass, not skip: an entry that skips on a correct kernel checks nothing on any (masked_row on sliding_window at
      // n_q = n_k skipped on every kernel of every default run until session 33).
      EXPECT_EQ(o.status, Status::kPass)
          << kernel << " seed " << seed << " " << e.property << " on " << e.family.describe() << ": "
          << status_name(o.status) << ": " << o.message;
    }
  }
}

TEST(NullControls, OraclePassesEveryPropertyOfTheDefaultSuite) { expect_null_control_passes_default_suite("oracle"); }
TEST(NullControls, StochasticPassesEveryPropertyOfTheDefaultSuite) {
  expect_null_control_passes_default_suite("stochastic");
}

// The bias suite's own families (tied_max_flat, sink, near_tie with a negative max, V and dO < 0, 4-8 ties, tiles
// 8x8, mixed-sign V and dO, low_rank with one-sign V and dO) had no null-control test, and the default suite's was
// run at T = 64 only. Here both controls run every bias-suite family at the smallest T the z test allows (24: the
// widest sampling noise), with the family seeds mixed as `attncheck check --seed N` mixes them, N = 1..8. Measured
// with the CLI (2026-12-02): over N = 1..40 at T = 24 no null check failed; the largest |z| of any tensor was 3.9
// (stochastic dQ, tied_max, N = 28) and the largest |mean| 0.029 ulp (oracle O, max_zero, N = 37); over N = 1..100
// at T = 64, 4.6 and 0.020. So every tensor stays under both thresholds, not only under one of them: a null control
// held by the ε floor alone, at a z past z_crit, would be a statistic that lies.
TEST(NullControls, PassEveryFamilyOfTheBiasSuiteOnEightSeedsAtTheMinimumT) {
  Budget b;
  b.instances = kMinBiasInstances;
  for (const char* kernel : {"oracle", "stochastic"}) {
    const Kernel& k = default_registry().get(kernel);
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      for (SuiteEntry e : suite("bias")) {
        e.family.seed = reseeded(e.family.seed, seed);
        const Outcome o = get_property("unbiased").check(k, e.family, b);
        const std::string where = std::string(kernel) + " --seed " + std::to_string(seed) + " on " + e.label;
        ASSERT_EQ(o.status, Status::kPass) << where << ": " << o.message;
        const double z_crit = o.stats["z_crit"].get<double>();
        for (const auto& [tensor, t] : o.stats["tensors"].items()) {
          EXPECT_LT(std::fabs(t["z"].get<double>()), z_crit) << where << " " << tensor << ": " << t.dump();
          EXPECT_LT(std::fabs(t["mean_ulp"].get<double>()), b.epsilon_ulp) << where << " " << tensor << ": " << t.dump();
        }
      }
    }
  }
}

// The long suite's reason to exist: a kernel right within a 64-key tile and wrong across tiles. This one never
// rescales a tile's partial sums to the row's running max (each tile keeps exp(s - its own max)), the classic
// online-softmax slip; it is exact whenever a row's visible keys sit in one tile. Every `accurate` check of the
// default suite passes it (its families have n_k <= 40); the long suite fails it.
ForwardOutput unrescaled_tiles(const Instance& in) {
  constexpr int kTile = 64;
  const Problem& p = in.problem;
  ForwardOutput out = rounded_reference(in);  // LSE exact; O recomputed below
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / (p.heads_q / p.heads_kv);
      for (int i = 0; i < p.n_q; ++i) {
        std::vector<double> o(p.head_dim, 0.0);
        double l = 0;
        for (int t0 = 0; t0 < p.n_k; t0 += kTile) {
          std::vector<double> s;
          std::vector<int> js;
          for (int j = t0; j < std::min(p.n_k, t0 + kTile); ++j) {
            if (!in.visible(b, h, i, j)) continue;
            double x = 0;
            for (int c = 0; c < p.head_dim; ++c) x += in.q[p.q_at(b, h, i, c)] * in.k[p.kv_at(b, hk, j, c)];
            s.push_back(x * p.scale + (p.has_bias ? in.bias[p.score_at(b, h, i, j)] : 0.0));
            js.push_back(j);
          }
          if (s.empty()) continue;
          const double m = *std::max_element(s.begin(), s.end());  // the tile's max, never the row's
          for (std::size_t n = 0; n < s.size(); ++n) {
            const double w = std::exp(s[n] - m);
            l += w;
            for (int c = 0; c < p.head_dim; ++c) o[c] += w * in.v[p.kv_at(b, hk, js[n], c)];
          }
        }
        for (int c = 0; c < p.head_dim; ++c)
          out.o[p.q_at(b, h, i, c)] = l > 0 ? round_to(o[c] / l, Format::kBF16) : 0.0;
      }
    }
  return out;
}

TEST(LongSuite, CatchesAKernelWrongOnlyAcrossKeyTiles) {
  const auto k = make_kernel("unrescaled_tiles", unrescaled_tiles);
  for (const SuiteEntry& e : suite("default")) {
    if (e.property != "accurate" || e.family.problem.n_k > 64) continue;
    const Outcome o = get_property("accurate").check(*k, e.family, Budget{});
    EXPECT_EQ(o.status, Status::kPass) << e.family.describe() << ": " << o.message;
  }
  int failed = 0, checked = 0;
  for (const SuiteEntry& e : suite("long")) {
    if (e.property != "accurate") continue;
    Budget b;
    b.instances = 4;  // the defect is gross: O off by orders of ulps on the first instance
    ++checked;
    failed += get_property("accurate").check(*k, e.family, b).status == Status::kFail;
  }
  EXPECT_GE(checked, 8);
  EXPECT_EQ(failed, checked) << "every long accurate family spans several 64-key tiles with different maxima";
}

// Each family of the long suite spans tiles as its comment says: more than two 64-key tiles, both 64 and 128 head
// dims, tails at 64 and 128, the kernel's own tiles; each is valid (the generators' limits hold at these lengths).
TEST(LongSuite, SpansSeveralTilesOfARealKernel) {
  bool d64 = false, d128 = false, tail64 = false, tail128 = false;
  for (const SuiteEntry& e : suite("long")) {
    const Problem& p = e.family.problem;
    EXPECT_GT(std::max(p.n_q, p.n_k), 128) << e.label;
    EXPECT_GT(p.n_k, 64) << e.label;
    EXPECT_EQ(e.family.tile_q + e.family.tile_k, 0) << e.label;
    EXPECT_EQ(p.scale, Problem::default_scale(p.head_dim)) << e.label;
    EXPECT_NO_THROW(validate_family(e.family)) << e.label;
    EXPECT_NO_THROW(make_instance(e.family, 0)) << e.label;
    d64 |= p.head_dim == 64, d128 |= p.head_dim == 128;
    tail64 |= p.n_k % 64 != 0, tail128 |= p.n_k % 128 != 0 && p.n_k > 128;
  }
  EXPECT_TRUE(d64 && d128 && tail64 && tail128);
}

// Both null controls pass every check of the long suite (its own seeds): its properties stay honest at these lengths.
// At T = 24, the smallest the z test allows (the widest sampling noise), ~17 s; the CLI's default T = 64 passes too
// (`check -k oracle -k stochastic --suite long`: 46 of 46, 2026-12-04).
TEST(NullControls, PassEveryCheckOfTheLongSuite) {
  Budget b;
  b.instances = kMinBiasInstances;
  for (const char* kernel : {"oracle", "stochastic"}) {
    const Kernel& k = default_registry().get(kernel);
    for (const SuiteEntry& e : suite("long")) {
      const Outcome o = get_property(e.property).check(k, e.family, b);
      EXPECT_EQ(o.status, Status::kPass) << kernel << " " << e.property << " on " << e.label << ": " << o.message;
    }
  }
}

// On `generator`'s default family, seeds 1-3: `biased` fails `unbiased` on O, rounded away from zero by more than
// `away_ulp` on average, and `fixed` passes.
void expect_fix_passes_where_o_leans(const char* generator, const char* biased, const char* fixed, double away_ulp) {
  for (std::uint64_t seed : {1, 2, 3}) {
    Family f = default_family(generator);
    f.seed = seed;
    const Outcome b = get_property("unbiased").check(default_registry().get(biased), f, Budget{});
    ASSERT_EQ(b.status, Status::kFail) << biased << " seed " << seed << ": " << b.message;
    EXPECT_EQ(b.stats["tensor"], "O") << biased;
    EXPECT_GT(b.stats["away_mean_ulp"].get<double>(), away_ulp) << biased << ": rounded away from zero";
    const Outcome x = get_property("unbiased").check(default_registry().get(fixed), f, Budget{});
    EXPECT_EQ(x.status, Status::kPass) << fixed << " seed " << seed << ": " << x.message;
  }
}

TEST(Bias, PaperFailsTheTieFamilyAndPaperFixedPassesIt) {
  expect_fix_passes_where_o_leans("tied_max", "paper", "paper-fixed", 0.1);
}

// What unbiased_at_ties found in the FlashAttention-2 model (README): its backward leans on the tied keys' dV
// (+0.12 to +0.17 ulp of their rms at T = 256, z 16-22, seeds 1-3), and the fix, a forward max shift, leaves it: the
// backward's P = e^(s − LSE) does not see the shifted max. Over the whole head's dV the lean reads +0.02 ulp, below
// ε, so `unbiased` passes both. The null controls stay at |mean| <= 0.021 there.
TEST(Bias, TheFixLeavesFa2sLeanOnTheTiedKeysDV) {
  Budget b;
  b.instances = 256;
  const Family f = default_family("tied_max");
  for (const char* name : {"fa2", "fa2-fixed"}) {
    const Kernel& k = default_registry().get(name);
    EXPECT_EQ(get_property("unbiased").check(k, f, b).status, Status::kPass) << name;
    const Outcome o = get_property("unbiased_at_ties").check(k, f, b);
    ASSERT_EQ(o.status, Status::kFail) << name << ": " << o.message;
    EXPECT_EQ(o.stats["tensor"], "dV:tied") << name;
    EXPECT_GT(o.stats["mean_ulp"].get<double>(), 0.1) << name;
  }
}

// Another fix (kernels/cpu/README.md, "Another fix: ..."): fa2-psum divides O by the sum of the bf16 p̄ that P̄V
// multiplies, so O's weights sum to one and fa2's near-tie lean (a near-tied p̄ rounded up to 1 in P̄V, left below 1 in
// the row sum) has nothing to stand on. On near_tie, seeds 1-3, fa2 fails `unbiased` on O (rounded away from zero)
// and fa2-psum passes with no count and no shift.
TEST(Bias, Fa2PsumPassesWhereFa2LeansOnNearTies) {
  expect_fix_passes_where_o_leans("near_tie", "fa2", "fa2-psum", 0.05);
}

TEST(Bias, DefaultSuiteHoldsTheTieFamily) {
  bool found = false;
  for (const auto& e : suite("default")) found |= e.property == "unbiased" && e.family.generator == "tied_max";
  EXPECT_TRUE(found);
  for (const auto& e : suite("bias"))
    EXPECT_TRUE(e.property == "unbiased" || e.property == "unbiased_at_ties") << e.property;
  EXPECT_THROW(suite("nope"), Error);
  EXPECT_THROW(get_property("nope"), Error);
}

// Every suite's family acts as it is written: a count past its shape's limit (family_internal.h) would be reported,
// re-checked and saved as a value the run never made.
TEST(Suites, EveryFamilyActsAsWritten) {
  for (const std::string& name : suite_names())
    for (const auto& e : suite(name))
      for (const ClampedParam& c : clamped_params(e.family))
        ADD_FAILURE() << name << ": " << e.property << " on " << e.family.describe() << ": " << c.key << " acts as "
                      << c.acting;
}

// The instances every suite makes, pinned: instance 0 and 1 of each entry's family, hashed over the bits of Q, K, V, dO,
// the bias and the mask. A generator change that moves them shows here (a suite family no saved case covers drifted unseen for
// a moment: sink_pos 0 read as key 1). If the change is meant, put the printed hash in the table; saved cases of the
// families it moved then replay as "generator drift" (corpus.h) and need saving again.
// A tile a family leaves at 0 is the kernel's own: paper[tile_k=16] under a family with tile_q 8 ran key tiles of 64.
TEST(Tiles, AFamilysUnsetTileIsTheKernels) {
  const Kernel& k = default_registry().get("paper[tile_k=16]");
  Family f = default_family("normal");
  f.tile_q = 8;
  std::unique_ptr<Kernel> holder;
  const Kernel& t = tiled(k, f, holder);
  ASSERT_NE(t.numerics(), nullptr);
  EXPECT_EQ(t.numerics()->tile_q, 8);
  EXPECT_EQ(t.numerics()->tile_k, 16);
  f.tile_q = 0;
  f.tile_k = 8;
  EXPECT_EQ(tiled(k, f, holder).numerics()->tile_q, 64);  // paper's own
  EXPECT_EQ(tiled(k, f, holder).numerics()->tile_k, 8);
}

TEST(Suites, MakeThePinnedInstances) {
  const std::map<std::string, std::string> pinned = {
      {"bias", "084d7072e8c874d9"}, {"default", "b94a1ed75808da76"}, {"gpu", "6dba9f75435c7302"},
      {"long", "6bb857e243a4d419"},  {"quick", "d2c34a5fb84d3693"}};
  for (const std::string& name : suite_names()) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the values' bits
    auto add = [&h](double x) {
      std::uint64_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      for (int i = 0; i < 8; ++i) h = (h ^ ((bits >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    };
    for (const auto& e : suite(name))
      for (std::uint64_t i = 0; i < 2; ++i) {
        const Instance in = make_instance(e.family, i);
        for (const auto* t : {&in.q, &in.k, &in.v, &in.d_o, &in.bias})
          for (double x : *t) add(x);
        for (auto m : in.mask) add(m);
      }
    char got[20];
    std::snprintf(got, sizeof got, "%016llx", static_cast<unsigned long long>(h));
    ASSERT_TRUE(pinned.count(name)) << "suite " << name << " has no pinned hash; it makes " << got;
    EXPECT_EQ(pinned.at(name), got) << "suite " << name << "'s instances moved";
  }
}

// The fix's shift to β·r underflows FA2's fp32 row sum once a repeated maximum is large (kernels/cpu/README.md): the
// default suite has a `finite` check that fa2-fixed fails and fa2 passes (its only one: every other family on
// which fa2-fixed fails `finite` fails fa2 too, by overflow in Q·Kᵀ).
TEST(Finite, DefaultSuiteTellsTheFixsUnderflowOnALargeRepeatedMaxFromFa2) {
  int found = 0;
  for (const SuiteEntry& e : suite("default")) {
    if (e.property != "finite") continue;
    const Outcome base = get_property("finite").check(default_registry().get("fa2"), e.family, Budget{});
    const Outcome fixed = get_property("finite").check(default_registry().get("fa2-fixed"), e.family, Budget{});
    if (base.status != Status::kPass || fixed.status != Status::kFail) continue;
    ++found;
    EXPECT_EQ(e.family.generator, "tied_max") << e.label << ": " << fixed.message;
  }
  EXPECT_EQ(found, 1);
}

// Each property against one defect: the defective kernel fails, the same kernel without the defect passes.
Outcome outcome(const char* property, const Kernel& k, const Family& f) {
  Budget b;
  b.instances = 8;
  return get_property(property).check(k, f, b);
}
Status run(const char* property, const Kernel& k, const Family& f) { return outcome(property, k, f).status; }

TEST(Sharpness, EachPropertyCatchesItsDefect) {
  auto good = make_kernel("good", rounded_reference);
  // Fully masked rows: the mean of V (what a finite −max sentinel gives) instead of 0 / −inf.
  auto sentinel = make_kernel("sentinel", [](const Instance& in) {
    Instance all = in;
    std::fill(all.mask.begin(), all.mask.end(), 1);
    ForwardOutput o = rounded_reference(in), u = rounded_reference(all);
    for (std::size_t r = 0; r < o.lse.size(); ++r)
      if (o.lse[r] == -HUGE_VAL) {
        o.lse[r] = u.lse[r];
        for (int c = 0; c < in.problem.head_dim; ++c) o.o[r * in.problem.head_dim + c] = u.o[r * in.problem.head_dim + c];
      }
    return o;
  });
  EXPECT_EQ(run("masked_row", *good, default_family("masked_rows")), Status::kPass);
  EXPECT_EQ(run("masked_row", *sentinel, default_family("masked_rows")), Status::kFail);
  // Masked keys leak: the keep-mask is ignored.
  auto leaky = make_kernel("leaky", [](const Instance& in) {
    Instance all = in;
    all.problem.has_mask = false;
    all.mask.clear();
    return rounded_reference(all);
  });
  EXPECT_EQ(run("masked_value", *good, default_family("padding")), Status::kPass);
  EXPECT_EQ(run("masked_value", *leaky, default_family("padding")), Status::kFail);
  // A faint leak: a masked key moves an unmasked row's O by one ulp. Bitwise for a deterministic kernel (the one
  // rounding of slack is `stochastic`'s alone), so it fails; it passed while every kernel had that slack.
  auto faint = make_kernel("faint", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    double all_v = 0;
    for (double v : in.v) all_v += v;  // masked keys included
    if (std::fmod(std::fabs(all_v) * 64, 2) >= 1) o.o[0] += ulp(o.o[0], Format::kBF16);
    return o;
  });
  EXPECT_EQ(run("masked_value", *faint, default_family("padding")), Status::kFail);
  // Causal leak: the causal flag is ignored.
  auto acausal = make_kernel("acausal", [](const Instance& in) {
    Instance all = in;
    all.problem.causal = false;
    return rounded_reference(all);
  });
  EXPECT_EQ(run("causal_prefix", *good, default_family("causal")), Status::kPass);
  EXPECT_EQ(run("causal_prefix", *acausal, default_family("causal")), Status::kFail);
  // Position-dependent: key 0's value counted 8 times over.
  auto first_key = make_kernel("first_key", [](const Instance& in) {
    Instance t = in;
    for (int c = 0; c < in.problem.head_dim; ++c) t.v[c] = round_to(8 * t.v[c], Format::kBF16);
    return rounded_reference(t);
  });
  EXPECT_EQ(run("key_permutation", *good, default_family("normal")), Status::kPass);
  EXPECT_EQ(run("key_permutation", *first_key, default_family("normal")), Status::kFail);
  EXPECT_EQ(run("within_v_range", *good, default_family("normal")), Status::kPass);
  // Not shift invariant: O scaled by a function of the row's LSE.
  auto level = make_kernel("level", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (std::size_t x = 0; x < o.o.size(); ++x)
      o.o[x] = round_to(o.o[x] * (1 + 0.25 * std::sin(4 * o.lse[x / in.problem.head_dim])), Format::kBF16);
    return o;
  });
  EXPECT_EQ(run("logit_shift", *good, default_family("normal")), Status::kPass);
  EXPECT_EQ(run("logit_shift", *level, default_family("tied_max")), Status::kFail);
  EXPECT_EQ(run("within_v_range", *level, default_family("tied_max")), Status::kFail);
  // One ulp off everywhere: constant V is no longer reproduced.
  auto off = make_kernel("off", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (double& x : o.o) x += ulp(x, Format::kBF16);
    return o;
  });
  EXPECT_EQ(run("constant_v", *good, default_family("constant_v")), Status::kPass);
  EXPECT_EQ(run("constant_v", *off, default_family("constant_v")), Status::kFail);
  // Not finite.
  auto nan = make_kernel("nan", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    o.o.back() = NAN;
    return o;
  });
  EXPECT_EQ(run("finite", *good, default_family("normal")), Status::kPass);
  EXPECT_EQ(run("finite", *nan, default_family("normal")), Status::kFail);
  EXPECT_EQ(run("accurate", *nan, default_family("normal")), Status::kFail);
  // Nondeterministic: every other call is one ulp off.
  auto flaky = make_kernel("flaky", [calls = std::make_shared<std::atomic<int>>(0)](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    if ((*calls)++ % 2) o.o[0] += ulp(o.o[0], Format::kBF16);
    return o;
  });
  EXPECT_EQ(run("deterministic", *good, default_family("normal")), Status::kPass);
  EXPECT_EQ(run("deterministic", *flaky, default_family("normal")), Status::kFail);
}

// The invariance properties' spec-derived envelope (property_util.h): the built-in fa2 model with a planted defect,
// still declaring fa2's numerics. Key 0's weight times 1.5 or 2 (a position-tied defect: only key_permutation can
// see it; a logit shift or the V range leave it where it is) and O times (1 + 2^-4) (a constant factor: both runs of
// key_permutation and logit_shift carry it, so only within_v_range can see it). Against the generic envelope alone
// (6.7% of M_c per run at n_k = 32) all of these passed (the key defect fails it on normal, tied_max, constant_v,
// sink and sliding_window already; O times 17/16 passed on every family); the correct model passes beside them.
TEST(Sharpness, TheSpecEnvelopeCatchesPlantedDefectsInADeclaredModel) {
  const std::shared_ptr<const Kernel> fa2 = make_model_kernel("fa2", {});
  for (double f : {1.5, 2.0}) {
    ModelDefect heavy("fa2_key0_x" + std::to_string(f), fa2,
                      [f](const Instance& in) { return testing::first_key_weighted(in, f); }, nullptr);
    for (const char* fam : {"tails", "near_duplicate", "negative_rows"}) {
      const Outcome o = outcome("key_permutation", heavy, default_family(fam));
      EXPECT_EQ(o.status, Status::kFail) << f << " " << fam << ": " << o.message;
    }
  }
  ModelDefect scaled("fa2_o_x17_16", fa2, nullptr, [](const Instance&, ForwardOutput& o) { testing::o_scaled(o); });
  for (const char* fam : {"constant_v", "tied_max"}) {
    const Outcome o = outcome("within_v_range", scaled, default_family(fam));
    EXPECT_EQ(o.status, Status::kFail) << fam << ": " << o.message;
  }
  for (const char* prop : {"key_permutation", "logit_shift", "within_v_range"})
    for (const char* fam : {"normal", "tied_max", "constant_v", "negative_rows"}) {
      const Outcome o = outcome(prop, *fa2, default_family(fam));
      EXPECT_TRUE(o.status == Status::kPass || o.status == Status::kSkip) << prop << " " << fam << ": " << o.message;
    }
}

// The same defects on the exact result rounded once (no declared numerics) still pass: the generic envelope does
// not know the kernel and charges every rounding a bf16 u (property_util.h). This pins that limit; a sharper
// generic bound should turn these into failures.
TEST(Sharpness, WithoutDeclaredNumericsTheGenericEnvelopePassesThePlantedDefects) {
  auto heavy = make_kernel("key0_x1.5",
                           [](const Instance& in) { return rounded_reference(testing::first_key_weighted(in, 1.5)); });
  EXPECT_EQ(run("key_permutation", *heavy, default_family("tails")), Status::kPass);
  auto scaled = make_kernel("o_x17_16", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    testing::o_scaled(o);
    return o;
  });
  EXPECT_EQ(run("within_v_range", *scaled, default_family("constant_v")), Status::kPass);
}

// FA2's backward with its own two fp32 sums, from the exact P and the exact O rounded to bf16 (a good kernel's):
// dP_ij = Σ_c dO_ic·v_jc in order, δ_i = Σ_c dO_ic·O_ic in reverse order (a kernel is free to pick either; the
// GPU's tensor cores and its δ pass do differ), each add rounded to fp32; dS = bf16(P·(dP − δ)); dQ = scale·dS·K and
// dK = scale·dSᵀ·Q summed in fp32 and rounded to bf16; dV and δ as oracle's. δ enters dS times (1 + delta_rel): 0 for
// the good kernel, 2^-9 for the defect of a δ from a bf16 O (half a bf16 ulp, relative).
BackwardOutput fa2_order_backward(const Instance& in, double delta_rel) {
  const Problem& p = in.problem;
  BackwardOutput g = rounded_reference_backward(in);
  const ReferenceForward rf = reference_forward(in);
  std::vector<double> dq(p.q_size(), 0.0), dk(p.kv_size(), 0.0);
  auto f32 = [](double x) { return round_to(x, Format::kF32); };
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      const std::vector<double> s = reference_scores(in, b, h);
      for (int i = 0; i < p.n_q; ++i) {
        const double lse = rf.lse[p.row_at(b, h, i)];
        if (!std::isfinite(lse)) continue;
        double delta = 0;
        for (int c = p.head_dim - 1; c >= 0; --c)
          delta = f32(delta + in.d_o[p.q_at(b, h, i, c)] * round_to(rf.o[p.q_at(b, h, i, c)], Format::kBF16));
        delta = f32(delta * (1 + delta_rel));
        for (int j = 0; j < p.n_k; ++j) {
          const double prob = f32(std::exp(s[std::size_t(i) * p.n_k + j] - lse));
          if (prob == 0) continue;
          double dp = 0;
          for (int c = 0; c < p.head_dim; ++c) dp = f32(dp + in.d_o[p.q_at(b, h, i, c)] * in.v[p.kv_at(b, hk, j, c)]);
          const double ds = round_to(f32(prob * f32(dp - delta)), Format::kBF16);
          for (int c = 0; c < p.head_dim; ++c) {
            double& q = dq[p.q_at(b, h, i, c)];
            double& k = dk[p.kv_at(b, hk, j, c)];
            q = f32(q + ds * in.k[p.kv_at(b, hk, j, c)]);
            k = f32(k + ds * in.q[p.q_at(b, h, i, c)]);
          }
        }
      }
    }
  for (std::size_t x = 0; x < dq.size(); ++x) g.dq[x] = round_to(f32(p.scale * dq[x]), Format::kBF16);
  for (std::size_t x = 0; x < dk.size(); ++x) g.dk[x] = round_to(f32(p.scale * dk[x]), Format::kBF16);
  return g;
}

// `accurate` allows dQ and dK the noise of dS = P·(dP − δ) where FA2's two fp32 sums cancel and the plain
// attention's do not (props_basic.cpp's gradient_noise): one visible key makes O = v, dP = δ exactly, the exact dQ
// and dK 0, and the plain attention's too (its rule's bound is then 0). Seen on the GPU (cuda:fa2-fixed: dQ 7.5e-23
// where exact 0, |δ| 5.5e-12, one key, wide exponents); here the same shape, with the δ sum in the other order. Before
// the allowance this kernel failed `accurate` on such rows; a δ off by half a bf16 ulp (FA2's δ from a bf16 O, far
// beyond d fp32 ulps) still fails.
TEST(Sharpness, AccurateAllowsTheCancellationNoiseOfFa2sTwoSumsAndNoMore) {
  Family f = default_family("normal");
  f.problem.n_q = 8, f.problem.n_k = 1, f.problem.head_dim = 10;
  f.params["erange"] = 111;  // exponents over 2^-111..2^0: the products' sums round at every add
  Budget b;
  b.instances = 64;
  auto good = make_kernel("fa2_order", rounded_reference, [](const Instance& in) { return fa2_order_backward(in, 0); });
  auto bad = make_kernel("delta_bf16", rounded_reference,
                         [](const Instance& in) { return fa2_order_backward(in, 0x1p-9); });
  // The case is not vacuous: some dQ or dK of the good kernel is not 0 where the exact one is.
  int noisy = 0;
  for (int x = 0; x < b.instances; ++x) {
    const Instance in = make_instance(f, x);
    const BackwardOutput g = good->backward(in, good->forward(in));
    for (double v : g.dq) noisy += v != 0;
    for (double v : g.dk) noisy += v != 0;
  }
  EXPECT_GT(noisy, 0) << "no instance gave the δ/dP cancellation any noise: the test shows nothing";
  const Outcome o = get_property("accurate").check(*good, f, b);
  EXPECT_EQ(o.status, Status::kPass) << o.message;
  const Outcome d = get_property("accurate").check(*bad, f, b);
  EXPECT_EQ(d.status, Status::kFail) << d.message;
  EXPECT_NE(d.message.find("kernel-only noise"), std::string::npos) << d.message;
  EXPECT_GT(d.stats.value("dQ_noise", 0.0) + d.stats.value("dK_noise", 0.0), 0) << d.stats.dump();
}

// Branches no other test reached (a mutation probe removed each and every test still passed): `deterministic`'s
// backward comparisons, the 2x factor of `accurate`, and `key_permutation` on a family with a bias.
TEST(Sharpness, BackwardDeterminismTheAccuracyFactorAndABiasedPermutation) {
  // deterministic: a right forward, and a backward that moves element 0 of one output by one ulp every other call.
  for (const std::string out : {"dQ", "dK", "dV", "delta"}) {
    auto flaky = make_kernel("flaky_" + out, rounded_reference,
                             [out, calls = std::make_shared<std::atomic<int>>(0)](const Instance& in) {
                               BackwardOutput g = rounded_reference_backward(in);
                               std::vector<double>& t = out == "dQ" ? g.dq : out == "dK" ? g.dk : out == "dV" ? g.dv : g.delta;
                               if ((*calls)++ % 2) t[0] += ulp(t[0], out == "delta" ? Format::kF32 : Format::kBF16);
                               return g;
                             });
    const Outcome o = outcome("deterministic", *flaky, default_family("normal"));
    EXPECT_EQ(o.status, Status::kFail) << out << ": " << o.message;
    EXPECT_NE(o.message.find(out), std::string::npos) << o.message;
  }
  EXPECT_EQ(run("deterministic", *make_kernel("good_bwd", rounded_reference, rounded_reference_backward),
                default_family("normal")),
            Status::kPass);
  // accurate: LSE off by f times the plain attention's own error (fp32, so the plain error is well above the
  // one-ulp floor on some element): f = 1.5 is inside the 2x rule, f = 2.5 outside it (a 3x factor passed it).
  const Kernel& plain = default_registry().get("plain");
  auto scaled = [&plain](double f) {
    return make_kernel("lse_x" + std::to_string(f), [&plain, f](const Instance& in) {
      ForwardOutput o = rounded_reference(in);
      const ForwardOutput pl = plain.forward(in);
      const ReferenceForward ex = reference_forward(in);
      for (std::size_t r = 0; r < o.lse.size(); ++r) o.lse[r] = round_to(ex.lse[r] + f * (pl.lse[r] - ex.lse[r]), Format::kF32);
      return o;
    });
  };
  EXPECT_EQ(run("accurate", *scaled(1.5), default_family("normal")), Status::kPass);
  const Outcome far = outcome("accurate", *scaled(2.5), default_family("normal"));
  EXPECT_EQ(far.status, Status::kFail) << far.message;
  EXPECT_NE(far.message.find("LSE"), std::string::npos) << far.message;
  // key_permutation with a bias: the permuted copy must carry the bias's columns with its keys (the good kernel
  // then passes), and a kernel that reads the bias with the keys reversed fails.
  Family biased = default_family("normal");
  biased.problem.has_bias = true;
  EXPECT_EQ(run("key_permutation", *make_kernel("good", rounded_reference), biased), Status::kPass);
  auto reversed = make_kernel("bias_reversed", [](const Instance& in) {
    Instance t = in;
    const Problem& p = in.problem;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.n_q; ++i)
          for (int j = 0; j < p.n_k; ++j) t.bias[p.score_at(b, h, i, j)] = in.bias[p.score_at(b, h, i, p.n_k - 1 - j)];
    return rounded_reference(t);
  });
  EXPECT_EQ(run("key_permutation", *reversed, biased), Status::kFail);
}

// The backward halves of masked_value and causal_prefix: a kernel whose forward is right and whose backward leaks
// in one output fails, and the message names that output; the same kernel with the right backward passes. Each
// leak is the exact backward of a wrong instance (keep-mask ignored, causal flag ignored, dO read one row late)
// rounded once, swapped into that one output only.
TEST(Sharpness, BitwiseInvariancesCatchBackwardLeaks) {
  using Leak = std::function<Instance(Instance)>;
  auto leaky = [](const std::string& out, Leak wrong) {
    return make_kernel("leaks_" + out, rounded_reference, [out, wrong](const Instance& in) {
      BackwardOutput g = rounded_reference_backward(in);
      const BackwardOutput w = rounded_reference_backward(wrong(in));
      if (out == "dQ") g.dq = w.dq;
      if (out == "delta") g.delta = w.delta;
      if (out == "dK") g.dk = w.dk;
      if (out == "dV") g.dv = w.dv;
      return g;
    });
  };
  auto fails_in = [](const char* property, const Kernel& k, const Family& f, const std::string& out) {
    const Outcome o = outcome(property, k, f);
    EXPECT_EQ(o.status, Status::kFail) << property << " " << k.name() << ": " << o.message;
    EXPECT_NE(o.message.find(": " + out + "("), std::string::npos) << property << " " << k.name() << ": " << o.message;
  };
  const Leak unmasked = [](Instance in) {
    in.problem.has_mask = false;
    in.mask.clear();
    return in;
  };
  const Leak acausal = [](Instance in) {
    in.problem.causal = false;
    return in;
  };
  const Leak d_o_late = [](Instance in) {  // row i reads dO of row i + 1 (the last row its own)
    const Problem& p = in.problem;
    for (std::size_t r = 0; r < p.rows(); ++r)
      if ((r + 1) % p.n_q != 0)
        std::copy_n(&in.d_o[(r + 1) * p.head_dim], p.head_dim, &in.d_o[r * p.head_dim]);
    return in;
  };
  Family causal_padded = default_family("causal");  // the last 4 keys masked for every row
  causal_padded.params["mask"] = 1;
  causal_padded.params["pad"] = 4;
  causal_padded.problem.has_mask = true;

  auto good = make_kernel("good_bwd", rounded_reference, rounded_reference_backward);
  for (const char* g : {"padding", "first_tile_masked", "random_mask", "causal"})
    EXPECT_EQ(run("masked_value", *good, default_family(g)), Status::kPass) << g;
  for (const char* g : {"causal", "causal_cross", "causal_short_keys"})
    EXPECT_EQ(run("causal_prefix", *good, default_family(g)), Status::kPass) << g;
  // Where dK, dV are compared at all: every key with padding; with causal, only the keys no later row sees.
  EXPECT_EQ(outcome("masked_value", *good, default_family("padding")).stats["bwd_keys_compared"], 64);
  const Outcome padded = outcome("causal_prefix", *good, causal_padded);
  EXPECT_EQ(padded.status, Status::kPass) << padded.message;
  EXPECT_EQ(padded.stats["bwd_keys_compared"], 8) << "the 4 padded keys of 2 kv heads";

  // masked_value: the padded keys enter dQ (dS·K), δ (through O), dK and dV (through the unmasked softmax).
  for (const char* out : {"dQ", "delta", "dK", "dV"})
    fails_in("masked_value", *leaky(out, unmasked), default_family("padding"), out);
  // causal_prefix: a prefix row's dQ sees keys past its diagonal; its dQ or δ reads the next row's dO (caught
  // because the later rows' dO is replaced too); dK, dV of the padded keys take the later rows' terms.
  fails_in("causal_prefix", *leaky("dQ", acausal), default_family("causal"), "dQ");
  for (const char* out : {"dQ", "delta"})
    fails_in("causal_prefix", *leaky(out, d_o_late), default_family("causal"), out);
  for (const char* out : {"dK", "dV"}) fails_in("causal_prefix", *leaky(out, unmasked), causal_padded, out);
}

// gpu_matches_cpu_model, with CPU stand-ins: the "GPU kernel" and its twin are the fa2 CPU model, then the GPU side
// gets one defect at a time. Equal bits pass; a one-ulp flip of every output (what an exp/log difference can do at
// most per rounding) passes within the derived bound; ignoring the causal mask, a NaN, or an LSE moved by 1 fail.
TEST(GpuMatchesCpuModel, BitsFlipsAndDefects) {
  const Kernel& fa2 = default_registry().get("fa2");
  const NumericsSpec spec = builtin_spec("fa2");
  auto gpu = [&](const std::string& name, FnKernel::Fn fn) {
    auto k = std::make_unique<FnKernel>(name, std::move(fn));
    k->set_twin([&fa2](const Instance& in) { return fa2.forward(in); }, spec);
    return k;
  };
  const Outcome cpu = outcome("gpu_matches_cpu_model", default_registry().get("oracle"), default_family("normal"));
  EXPECT_EQ(cpu.status, Status::kSkip) << cpu.message;
  const auto same = gpu("same", [&fa2](const Instance& in) { return fa2.forward(in); });
  for (const char* g : {"normal", "causal", "tied_max", "large_logits", "masked_rows", "gqa"}) {
    const Outcome o = outcome("gpu_matches_cpu_model", *same, default_family(g));
    EXPECT_EQ(o.status, Status::kPass) << g << ": " << o.message;
    EXPECT_EQ(o.stats["differ_pct"], 0.0) << g;
  }
  const auto flipped = gpu("flipped", [&fa2](const Instance& in) {
    ForwardOutput out = fa2.forward(in);
    for (double& x : out.o)  // the next bf16 value away from zero
      if (std::isfinite(x) && x != 0) x += std::copysign(ulp(x, Format::kBF16), x);
    for (double& x : out.lse)
      if (std::isfinite(x)) x = std::nextafter(float(x), HUGE_VALF);
    return out;
  });
  const Outcome f = outcome("gpu_matches_cpu_model", *flipped, default_family("normal"));
  EXPECT_EQ(f.status, Status::kPass) << f.message;
  EXPECT_GT(f.stats["differ_pct"].get<double>(), 50.0);
  const auto acausal = gpu("acausal", [&fa2](Instance in) {
    in.problem.causal = false;
    return fa2.forward(in);
  });
  const Outcome a = outcome("gpu_matches_cpu_model", *acausal, default_family("causal"));
  EXPECT_EQ(a.status, Status::kFail);
  EXPECT_NE(a.message.find("bound"), std::string::npos) << a.message;
  std::string last;  // the label of the element the defect changes, "(b,h,i,c)" of the last O
  const auto nan = gpu("nan", [&fa2, &last](const Instance& in) {
    ForwardOutput out = fa2.forward(in);
    out.o.back() = NAN;
    const Problem& p = in.problem;
    last = "(b" + std::to_string(p.batch - 1) + ",h" + std::to_string(p.heads_q - 1) + ",i" +
           std::to_string(p.n_q - 1) + ",c" + std::to_string(p.head_dim - 1) + ")";
    return out;
  });
  const Outcome n = outcome("gpu_matches_cpu_model", *nan, default_family("normal"));
  EXPECT_EQ(n.status, Status::kFail);
  EXPECT_NE(n.message.find("non-finite"), std::string::npos) << n.message;
  EXPECT_NE(n.message.find(": O" + last + " = "), std::string::npos) << n.message << " (want O" << last << ")";
  const auto lse = gpu("lse", [&fa2](const Instance& in) {
    ForwardOutput out = fa2.forward(in);
    out.lse[0] += 1;
    return out;
  });
  const Outcome l = outcome("gpu_matches_cpu_model", *lse, default_family("normal"));
  EXPECT_EQ(l.status, Status::kFail);
  EXPECT_NE(l.message.find(": LSE(b0,h0,i0) = "), std::string::npos) << l.message;
}

// A stand-in "GPU kernel" for the backward half: the CPU model `spec_name` (forward, and backward from its own O and
// LSE) with `defect` applied to the backward's outputs, twinned by the same model's forward. Without
// `twin_backward` the twin has no backward, so the property compares with model_backward of the spec; with it the
// twin's backward is the model's, whose sums the property then takes for the "GPU's" (as for the CUDA kernels'
// twin). Equal bits either way unless the defect changed some.
using BackwardDefect = std::function<void(const Instance&, BackwardOutput&)>;
std::unique_ptr<FnKernel> model_as_gpu(const std::string& spec_name, const std::string& name, BackwardDefect defect,
                                       bool twin_backward = false) {
  const Kernel& model = default_registry().get(spec_name);
  auto model_backward = [&model](const Instance& in) { return model.backward(in, model.forward(in)); };
  auto k = std::make_unique<FnKernel>(
      name, [&model](const Instance& in) { return model.forward(in); },
      [model_backward, defect](const Instance& in) {
        BackwardOutput out = model_backward(in);
        if (defect) defect(in, out);
        return out;
      });
  k->set_twin([&model](const Instance& in) { return model.forward(in); }, builtin_spec(spec_name),
              twin_backward ? FnKernel::BackwardFn(model_backward) : nullptr);
  return k;
}

// The backward half of gpu_matches_cpu_model, with CPU stand-ins: the "GPU kernel" is a CPU model (forward, and
// backward from its own O and LSE), its twin the same model, so the gradients match bit for bit; then the GPU side
// gets one defect at a time. A one-ulp flip of every gradient passes within the bound; δ off by one fp32 ulp, dV
// 12.5% too large, a dK that ignores the causal mask, or a NaN fail.
TEST(GpuMatchesCpuModel, BackwardBitsFlipsAndDefects) {
  for (const char* spec : {"fa2", "paper-fixed"}) {
    const auto same = model_as_gpu(spec, "same", nullptr);
    for (const char* g : {"normal", "causal", "tied_max", "large_logits", "masked_rows", "gqa"}) {
      const Outcome o = outcome("gpu_matches_cpu_model", *same, default_family(g));
      EXPECT_EQ(o.status, Status::kPass) << spec << " " << g << ": " << o.message;
      EXPECT_EQ(o.stats["grad_differ_pct"], 0.0) << spec << " " << g;
      EXPECT_GT(o.stats["grad_outputs"].get<double>(), 0.0) << spec << " " << g;
    }
  }
  const auto flipped = model_as_gpu("fa2", "flipped", [](const Instance&, BackwardOutput& out) {
    for (auto* t : {&out.dq, &out.dk, &out.dv})
      for (double& x : *t)  // the next bf16 value away from zero
        if (std::isfinite(x) && x != 0) x += std::copysign(ulp(x, Format::kBF16), x);
  });
  const Outcome f = outcome("gpu_matches_cpu_model", *flipped, default_family("normal"));
  EXPECT_EQ(f.status, Status::kPass) << f.message;
  EXPECT_GT(f.stats["grad_differ_pct"].get<double>(), 50.0);
  const auto delta = model_as_gpu("fa2", "delta", [](const Instance&, BackwardOutput& out) {
    out.delta[0] = std::nextafter(float(out.delta[0]), HUGE_VALF);
  });
  const Outcome dl = outcome("gpu_matches_cpu_model", *delta, default_family("normal"));
  EXPECT_EQ(dl.status, Status::kFail);
  EXPECT_NE(dl.message.find(": delta(b0,h0,i0) = "), std::string::npos) << dl.message;
  EXPECT_NE(dl.message.find("must be bitwise"), std::string::npos) << dl.message;
  const auto big = model_as_gpu("fa2", "big", [](const Instance&, BackwardOutput& out) {
    for (double& x : out.dv) x *= 1.125;
  });
  const Outcome bg = outcome("gpu_matches_cpu_model", *big, default_family("normal"));
  EXPECT_EQ(bg.status, Status::kFail);
  EXPECT_NE(bg.message.find(": dV("), std::string::npos) << bg.message;
  EXPECT_NE(bg.message.find("bound"), std::string::npos) << bg.message;
  const Kernel& fa2 = default_registry().get("fa2");
  const auto acausal = model_as_gpu("fa2", "acausal", [&fa2](const Instance& in, BackwardOutput& out) {
    Instance all = in;
    all.problem.causal = false;
    out.dk = fa2.backward(all, fa2.forward(in)).dk;
  });
  const Outcome a = outcome("gpu_matches_cpu_model", *acausal, default_family("causal"));
  EXPECT_EQ(a.status, Status::kFail);
  EXPECT_NE(a.message.find(": dK("), std::string::npos) << a.message;
  const auto nan = model_as_gpu("fa2", "nan", [](const Instance&, BackwardOutput& out) { out.dq.back() = NAN; });
  const Outcome n = outcome("gpu_matches_cpu_model", *nan, default_family("normal"));
  EXPECT_EQ(n.status, Status::kFail);
  EXPECT_NE(n.message.find("non-finite"), std::string::npos) << n.message;
}

// With a twin that has a backward (as the CUDA kernels' twin has), the twin's sums are taken for the GPU's: the
// scores, the exponent's argument and dP are then the same bits on both sides and only exp and what follows it may
// differ, so the bound is several times tighter for the paper's bf16 numerics (before: dQ 25% too large passed on
// `normal`, 100% on `tied_max`). Equal bits and one-ulp flips still pass; 12.5% too large fails in every gradient.
// And where dP ≈ δ (tied rows) t2's magnitude now comes from |dO·v − δ|, not |dO·v| + |δ|: fa2's dQ 4% too large
// fails on `tied_max` without the twin's sums (it passed up to 50%).
TEST(GpuMatchesCpuModel, BackwardWithTheTwinsSumsIsTighter) {
  using Grad = std::vector<double> BackwardOutput::*;
  auto scaled = [](Grad t, double by) {
    return [t, by](const Instance&, BackwardOutput& out) {
      for (double& x : out.*t) x *= by;
    };
  };
  for (const char* g : {"normal", "causal", "tied_max", "large_logits", "masked_rows", "gqa"}) {
    const Outcome o = outcome("gpu_matches_cpu_model", *model_as_gpu("paper-fixed", "same", nullptr, true),
                              default_family(g));
    EXPECT_EQ(o.status, Status::kPass) << g << ": " << o.message;
    EXPECT_EQ(o.stats["grad_differ_pct"], 0.0) << g;
  }
  const auto flipped = model_as_gpu("paper-fixed", "flipped", [](const Instance&, BackwardOutput& out) {
    for (auto* t : {&out.dq, &out.dk, &out.dv})
      for (double& x : *t)  // the next bf16 value away from zero
        if (std::isfinite(x) && x != 0) x += std::copysign(ulp(x, Format::kBF16), x);
  }, true);
  const Outcome f = outcome("gpu_matches_cpu_model", *flipped, default_family("tied_max"));
  EXPECT_EQ(f.status, Status::kPass) << f.message;
  EXPECT_GT(f.stats["grad_differ_pct"].get<double>(), 50.0);
  for (const char* g : {"normal", "tied_max"})
    for (auto [t, name] : {std::pair{Grad(&BackwardOutput::dq), "dQ"}, std::pair{Grad(&BackwardOutput::dk), "dK"},
                           std::pair{Grad(&BackwardOutput::dv), "dV"}}) {
      const Outcome o =
          outcome("gpu_matches_cpu_model", *model_as_gpu("paper-fixed", "big", scaled(t, 1.125), true), default_family(g));
      EXPECT_EQ(o.status, Status::kFail) << g << " " << name;
      EXPECT_NE(o.message.find(std::string(": ") + name + "("), std::string::npos) << o.message;
    }
  const Outcome t = outcome("gpu_matches_cpu_model", *model_as_gpu("fa2", "big", scaled(&BackwardOutput::dq, 1.04)),
                            default_family("tied_max"));
  EXPECT_EQ(t.status, Status::kFail);
  EXPECT_NE(t.message.find(": dQ("), std::string::npos) << t.message;

  // The switch itself: every pair takes the twin's sums, whatever the inputs' range (the tensor cores' rule is
  // measured over the whole range since session 31: TENSOR_CORES.md rule 7); without a twin backward no pair does.
  // Until then an input outside [2^-21, 2^21] sent its pairs back to the full bound: with column 0 of every q and dO
  // row at 2^-25, 2^-60 or 2^-130 (a bf16 subnormal) no pair took the sums, and paper-fixed's dQ and dK 12.5% too
  // large passed (dV failed); now all three fail, as on `normal` itself. In q alone (the score's sums) and in dO
  // alone (dP's) as well: the count comes from the bound's own Δx and Δt2, so a gate on either side would show.
  for (const double tiny : {0x1p-25, 0x1p-60, 0x1p-130})
    for (const int where : {0, 1, 2}) {  // q and dO, q alone, dO alone
      SCOPED_TRACE("tiny " + std::to_string(tiny) + " in " + (where == 0 ? "q and dO" : where == 1 ? "q" : "dO"));
      Instance in = make_instance(default_family("normal"), 0);
      for (std::size_t x = 0; x < in.q.size(); x += std::size_t(in.problem.head_dim)) {
        if (where != 2) in.q[x] = tiny;
        if (where != 1) in.d_o[x] = tiny;
      }
      const double all = double(in.problem.batch) * in.problem.heads_q * in.problem.n_q * in.problem.n_k;
      nlohmann::json st;
      EXPECT_EQ(gpu_matches_one(*model_as_gpu("paper-fixed", "same", nullptr, true), in, st), "") << tiny;
      EXPECT_EQ(st["grad_pairs"], all) << st.dump();
      EXPECT_EQ(st["grad_pairs_same_sums"], all) << tiny << ": " << st.dump();
      EXPECT_EQ(st["grad_differ_pct"], 0.0) << tiny;
      st = nlohmann::json{};
      EXPECT_EQ(gpu_matches_one(*model_as_gpu("paper-fixed", "same", nullptr, false), in, st), "") << tiny;
      EXPECT_EQ(st["grad_pairs_same_sums"], 0.0) << st.dump();
      for (auto [t, name] : {std::pair{Grad(&BackwardOutput::dq), "dQ"}, std::pair{Grad(&BackwardOutput::dk), "dK"},
                             std::pair{Grad(&BackwardOutput::dv), "dV"}}) {
        st = nlohmann::json{};
        const std::string why = gpu_matches_one(*model_as_gpu("paper-fixed", "big", scaled(t, 1.125), true), in, st);
        EXPECT_EQ(why.rfind(std::string(name) + "(", 0), 0u) << tiny << " " << name << ": " << why;  // it fails there
      }
    }
}

// The backward bound on instances no generator draws (review of the backward half, 2026-11-30). A −inf bias gives
// p = 0 exactly on both sides, so the bound stays finite there and a 12.5% error elsewhere still fails (it was
// NaN, hence vacuous, for every gradient touching the pair). At the top of the range a correct kernel may give a
// finite value where the model's sum overflowed (the H200 did: dQ −1.931e34 against −inf): the bound is vacuous
// there, counted in grad_outside_model, and no failure.
TEST(GpuMatchesCpuModel, BackwardAtMinusInfBiasAndTopOfRange) {
  const Kernel& fa2 = default_registry().get("fa2");
  auto gpu = [](BackwardDefect defect) { return model_as_gpu("fa2", "gpu", std::move(defect)); };
  Family f = default_family("normal");
  f.problem.has_bias = true;
  Instance in = make_instance(f, 0);
  for (double& b : in.bias) b = 0;
  in.bias[1] = -HUGE_VAL;  // row 0 of head 0 cannot see key 1
  nlohmann::json st;
  EXPECT_EQ(gpu_matches_one(*gpu(nullptr), in, st), "");
  EXPECT_EQ(st["grad_outside_model"], 0.0) << st.dump();
  const std::string why = gpu_matches_one(*gpu([](const Instance&, BackwardOutput& out) {
    for (auto* t : {&out.dq, &out.dk, &out.dv})
      for (double& x : *t) x *= 1.125;
  }), in, st);
  EXPECT_NE(why.find("bound"), std::string::npos) << why;

  Instance top;  // dO near bf16's largest value: the model's dQ overflows
  top.problem = Problem::of_shape(1, 1, 1, 2, 2, 4);
  top.problem.scale = 0.5;
  const double M = format_info(Format::kBF16).max_finite;
  top.q = {8, 0, 0, 0, 0, 0, 0, 0};
  top.k = {-10, 0, 0, 0, 0, 0, 0, 0};
  top.v = {1, 1, 1, 0, 0, 0, 0, 0};
  top.d_o = {M, M, -M, 0, 0, 0, 0, 0};
  const BackwardOutput model = fa2.backward(top, fa2.forward(top));
  ASSERT_TRUE(std::any_of(model.dq.begin(), model.dq.end(), [](double x) { return !std::isfinite(x); }));
  const auto finite = gpu([](const Instance&, BackwardOutput& out) {
    for (double& x : out.dq)
      if (!std::isfinite(x)) x = std::copysign(1.931e34, x);
  });
  st = nlohmann::json{};
  EXPECT_EQ(gpu_matches_one(*finite, top, st), "");
  EXPECT_GT(st["grad_outside_model"].get<double>(), 0.0) << st.dump();
}

// Regression (audit, 2026-12-05): logit_shift adds scale·t (|t| <= 4) to each row's LSE. With a scale near 2^126 the
// shifted exact LSE passes fp32's range while the base one does not: the correctly rounded LSE is +inf on one side
// and finite on the other, and the null controls failed (oracle: "LSE[2]: inf vs 4.95306178e+38"). Such rows are
// not compared (stats lse_overflow); their O still is, and a kernel off in the rows still in range fails.
TEST(Honesty, LogitShiftPassesTheNullControlsWhereTheShiftOverflowsFp32) {
  Family f = default_family("normal");
  f.problem.scale = std::ldexp(1.0, 126);
  Budget b;
  b.instances = 3;
  for (const char* kernel : {"oracle", "stochastic"}) {
    const Outcome o = get_property("logit_shift").check(default_registry().get(kernel), f, b);
    EXPECT_EQ(o.status, Status::kPass) << kernel << ": " << o.message;
    EXPECT_GT(o.stats.value("lse_overflow", 0), 0) << kernel << ": " << o.stats.dump();  // the case is reached
  }
  auto off = make_kernel("lse_off", [](const Instance& in) {  // LSE 10% high in the shifted copy (q's last column set)
    ForwardOutput o = rounded_reference(in);
    if (in.q[in.problem.head_dim - 1] != 0)
      for (double& l : o.lse) l += 0.1 * (1 + std::fabs(l));
    return o;
  });
  const Outcome o = get_property("logit_shift").check(*off, f, b);  // the rows that stay in range are compared
  EXPECT_EQ(o.status, Status::kFail) << o.message << " " << o.stats.dump();
}

constexpr double kFp32Edge = 0x1.ffffffp127;  // 2^128 − 2^103: the least value that rounds to +inf in fp32

// The largest fp32 scale that puts row r's exact LSE L in [edge·(1 − 2^-22)(1 − 2^-23), edge·(1 − 2^-22)], a few
// ulps below fp32's edge (the least value that rounds to +inf): there L rounds to a finite fp32 LSE and L·(1 + 2^-21)
// to +inf. L = scale·m_r + log(a count), m_r the row's maximum score; the log is far below an ulp at 2^127, and m_r is
// read from an exact LSE at scale 2^100. 0 where m_r <= 0.
double scale_below_fp32_edge(Instance in, std::size_t r) {
  in.problem.scale = std::ldexp(1.0, 100);
  const double m = reference_forward(in).lse[r] / in.problem.scale;
  if (!(m > 0)) return 0;
  const double target = kFp32Edge * (1 - 0x1.0p-22);
  double s = round_to(target / m, Format::kF32);
  if (s * m > target) s = std::nextafter(static_cast<float>(s), 0.0f);
  in.problem.scale = s;
  const double L = reference_forward(in).lse[r];
  EXPECT_TRUE(std::isfinite(round_to(L, Format::kF32)) && std::isinf(round_to(L * (1 + 0x1.0p-21), Format::kF32)))
      << "row " << r << ": L = " << L;
  return s;
}

// LSE high by `rel` (relative) where `up` says so (on the input's order). rel = 2^-21 is inside any envelope, whose σ
// alone is ~d·2^-24·L at these scales, and gives +inf for an exact LSE below fp32's edge by less than that; 1% is
// outside it.
std::unique_ptr<Kernel> lse_up_kernel(double rel, std::function<bool(const Instance&)> up) {
  return make_kernel("lse_up", [rel, up](const Instance& in) {
    const ReferenceForward r = reference_forward(in);
    ForwardOutput o = rounded_reference(in);
    if (up(in))
      for (std::size_t x = 0; x < o.lse.size(); ++x) o.lse[x] = round_to(r.lse[x] * (1 + rel), Format::kF32);
    return o;
  });
}

// Regression (session-26 review, fixed 2026-12-05): a row whose exact LSE lies a few ulps below fp32's edge rounds
// to a finite LSE, but a kernel within its envelope may return +inf there; the shifted copy's LSE (t < 0: scale·t
// lower) is finite and correct, and logit_shift failed it ("LSE[0]: inf vs 3.40282397e+38"). Half of the rows draw
// t < 0, where only this change passes; the rows with t > 0 overflow on both sides. A kernel off by far more still
// fails.
TEST(Honesty, LogitShiftAllowsAnInfiniteLseWithinItsEnvelopeOfFp32sEdge) {
  Family f = default_family("normal");
  Budget b;
  b.instances = 1;
  const auto always = [](const Instance&) { return true; };
  const auto up = lse_up_kernel(0x1.0p-21, always);
  Instance base = make_instance(f, 0);  // as logit_shift's base copy: K's last column 1, Q's 0
  const Problem& p = base.problem;
  for (std::size_t r = 0; r < std::size_t(p.batch) * p.heads_kv * p.n_k; ++r) base.k[(r + 1) * p.head_dim - 1] = 1.0;
  for (std::size_t r = 0; r < p.rows(); ++r) base.q[(r + 1) * p.head_dim - 1] = 0.0;
  int reached = 0;
  for (std::size_t r = 0; r < std::min<std::size_t>(p.rows(), 16); ++r) {
    if ((f.problem.scale = scale_below_fp32_edge(base, r)) == 0) continue;
    const Outcome o = get_property("logit_shift").check(*up, f, b);
    EXPECT_EQ(o.status, Status::kPass) << "row " << r << ": " << o.message << " " << o.stats.dump();
    reached += o.stats.value("lse_overflow", 0) > 0;  // t > 0 rows are +inf on both sides: compared, equal
  }
  EXPECT_GE(reached, 4);  // rows where the base copy's +inf met a finite shifted LSE
  const Outcome o = get_property("logit_shift").check(*lse_up_kernel(0.01, always), f, b);
  EXPECT_EQ(o.status, Status::kFail) << o.message << " " << o.stats.dump();
  // The allowance is per side (review): in the row at the edge, +inf on the shifted copy, whose exact LSE is far
  // below the edge when t < 0, fails; so does the base copy's +inf against a finite LSE outside the shifted side's
  // envelope. Every other row is the correctly rounded LSE.
  const auto inf_when = [](bool shifted, double finite_factor, std::size_t row) {
    return make_kernel("lse_inf", [shifted, finite_factor, row](const Instance& in) {
      ForwardOutput o = rounded_reference(in);
      const bool is_shifted = in.q[in.problem.head_dim - 1] != 0;
      o.lse[row] = is_shifted == shifted ? HUGE_VAL : round_to(o.lse[row] * finite_factor, Format::kF32);
      return o;
    });
  };
  int tried = 0, caught_shifted = 0, caught_base = 0;
  for (std::size_t r = 0; r < 8; ++r) {
    if ((f.problem.scale = scale_below_fp32_edge(base, r)) == 0) continue;
    ++tried;
    EXPECT_EQ(get_property("logit_shift").check(default_registry().get("oracle"), f, b).status, Status::kPass) << r;
    caught_shifted += get_property("logit_shift").check(*inf_when(true, 1.0, r), f, b).status == Status::kFail;
    caught_base += get_property("logit_shift").check(*inf_when(false, 0.5, r), f, b).status == Status::kFail;
  }
  // Both are caught in the rows with t < 0 (t's sign is drawn: 5 of 8 when written; the per-row allowance of the first
  // form of this change caught 0). With t > 0 the shifted LSE overflows exactly: +inf is its correct rounding, and
  // the "finite" shifted LSE halved stays +inf.
  EXPECT_GE(caught_shifted, 2) << "of " << tried;
  EXPECT_EQ(caught_base, caught_shifted) << "of " << tried;
}

// The generic envelope takes every rounding at bf16 at best, the returned LSE's too: a kernel correct but for an LSE
// rounded to bf16 (the paper's) failed logit_shift where |LSE| >= 16, on that rounding alone (−28 for −27.875 on
// negative_rows[level=20]; the envelope charged 2^-22·|LSE|). An LSE off by four such ulps on one copy still fails.
TEST(Honesty, LogitShiftAllowsAnLseRoundedToBf16) {
  Family f = default_family("negative_rows");
  f.params["level"] = 20;
  Budget b;
  b.instances = 16;
  const auto bf16_lse = [](double shifted_off) {
    return make_kernel("bf16_lse", [shifted_off](const Instance& in) {
      ForwardOutput o = rounded_reference(in);
      const bool shifted = in.q[in.problem.head_dim - 1] != 0;  // logit_shift's copy t (its base has Q's last 0)
      for (double& l : o.lse) l = round_to(l, Format::kBF16) + (shifted ? shifted_off * ulp(l, Format::kBF16) : 0.0);
      return o;
    });
  };
  const Outcome ok = get_property("logit_shift").check(*bf16_lse(0), f, b);
  EXPECT_EQ(ok.status, Status::kPass) << ok.message;
  const Outcome off = get_property("logit_shift").check(*bf16_lse(4), f, b);
  EXPECT_EQ(off.status, Status::kFail) << off.message;
}

// σ's count (property_util.h): 2 + 3·max(β, 2), plus 2 for a bias, u32·max|s| each. It took 8 for every kernel: a
// bias's two roundings and a declared β = 4 went uncounted, and the spec envelope, which takes the smaller bound,
// could take that one.
TEST(Envelope, ScoreErrorCountsTheBiasAndTheKernelsShift) {
  const Instance in = make_instance(default_family("normal"), 0);
  Instance biased = in;  // a bias of zeros: the same scores, two more roundings
  biased.problem.has_bias = true;
  biased.bias.assign(in.problem.scores_size(), 0.0);
  const Problem& p = in.problem;
  auto max_s = [&](std::size_t row) {  // row_at order: (b·heads_q + h)·n_q + i
    const int i = static_cast<int>(row % p.n_q), h = static_cast<int>(row / p.n_q % p.heads_q);
    const int b = static_cast<int>(row / (std::size_t(p.n_q) * p.heads_q));
    double m = 0;
    for (int j = 0; j < p.n_k; ++j) {
      double s = 0;
      for (int c = 0; c < p.head_dim; ++c) s += in.q[p.q_at(b, h, i, c)] * in.k[p.kv_at(b, h / p.group(), j, c)];
      m = std::max(m, std::fabs(p.scale * s));
    }
    return m;
  };
  const std::vector<double> s2 = score_error_bounds(in), s4 = score_error_bounds(in, 4), s1 = score_error_bounds(in, 1);
  const std::vector<double> with_bias = score_error_bounds(biased);
  for (std::size_t r = 0; r < s2.size(); ++r) {
    ASSERT_GT(max_s(r), 0) << r;
    EXPECT_EQ(s1[r], s2[r]) << "β below 2 counts as 2";
    EXPECT_NEAR((s4[r] - s2[r]) / (0x1.0p-24 * max_s(r)), 6, 1e-6) << "3·(4 − 2), row " << r;
    EXPECT_NEAR((with_bias[r] - s2[r]) / (0x1.0p-24 * max_s(r)), 2, 1e-6) << "a bias's 2, row " << r;
  }
}

// A kernel that declares no numerics but has a CPU twin (the CUDA kernels) is counted by its twin's spec: its shift
// (cuda:fa2-fixed[beta=4] was counted at β = 2) and the format it returns LSE in (cuda:fa2's fp32 LSE was charged
// bf16's rounding). Without either, β = 2 and bf16. The bf16-LSE kernel that passes logit_shift when its format is
// unknown fails it once its twin says its LSE is fp32.
TEST(Envelope, AKernelIsCountedByItsNumericsOrItsTwinsSpec) {
  const Kernel& fixed4 = default_registry().get("fa2-fixed[beta=4]");
  ASSERT_NE(fixed4.numerics(), nullptr);
  EXPECT_EQ(envelope_kernel(fixed4).beta, 4);
  EXPECT_EQ(envelope_kernel(fixed4).lse_fmt, Format::kF32);
  EXPECT_EQ(envelope_kernel(default_registry().get("fa2")).beta, 2);
  EXPECT_EQ(envelope_kernel(default_registry().get("paper")).lse_fmt, Format::kBF16);
  // Its key tile too (paper's 64 were counted as 16; a declared 8 was under-counted), none for a kernel declaring none.
  EXPECT_EQ(envelope_kernel(default_registry().get("paper")).tile_k, 64);
  EXPECT_EQ(envelope_kernel(default_registry().get("fa2[tile_q=16,tile_k=8]")).tile_k, 8);
  EXPECT_EQ(envelope_kernel(default_registry().get("oracle")).tile_k, 0);
  EXPECT_LT(envelope_mismatch(128, 64), envelope_mismatch(128, 0));
  EXPECT_LT(envelope_mismatch(128, 0), envelope_mismatch(128, 8));
  // Finite at 128k-context lengths (1 − γ_lo cancelled to 0 from ~75k keys: every output "unbounded" again), +inf
  // only where (1 + u)^R leaves fp64.
  EXPECT_TRUE(std::isfinite(envelope_mismatch(131072, 0)));
  EXPECT_GT(envelope_mismatch(131072, 0), envelope_mismatch(65536, 0));
  EXPECT_FALSE(std::isfinite(envelope_mismatch(1 << 24, 0)));
  const auto bf16_lse = [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    for (double& l : o.lse) l = round_to(l, Format::kBF16);
    return o;
  };
  FnKernel twinned("twinned", bf16_lse);
  EXPECT_EQ(envelope_kernel(twinned).beta, 2);
  EXPECT_EQ(envelope_kernel(twinned).lse_fmt, Format::kBF16);
  twinned.set_twin(bf16_lse, *fixed4.numerics());
  EXPECT_EQ(envelope_kernel(twinned).beta, 4);
  EXPECT_EQ(envelope_kernel(twinned).tile_k, 64);
  EXPECT_EQ(envelope_kernel(twinned).lse_fmt, Format::kF32);
  Family f = default_family("negative_rows");
  f.params["level"] = 20;
  Budget b;
  b.instances = 16;
  const Outcome o = get_property("logit_shift").check(twinned, f, b);
  EXPECT_EQ(o.status, Status::kFail) << o.message;
  EXPECT_NE(o.message.find("LSE"), std::string::npos) << o.message;
}

// The spec envelope's shared log-error κ covers what property_util.h counts, in u32·max|s|: the scores and folded
// argument's 2 + 3β (β at least 2), a bias's 2, the rescale chain's 3.03(1 + β) and the dot product's 1 at d = 1
// (where it is as small as it gets against max|s|). Given the σ of β = 2 for the β = 4 kernel, it fell short.
TEST(Envelope, TheSpecEnvelopesKappaCoversTheShiftAndTheBias) {
  for (const char* name : {"fa2", "fa2-fixed", "fa2-fixed[beta=4]"})
    for (const bool bias : {false, true}) {
      SCOPED_TRACE(std::string(name) + (bias ? " with a bias" : ""));
      const Kernel& k = default_registry().get(name);
      const NumericsSpec* spec = envelope_spec(k);
      ASSERT_NE(spec, nullptr);
      const double beta = spec->max_policy.kind == MaxPolicy::kPaperShift ? spec->max_policy.beta : 1.0;
      Family f = default_family("normal");
      f.problem.head_dim = 1;
      f.problem.scale = 1;
      f.problem.has_bias = bias;
      const Instance in = make_instance(f, 0);
      const Problem& p = in.problem;
      const std::vector<SpecRowBound> rows =
          spec_row_bounds(in, *spec, score_error_bounds(in, envelope_kernel(k).beta), reference_forward(in).lse);
      const double need = 2 + 3 * std::max(beta, 2.0) + (bias ? 2 : 0) + 3.03 * (1 + beta) + 1;
      int bounded = 0;
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.n_q; ++i) {
          const SpecRowBound& r = rows[p.row_at(0, h, i)];
          if (!std::isfinite(r.kappa)) continue;
          double max_s = 0;
          for (int j = 0; j < p.n_k; ++j)
            max_s = std::max(max_s, std::fabs(in.q[p.q_at(0, h, i, 0)] * in.k[p.kv_at(0, h / p.group(), j, 0)] +
                                              (bias ? in.bias[p.score_at(0, h, i, j)] : 0.0)));
          EXPECT_GE(r.kappa, need * 0x1.0p-24 * max_s) << "row " << i;
          ++bounded;
        }
      EXPECT_GT(bounded, 0);
    }
}

// The same for key_permutation: one exact LSE a few ulps below fp32's edge, a kernel within its envelope that is
// one ulp high in one key order and not the other (+inf against the correctly rounded finite LSE), failed. Each
// family seed draws another permutation, which changes the kernel's order test in about half of them.
// The generic envelope bounds every row length (review, session 39: it took Higham's γ_R and gave up at R·u >= 1/2,
// n_k >= 977 in 16-key tiles, where key_permutation and logit_shift then passed with every output "unbounded", and
// within_v_range skipped). At n_k = 1024 its O term is past V's range (2γ_hi/(1 − γ_lo) = 2.3·M_c: no O difference
// can fail there), but LSE's is not (2·0.52 between two runs): a kernel whose second run's LSE is 2 higher fails;
// the null controls pass with nothing "unbounded"; within_v_range runs fa2 on its spec's bound (it skipped).
TEST(Honesty, TheGenericEnvelopeBoundsLongRows) {
  Family f = default_family("normal");
  f.problem.n_q = 4, f.problem.n_k = 1024;
  const Budget b{2, 0};
  int runs = 0;
  const auto moved = make_kernel("moved", [&](const Instance& x) {  // each check's second run (permuted, shifted): +2
    ForwardOutput o = rounded_reference(x);
    if (runs++ % 2 == 1) o.lse[0] += 2;
    return o;
  });
  for (const char* name : {"key_permutation", "logit_shift"}) {
    const Outcome bad = get_property(name).check(*moved, f, b);
    EXPECT_EQ(bad.status, Status::kFail) << name << ": " << bad.message << " " << bad.stats.dump();
    for (const char* null : {"oracle", "stochastic"}) {
      const Outcome ok = get_property(name).check(default_registry().get(null), f, b);
      EXPECT_EQ(ok.status, Status::kPass) << name << " " << null << ": " << ok.message;
      EXPECT_FALSE(ok.stats.contains("unbounded")) << name << " " << null << ": " << ok.stats.dump();
    }
  }
  const Outcome v = get_property("within_v_range").check(default_registry().get("fa2"), f, b);
  EXPECT_EQ(v.status, Status::kPass) << v.message;
  EXPECT_GT(v.stats.value("spec", 0), 0) << v.stats.dump();
}

// Where the generic envelope reaches past V's range (n_k = 1024 above), the passes say so: stats "range_only" counts
// the O elements compared on nothing but V's range, for a kernel that declares no numerics (oracle); fa2 declares its
// own and is held to it there (none); at 64 keys the generic envelope is narrower than V's range (none).
TEST(Honesty, InvariancesCountTheElementsTheirEnvelopeJudgesOnlyByVsRange) {
  Family f = default_family("normal");
  f.problem.n_q = 4, f.problem.n_k = 1024;
  const Budget b{2, 0};
  const int elements = f.problem.batch * f.problem.heads_q * f.problem.n_q * f.problem.head_dim;
  for (const char* name : {"key_permutation", "logit_shift"}) {
    const Outcome generic = get_property(name).check(default_registry().get("oracle"), f, b);
    EXPECT_EQ(generic.status, Status::kPass) << name << ": " << generic.message;
    EXPECT_EQ(generic.stats.value("range_only", 0), elements) << name << ": " << generic.stats.dump();
    const Outcome own = get_property(name).check(default_registry().get("fa2"), f, b);
    EXPECT_EQ(own.status, Status::kPass) << name << ": " << own.message;
    EXPECT_FALSE(own.stats.contains("range_only")) << name << ": " << own.stats.dump();
  }
  f.problem.n_k = 64;
  for (const char* name : {"key_permutation", "logit_shift"}) {
    const Outcome generic = get_property(name).check(default_registry().get("oracle"), f, b);
    EXPECT_EQ(generic.status, Status::kPass) << name << ": " << generic.message;
    EXPECT_FALSE(generic.stats.contains("range_only")) << name << ": " << generic.stats.dump();
  }
}

TEST(Honesty, KeyPermutationAllowsAnInfiniteLseWithinItsEnvelopeOfFp32sEdge) {
  Budget b;
  b.instances = 1;
  // High when the key of batch 0, head 0 with the largest first element has an even index: the permutation moves it.
  const auto even_argmax = [](const Instance& x) {
    int best = 0;
    for (int j = 1; j < x.problem.n_k; ++j)
      if (x.k[x.problem.kv_at(0, 0, j, 0)] > x.k[x.problem.kv_at(0, 0, best, 0)]) best = j;
    return best % 2 == 0;
  };
  const auto up = lse_up_kernel(0x1.0p-21, even_argmax), far = lse_up_kernel(0.01, even_argmax);
  int reached = 0, caught = 0, tried = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Family f = default_family("normal");
    f.seed = seed;
    if ((f.problem.scale = scale_below_fp32_edge(make_instance(f, 0), 0)) == 0) continue;
    ++tried;
    const Outcome o = get_property("key_permutation").check(*up, f, b);
    EXPECT_EQ(o.status, Status::kPass) << "seed " << seed << ": " << o.message << " " << o.stats.dump();
    reached += o.stats.value("lse_overflow", 0) > 0;
    caught += get_property("key_permutation").check(*far, f, b).status == Status::kFail;
  }
  EXPECT_GE(tried, 4);
  EXPECT_GE(reached, 1);  // one run high, the other not (the test's premise; 7 of 8 seeds when written)
  // 1% high in one order is caught through the rows still in fp32's range (6 of 8 seeds when written; in the others
  // every row's LSE is +inf or at the edge at this scale, where an infinite LSE against a finite one is not judged).
  EXPECT_GE(caught, 1);
  // Only the infinity of the edge's sign, against a finite LSE within its envelope, passes (reviews): in row 0, the
  // row at the edge, every other row correctly rounded, with one value in the runs `even_argmax` picks and another in
  // the others: −inf against the correct LSE, +inf against it halved, NaN against +inf fail; +inf against it passes.
  const auto row0 = [&](double in_even, double other_factor) {
    return make_kernel("lse_row0", [&, in_even, other_factor](const Instance& in) {
      ForwardOutput o = rounded_reference(in);
      o.lse[0] = even_argmax(in) ? in_even : round_to(o.lse[0] * other_factor, Format::kF32);
      return o;
    });
  };
  int judged = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Family f = default_family("normal");
    f.seed = seed;
    if ((f.problem.scale = scale_below_fp32_edge(make_instance(f, 0), 0)) == 0) continue;
    if (get_property("key_permutation").check(*up, f, b).stats.value("lse_overflow", 0) == 0) continue;  // no flip
    ++judged;
    const auto status = [&](const Kernel& k) { return get_property("key_permutation").check(k, f, b).status; };
    EXPECT_EQ(status(*row0(HUGE_VAL, 1.0)), Status::kPass) << seed;  // the control
    EXPECT_EQ(status(*row0(-HUGE_VAL, 1.0)), Status::kFail) << seed;
    EXPECT_EQ(status(*row0(HUGE_VAL, 0.5)), Status::kFail) << seed;
    EXPECT_EQ(status(*row0(std::nan(""), HUGE_VAL)), Status::kFail) << seed;  // NaN against +inf (finite · inf)
  }
  EXPECT_GE(judged, 1);

  // Past fp32's edge an infinity is allowed only against an LSE within its envelope (review: +inf against 1.0 passed
  // where the exact LSE overflows and the envelope was infinite: Higham's γ_R, as the envelope took it until session
  // 39, at 64 one-key tiles; the product bound keeps it finite, and the case must fail either way).
  Family f = default_family("normal");
  f.problem.n_k = 64;
  f.tile_k = 1;
  f.problem.scale = 2 * scale_below_fp32_edge(make_instance(f, 0), 0);  // row 0's exact LSE ~2·FLT_MAX: +inf
  const Instance in = make_instance(f, 0);
  const std::vector<double> exact = reference_forward(in).lse;
  ASSERT_TRUE(std::isinf(round_to(exact[0], Format::kF32)));
  ASSERT_LT(lse_envelope(in, 1, exact)[0], 0.5 * std::fabs(exact[0])) << "1.0 lies far outside the envelope";
  const auto garbage = make_kernel("lse_garbage", [&](const Instance& x) {  // the permuted run: 1.0 in row 0
    ForwardOutput o = rounded_reference(x);
    if (x.k != in.k) o.lse[0] = 1.0;
    return o;
  });
  EXPECT_EQ(get_property("key_permutation").check(*garbage, f, b).status, Status::kFail);
  EXPECT_EQ(get_property("key_permutation").check(default_registry().get("oracle"), f, b).status, Status::kPass);
}

// Regression (fuzzing, 2026-11-30): scores past fp32's range give LSE = +inf in both runs of key_permutation
// and logit_shift; inf − inf is NaN and the tolerance (+ 2^-23·|inf|) was inf, so the null controls failed.
// Equal infinities must pass, and every other per-instance property must hold for them too.
TEST(Honesty, NullControlsPassWhenLseOverflowsFp32) {
  Family f = default_family("large_logits");
  f.params["log2_mag"] = 66;  // |q·k| ~ 2^132 > fp32's 2^128: the exact LSE rounds to +inf in fp32
  ASSERT_TRUE(std::isinf(round_to(reference_forward(make_instance(f, 0)).lse[0], Format::kF32)));
  Budget b;
  b.instances = 3;
  for (const char* kernel : {"oracle", "stochastic"})
    for (const auto& p : all_properties()) {
      if (p.across_instances) continue;
      const Outcome o = p.check(default_registry().get(kernel), f, b);
      EXPECT_TRUE(o.status == Status::kPass || o.status == Status::kSkip)
          << kernel << " " << p.name << ": " << status_name(o.status) << ": " << o.message;
    }
  // The bitwise invariances change Q and K values (masked keys; causal_prefix's later rows): at |x| ~ 2^127 their
  // change must stay finite, or a masked pair's dS = 0 times it is NaN in the backward's sums (review, session 7).
  f.params["log2_mag"] = 127;
  Family causal = f, masked = f;
  causal.problem.causal = true;
  masked.params["mask"] = 1;
  masked.params["pad"] = 2;
  masked.problem.has_mask = true;
  for (const char* kernel : {"oracle", "stochastic"}) {
    for (const Family& g : {causal, masked})
      for (const char* name : {"masked_value", "causal_prefix"}) {
        const Outcome o = get_property(name).check(default_registry().get(kernel), g, b);
        EXPECT_TRUE(o.status == Status::kPass || o.status == Status::kSkip)
            << kernel << " " << name << " " << g.describe() << ": " << status_name(o.status) << ": " << o.message;
      }
  }
  EXPECT_EQ(get_property("causal_prefix").check(default_registry().get("oracle"), causal, b).status, Status::kPass);
  EXPECT_EQ(get_property("masked_value").check(default_registry().get("oracle"), masked, b).status, Status::kPass);
  // Still sharp where it matters: an infinity against a finite value fails.
  auto inf_lse = make_kernel("inf_lse", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    if (in.k[0] < 0) o.lse[0] = HUGE_VAL;  // depends on which key comes first: a permutation changes it
    return o;
  });
  EXPECT_EQ(run("key_permutation", *inf_lse, default_family("normal")), Status::kFail);
  // Where the exact LSE overflows, only the infinity of its sign rounds it: NaN (what inf − inf gives) and −inf
  // fail `finite`, +inf (the null controls above) passes.
  for (const double bad : {double(NAN), -HUGE_VAL}) {
    auto k = make_kernel("bad_lse", [bad](const Instance& in) {
      ForwardOutput o = rounded_reference(in);
      o.lse[0] = bad;
      return o;
    });
    EXPECT_EQ(run("finite", *k, f), Status::kFail) << bad;
  }
  auto plus_inf = make_kernel("inf_lse_ok", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    o.lse[0] = HUGE_VAL;
    return o;
  });
  EXPECT_EQ(run("finite", *plus_inf, f), Status::kPass);
}

// The accurate property judges each tensor in its own format, element by element: the other neighbour of the
// exact value (what stochastic rounding may give) passes in O and LSE alike, a large error still fails. (The
// per-element detail, and the infinities of the fuzzing regression, are unit-tested in accuracy_test.cpp.)
TEST(Honesty, AccurateAllowsOneUlpPerElementNotMore) {
  auto sr_like = make_kernel("one_ulp", [](const Instance& in) {
    ForwardOutput o = rounded_reference(in);
    const ReferenceForward r = reference_forward(in);
    for (std::size_t x = 0; x < o.o.size(); ++x)  // the other neighbour of the exact value: faithful, < 1 ulp
      if (o.o[x] != r.o[x]) o.o[x] = r.o[x] > o.o[x] ? o.o[x] + ulp(r.o[x], Format::kBF16) : o.o[x] - ulp(r.o[x], Format::kBF16);
    for (std::size_t x = 0; x < o.lse.size(); ++x)
      if (o.lse[x] != r.lse[x]) o.lse[x] = r.lse[x] > o.lse[x] ? o.lse[x] + ulp(r.lse[x], Format::kF32) : o.lse[x] - ulp(r.lse[x], Format::kF32);
    return o;
  });
  auto far = make_kernel("sixteen_ulp", [](const Instance& in) {  // far past one ulp and the 2x bound
    ForwardOutput o = rounded_reference(in);
    for (double& x : o.o) x += 16 * ulp(x, Format::kBF16);
    return o;
  });
  EXPECT_EQ(run("accurate", *sr_like, default_family("normal")), Status::kPass);
  EXPECT_EQ(run("accurate", *far, default_family("normal")), Status::kFail);
}

// Random families (any generator, small random shapes and seeds): the oracle passes every per-instance
// property that applies.
RC_GTEST_PROP(NullControlsProp, OraclePassesOnRandomFamilies, ()) {
  const auto& gens = generators();
  Family f = default_family(gens[*rc::gen::inRange<std::size_t>(0, gens.size())].name);
  f.problem.n_q = *rc::gen::inRange(1, 12);
  f.problem.n_k = *rc::gen::inRange(1, 12);
  f.seed = *rc::gen::arbitrary<std::uint64_t>();
  Budget b;
  b.instances = 2;
  for (const auto& p : all_properties()) {
    if (p.across_instances) continue;
    const Outcome o = p.check(default_registry().get("oracle"), f, b);
    RC_ASSERT(o.status == Status::kPass || o.status == Status::kSkip);
  }
}

}  // namespace
}  // namespace attncheck
