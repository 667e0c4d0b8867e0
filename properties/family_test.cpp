// family_test.cpp — the generators produce what they claim: valid, deterministic instances; exact ties
// (checked on the realised fp64 scores and on the bits of the key rows); near ties within 2^-9 whose p̄
// rounds to 1 in bf16 though the scores differ; masks as declared; one-sign one-binade values; quantised
// values; low rank; near duplicates; JSON round trips and clear errors.
// Run: ctest -R family_test   (label unit)
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "properties/family.h"
#include "properties/family_internal.h"
#include "properties/property.h"
#include "reference/reference.h"

namespace attncheck {
namespace {

bool is_power_of_two(double x) {
  int e;
  return x == 0 || std::fabs(std::frexp(x, &e)) == 0.5;
}

TEST(Family, EveryGeneratorMakesValidDeterministicInstances) {
  ASSERT_GE(generators().size(), 20u);
  for (const auto& g : generators()) {
    SCOPED_TRACE(g.name);
    const Family f = default_family(g.name);
    const Instance a = make_instance(f, 0), b = make_instance(f, 0), c = make_instance(f, 1);
    EXPECT_NO_THROW(a.validate());
    EXPECT_EQ(a.q, b.q);
    EXPECT_EQ(a.k, b.k);
    EXPECT_EQ(a.v, b.v);
    EXPECT_EQ(a.d_o, b.d_o);
    EXPECT_EQ(a.mask, b.mask);
    EXPECT_EQ(a.seed, b.seed);
    EXPECT_TRUE(a.q != c.q || a.k != c.k || a.v != c.v) << "instances 0 and 1 are identical";
    EXPECT_EQ(a.d_o.size(), a.q.size());
  }
}

TEST(Family, JsonRoundTripsAndRejectsBadInput) {
  for (const auto& g : generators()) {
    Family f = default_family(g.name);
    f.seed = 12345;
    const Family r = family_from_json(family_to_json(f));
    EXPECT_EQ(family_to_json(r), family_to_json(f)) << g.name;
    EXPECT_EQ(make_instance(r, 3).q, make_instance(f, 3).q);
  }
  EXPECT_THROW(default_family("no_such_generator"), Error);
  nlohmann::json j = family_to_json(default_family("normal"));
  j["generator"] = "nope";
  EXPECT_THROW(family_from_json(j), Error);
  // A parameter left out would fall back to generators.cpp's in-code value (ties 0: a tie family without ties).
  j = family_to_json(default_family("tied_max"));
  j["params"].erase("ties");
  j["params"].erase("v_sign");
  try {
    family_from_json(j);
    ADD_FAILURE() << "a family without 'ties' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("params lacks 'ties' (default 4), 'v_sign' (default 1)"), std::string::npos)
        << e.what();
  }
  for (const char* key : {"problem", "params"}) {  // another type is not a missing field
    j = family_to_json(default_family("normal"));
    j[key] = 3;
    try {
      family_from_json(j);
      ADD_FAILURE() << key << " = 3 was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("field '" + std::string(key) + "' must be an object, not number"),
                std::string::npos) << e.what();
    }
  }
  j = family_to_json(default_family("normal"));
  j["problem"].erase("n_k");
  EXPECT_THROW(family_from_json(j), Error);
  j = family_to_json(default_family("normal"));
  j["tile_q"] = "eight";
  EXPECT_THROW(family_from_json(j), Error);
  j = family_to_json(default_family("normal"));
  j["problem"]["heads_kv"] = 3;  // does not divide heads_q = 2
  EXPECT_THROW(family_from_json(j), Error);
  EXPECT_THROW(family_from_json(nlohmann::json::array()), Error);
  // has_mask must say what params.mask does: the generator reads the mask from params alone (a file with
  // has_mask true and mask 0 ran without a mask, as written).
  j = family_to_json(default_family("normal"));
  j["problem"]["has_mask"] = true;
  try {
    family_from_json(j);
    ADD_FAILURE() << "has_mask true with params.mask 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("problem.has_mask is true but params.mask is 0"), std::string::npos)
        << e.what();
  }
  j["params"].erase("mask");
  EXPECT_THROW(family_from_json(j), Error);
  j["problem"]["has_mask"] = false;
  j["params"]["mask"] = 1;
  EXPECT_THROW(family_from_json(j), Error);
  j["problem"]["has_mask"] = true;
  EXPECT_TRUE(family_from_json(j).problem.has_mask);
}

// Seeds past 2^53 are written as hex strings: jq and JavaScript hold JSON numbers as doubles and rounded them (an
// edited case then replayed as "generator drift"). Up to 2^53 they stay numbers (committed cases keep their bytes).
TEST(Family, LargeSeedsAreHexStrings) {
  Family f = default_family("normal");
  f.seed = 0xf31461f1cbcdae51ull;
  const nlohmann::json j = family_to_json(f);
  EXPECT_EQ(j["seed"], "0xf31461f1cbcdae51");
  EXPECT_EQ(family_from_json(j).seed, f.seed);
  f.seed = std::uint64_t(1) << 53;
  EXPECT_TRUE(family_to_json(f)["seed"].is_number());
  nlohmann::json k = j;
  k["seed"] = "0xFF";
  EXPECT_EQ(family_from_json(k).seed, 255u);
  for (const char* bad : {"0x", "0xg1", "255", "0x00000000000000001", "-0x1", " 0x1"}) {
    k["seed"] = bad;
    EXPECT_THROW(family_from_json(k), Error) << bad;
  }
}

// Every row's maximum is shared by exactly the tied keys (2..ties of them), bit-identical key rows, at least
// gap/2 (scaled) above every other key.
void expect_exact_ties(const std::string& generator) {
  SCOPED_TRACE(generator);
  const Family f = default_family(generator);
  const double gap = f.param("gap", 8);
  std::set<std::size_t> counts;
  for (std::uint64_t idx = 0; idx < 6; ++idx) {
    const Instance in = make_instance(f, idx);
    const Problem& p = in.problem;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        const std::vector<int> tied = tie_positions(f, idx, b, h / p.group());
        ASSERT_GE(tied.size(), 2u);
        ASSERT_LE(tied.size(), std::size_t(f.param("ties", 2)));
        counts.insert(tied.size());
        for (int j : tied)
          for (int c = 0; c < p.head_dim; ++c)
            ASSERT_EQ(in.k[p.kv_at(b, h / p.group(), j, c)], in.k[p.kv_at(b, h / p.group(), tied[0], c)]);
        const std::vector<double> s = reference_scores(in, b, h);
        for (int i = 0; i < p.n_q; ++i) {
          const double* row = &s[std::size_t(i) * p.n_k];
          const double mx = *std::max_element(row, row + p.n_k);
          int at_max = 0;
          for (int j = 0; j < p.n_k; ++j) {
            const bool is_tied = std::find(tied.begin(), tied.end(), j) != tied.end();
            if (is_tied) {
              EXPECT_EQ(row[j], mx);
              ++at_max;
            } else {
              EXPECT_LE(row[j], mx - 0.49 * gap) << "row " << i << " key " << j;
            }
          }
          EXPECT_EQ(at_max, int(tied.size()));
          if (f.param("tie_sign", 1) == 0) {
            EXPECT_EQ(mx, 0.0);
          } else if (f.param("tie_sign", 1) < 0) {
            EXPECT_LT(mx, 0.0);
          } else {
            EXPECT_GT(mx, 0.0);
          }
        }
      }
  }
  EXPECT_GE(counts.size(), 2u) << "the tie count should vary between 2 and `ties`";
}

TEST(Family, TieFamiliesHaveExactTiesAtTheRowMaximum) {
  for (const char* g : {"tied_max", "tied_max_flat", "tied_max_negative", "max_zero"}) expect_exact_ties(g);
}

// tie_rows: each row has the tied keys as its maximum with that probability; in the others the tied keys score
// below the rest and the maximum is one ordinary key (over 64 instances, no repeat). Absent or 1: the instances of
// before, bit for bit (the draw is made only below 1).
TEST(Family, TieRowsTiesThatFractionOfRows) {
  for (const char* g : {"tied_max", "max_zero", "tied_max_negative"}) {
    SCOPED_TRACE(g);
    Family f = default_family(g);
    Family one = f;
    one.params["tie_rows"] = 1;
    EXPECT_EQ(make_instance(f, 3).q, make_instance(one, 3).q);
    for (double frac : {0.0, 0.125, 0.5}) {
      f.params["tie_rows"] = frac;
      std::size_t rows = 0, tied = 0, repeated = 0;
      for (std::uint64_t idx = 0; idx < 64; ++idx) {
        const Instance in = make_instance(f, idx);
        const Problem& p = in.problem;
        for (int b = 0; b < p.batch; ++b)
          for (int h = 0; h < p.heads_q; ++h) {
            const std::vector<int> keys = tie_positions(f, idx, b, h / p.group());
            const std::vector<double> s = reference_scores(in, b, h);
            for (int i = 0; i < p.n_q; ++i, ++rows) {
              const double* row = &s[std::size_t(i) * p.n_k];
              const double mx = *std::max_element(row, row + p.n_k);
              const int at_max = static_cast<int>(std::count(row, row + p.n_k, mx));
              const bool lead = in.q[p.q_at(b, h, i, 0)] > 0;  // the generator's choice for this row
              tied += lead;
              if (lead) {
                EXPECT_EQ(at_max, int(keys.size())) << "row " << i;
                for (int j : keys) EXPECT_EQ(row[j], mx);
              } else {
                repeated += at_max > 1;
                for (int j : keys) EXPECT_LT(row[j], mx);
              }
            }
          }
      }
      const double got = double(tied) / rows;  // 2048 rows: sd of the fraction <= 0.011
      EXPECT_NEAR(got, frac, 0.05) << frac;
      EXPECT_EQ(repeated, 0u) << frac;
    }
  }
}

TEST(Family, NearTiesAreWithin2ToMinus9AndRoundToOneButDiffer) {
  const Family f = default_family("near_tie");
  for (std::uint64_t idx = 0; idx < 6; ++idx) {
    const Instance in = make_instance(f, idx);
    const Problem& p = in.problem;
    for (int h = 0; h < p.heads_q; ++h) {
      const std::vector<int> near = tie_positions(f, idx, 0, h);
      ASSERT_GE(near.size(), 2u);
      const std::vector<double> s = reference_scores(in, 0, h);
      for (int i = 0; i < p.n_q; ++i) {
        const double* row = &s[std::size_t(i) * p.n_k];
        const double mx = *std::max_element(row, row + p.n_k);
        std::set<double> distinct;
        for (int j : near) {
          const double d = mx - row[j];
          EXPECT_LT(d, 0x1.0p-9);
          EXPECT_EQ(round_to(std::exp(-d), Format::kBF16), 1.0);  // p̄ rounds to 1 in bf16
          distinct.insert(row[j]);
        }
        EXPECT_EQ(distinct.size(), near.size()) << "near-tied scores must differ";
        for (int j = 0; j < p.n_k; ++j) {
          if (std::find(near.begin(), near.end(), j) == near.end()) {
            EXPECT_LT(row[j], mx - 1.0);
          }
        }
      }
    }
  }
}

TEST(Family, MasksAreAsDeclared) {
  {
    const Family f = default_family("padding");
    const Instance in = make_instance(f, 0);
    const int pad = static_cast<int>(f.param("pad", 1));
    for (int i = 0; i < in.problem.n_q; ++i)
      for (int j = 0; j < in.problem.n_k; ++j) EXPECT_EQ(in.visible(0, 0, i, j), j < in.problem.n_k - pad);
  }
  {
    const Family f = default_family("masked_rows");
    const Instance in = make_instance(f, 0);
    for (int i = 0; i < in.problem.n_q; ++i) {
      int seen = 0;
      for (int j = 0; j < in.problem.n_k; ++j) seen += in.visible(0, 1, i, j);
      EXPECT_EQ(seen == 0, i % 3 == 0) << "row " << i;
    }
  }
  {
    const Family f = default_family("first_tile_masked");
    ASSERT_EQ(f.tile_k, 8);
    const Instance in = make_instance(f, 0);
    for (int i = 0; i < in.problem.n_q; ++i)
      for (int j = 0; j < in.problem.n_k; ++j) EXPECT_EQ(in.visible(0, 0, i, j), j >= 8);
  }
  {
    const Family f = default_family("sliding_window");
    const Instance in = make_instance(f, 0);
    const Problem& p = in.problem;
    for (int i = 0; i < p.n_q; ++i)
      for (int j = 0; j < p.n_k; ++j)
        EXPECT_EQ(in.visible(0, 0, i, j), j <= i + p.n_k - p.n_q && j > i + p.n_k - p.n_q - 5);
  }
  {
    const Family f = default_family("causal_short_keys");
    const Instance in = make_instance(f, 0);
    const Problem& p = in.problem;
    ASSERT_GT(p.n_q, p.n_k);
    for (int i = 0; i < p.n_q; ++i) {
      int seen = 0;
      for (int j = 0; j < p.n_k; ++j) seen += in.visible(0, 0, i, j);
      EXPECT_EQ(seen, std::max(0, i + p.n_k - p.n_q + 1)) << "bottom-right causal row " << i;
    }
  }
}

// A count past the shape's limit acts as the limit; clamped_params names it and with_acting_params writes it as it
// acts, the same instances bit for bit. Before, nothing said so: pad 1000 at n_k 32 was run, shrunk and saved as 1000.
TEST(Family, CountsPastTheShapeActAsTheLimitAndAreWrittenSo) {
  struct Row {
    const char* generator;
    const char* key;
    double given;
    int acting;  // at the generator's default shape, n_k 32 and head_dim 16 (asserted below)
  };
  for (const Row& r : {Row{"padding", "pad", 1000, 31}, Row{"first_tile_masked", "first_masked", 40, 31},
                       Row{"low_rank", "rank", 17, 16}, Row{"tied_max", "ties", 33, 32}, Row{"near_tie", "ties", 8, 7},
                       Row{"tied_max", "ties_min", 5, 4}, Row{"sink", "sink_pos", 500, 31}}) {
    SCOPED_TRACE(std::string(r.generator) + " " + r.key);
    Family f = default_family(r.generator);
    ASSERT_EQ(f.problem.n_k, 32);
    ASSERT_EQ(f.problem.head_dim, 16);
    EXPECT_TRUE(clamped_params(f).empty()) << "the default family acts as written";
    f.params[r.key] = r.given;
    const std::vector<ClampedParam> c = clamped_params(f);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].key, r.key);
    EXPECT_EQ(c[0].given, r.given);
    EXPECT_EQ(c[0].acting, r.acting);
    EXPECT_NE(c[0].why.find("at most"), std::string::npos) << c[0].why;
    const Family g = with_acting_params(f);
    EXPECT_EQ(g.param(r.key, -1), r.acting);
    EXPECT_TRUE(clamped_params(g).empty());
    for (std::uint64_t i = 0; i < 3; ++i) {
      const Instance a = make_instance(f, i), b = make_instance(g, i);
      EXPECT_TRUE(a.q == b.q && a.k == b.k && a.v == b.v && a.d_o == b.d_o && a.mask == b.mask) << "instance " << i;
    }
    Family at = f;  // at the limit: as written
    at.params[r.key] = r.acting;
    EXPECT_TRUE(clamped_params(at).empty());
  }
  // The limits are the generators' old clamps, lower ends included: sink_pos 0 is key 0 (a review found it read as
  // key 1 for a moment: with_acting_params compares the new rule with itself, so this pins positions directly).
  for (const int given : {0, 5, 31, 500}) {
    Family sink = default_family("sink");
    sink.params["sink_pos"] = given;
    for (std::uint64_t i = 0; i < 3; ++i)
      EXPECT_EQ(tie_positions(sink, i, 0, 1), std::vector<int>{std::min(given, 31)}) << "sink_pos " << given;
  }
  Family pad0 = default_family("padding");
  pad0.params["pad"] = 0;
  const Instance unpadded = make_instance(pad0, 0);
  EXPECT_EQ(std::count(unpadded.mask.begin(), unpadded.mask.end(), 0), 0) << "pad 0 masks no key";
  // Values the generator rounds to the input format act as that rounding: V = c = 1.00001 is 1 in bf16.
  Family constant = default_family("constant_v");
  constant.params["c"] = 1.00001;
  const std::vector<ClampedParam> c = clamped_params(constant);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].acting, 1.0);
  EXPECT_EQ(make_instance(constant, 0).v, make_instance(with_acting_params(constant), 0).v);
  Family level = default_family("tied_max");
  level.params["tie_level"] = 2.001;
  ASSERT_EQ(clamped_params(level).size(), 1u);
  EXPECT_EQ(clamped_params(level)[0].acting, 2.0);
  EXPECT_EQ(make_instance(level, 0).k, make_instance(with_acting_params(level), 0).k);
  level.params["tie_sign"] = 0;  // a maximum of exactly 0: tie_level is not read
  EXPECT_TRUE(clamped_params(level).empty());
  // A count the generator does not read is not clamped (pad without mask = 1: nothing to say here).
  Family normal = default_family("normal");
  normal.params["pad"] = 1000;
  EXPECT_TRUE(clamped_params(normal).empty());
}

TEST(Family, BiasValuePatternsAreOneSignOneBinade) {
  Family f = default_family("tied_max");
  for (double x : make_instance(f, 0).v) EXPECT_TRUE(x >= 1.0 && x < 2.0) << x;
  for (double x : make_instance(f, 0).d_o) EXPECT_TRUE(x >= 1.0 && x < 2.0) << x;
  f.params["v_sign"] = -1;
  f.params["v_exp"] = -3;
  for (double x : make_instance(f, 1).v) EXPECT_TRUE(x <= -0.125 && x > -0.25) << x;
}

TEST(Family, QuantZeroGivesPowersOfTwo) {
  for (const char* g : {"normal", "tied_max", "large_logits"}) {
    Family f = default_family(g);
    f.params["quant"] = 0;
    const Instance in = make_instance(f, 2);
    for (double x : in.q) EXPECT_TRUE(is_power_of_two(x)) << g << " " << x;
    for (double x : in.v) EXPECT_TRUE(is_power_of_two(x)) << g << " " << x;
  }
}

int rank_of(std::vector<double> m, int rows, int cols) {
  int rank = 0;
  for (int c = 0; c < cols && rank < rows; ++c) {
    int piv = -1;
    for (int r = rank; r < rows; ++r)
      if (std::fabs(m[r * cols + c]) > 1e-9) piv = r;
    if (piv < 0) continue;
    for (int k = 0; k < cols; ++k) std::swap(m[rank * cols + k], m[piv * cols + k]);
    for (int r = 0; r < rows; ++r)
      if (r != rank) {
        const double t = m[r * cols + c] / m[rank * cols + c];
        for (int k = 0; k < cols; ++k) m[r * cols + k] -= t * m[rank * cols + k];
      }
    ++rank;
  }
  return rank;
}

TEST(Family, LowRankAndNearDuplicates) {
  Family f = default_family("low_rank");
  f.params["rank"] = 3;
  const Instance in = make_instance(f, 0);
  const Problem& p = in.problem;
  std::vector<double> q(in.q.begin(), in.q.begin() + std::size_t(p.n_q) * p.head_dim);
  std::vector<double> k(in.k.begin(), in.k.begin() + std::size_t(p.n_k) * p.head_dim);
  EXPECT_LE(rank_of(q, p.n_q, p.head_dim), 3);
  EXPECT_LE(rank_of(k, p.n_k, p.head_dim), 3);
  EXPECT_GE(rank_of(k, p.n_k, p.head_dim), 2);

  const Family d = default_family("near_duplicate");
  const Instance nd = make_instance(d, 0);
  const Problem& pd = nd.problem;
  for (int i = 1; i < pd.n_q; ++i)
    for (int c = 0; c < pd.head_dim; ++c) {
      const double a = nd.q[pd.q_at(0, 0, 0, c)], b = nd.q[pd.q_at(0, 0, i, c)];
      EXPECT_LE(std::fabs(a - b), 2 * ulp(a, Format::kBF16) + 1e-300) << "row " << i;
    }
}

TEST(Family, LargeLogitsReachTheRequestedMagnitude) {
  Family f = default_family("large_logits");
  f.params["log2_mag"] = 64;
  const Instance in = make_instance(f, 0);
  double mx = 0;
  for (double x : in.q) mx = std::max(mx, std::fabs(x));
  EXPECT_GE(mx, std::ldexp(1.0, 61));
  const std::vector<double> s = reference_scores(in, 0, 0);
  double smax = 0;
  for (double x : s) smax = std::max(smax, std::fabs(x));
  EXPECT_GT(smax, 3.4e38) << "past fp32 overflow";
}

// Any shape, seed and index: instances validate, are deterministic, and tie families keep their ties.
RC_GTEST_PROP(FamilyProp, RandomShapesGenerateValidDeterministicInstances, ()) {
  const auto& gens = generators();
  const auto gi = *rc::gen::inRange<std::size_t>(0, gens.size());
  Family f = default_family(gens[gi].name);
  f.problem.n_q = *rc::gen::inRange(1, 20);
  f.problem.n_k = *rc::gen::inRange(1, 20);
  f.problem.head_dim = *rc::gen::inRange(f.param("near", 0) != 0 ? 2 : 1, 12);
  f.problem.scale = Problem::default_scale(f.problem.head_dim);
  f.seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto idx = *rc::gen::inRange<std::uint64_t>(0, 1000);
  const Instance a = make_instance(f, idx);
  RC_ASSERT(a.q == make_instance(f, idx).q);
  RC_ASSERT(a.k.size() == f.problem.kv_size());
  if (f.param("ties", 0) >= 2 && !f.problem.causal && f.param("mask", 0) == 0 && f.param("near", 0) == 0) {
    const std::vector<int> tied = tie_positions(f, idx, 0, 0);
    const std::vector<double> s = reference_scores(a, 0, 0);
    for (int i = 0; i < f.problem.n_q; ++i) {
      const double* row = &s[std::size_t(i) * f.problem.n_k];
      const double mx = *std::max_element(row, row + f.problem.n_k);
      for (int j : tied) RC_ASSERT(row[j] == mx);
    }
  }
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {

// A tie_level so large that A − gap rounds to A in fp64 (≳ 2^58 at gap 8) made every key tie with no gap, and the
// family was accepted (a helper's probe: tie_level 5e17, 32 of 32 keys at the row max). Refused, naming both.
TEST(Family, AGapLostBelowTheTieLevelIsRefused) {
  for (const double level : {5e17, 1e30}) {
    Family f = default_family("tied_max");
    f.params["tie_level"] = level;
    try {
      make_instance(f, 0);
      ADD_FAILURE() << "tie_level " << level << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is lost below tie_level"), std::string::npos) << e.what();
    }
  }
  Family f = default_family("tied_max");
  f.params["tie_level"] = 1e15;  // A − 8·√d still below A: accepted
  EXPECT_NO_THROW(make_instance(f, 0));
}

// At a scale near 2^127 the scaled gap rounds to 0 in the input format (gap 1e-3: 2^-137, below bf16's least
// subnormal), and the refusal blamed tie_level ("gap 0.001 is lost below tie_level 2"), which was not the cause.
// It names the gap, the scale and the format now; so for negative_rows' level.
TEST(Family, AGapOrLevelThatTheScaleRoundsToZeroIsRefusedNamingTheScale) {
  for (const char* gen : {"tied_max", "negative_rows"}) {
    Family f = default_family(gen);
    const char* what = f.params.count("level") ? "level" : "gap";
    f.params[what] = 1e-3;
    f.problem.scale = std::ldexp(1.0, 127);
    try {
      make_instance(f, 0);
      ADD_FAILURE() << gen << ": accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(what) + " 0.001 divided by the scale 1.70141e+38 rounds to 0 in bf16"),
                std::string::npos) << m;
    }
  }
  // gap 8 there is 2^-124, representable, but below half an fp64 ulp of tie_level 2: lost, and the message says
  // at which scale; a tie_level of 2^-120 keeps it.
  Family f = default_family("tied_max");
  f.problem.scale = std::ldexp(1.0, 127);
  try {
    make_instance(f, 0);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("gap 8 divided by the scale 1.70141e+38 (4.70198e-38) is lost below tie_level 2"), std::string::npos)
        << m;
  }
  f.params["tie_level"] = std::ldexp(1.0, -120);
  EXPECT_NO_THROW(make_instance(f, 0));
  Family n = default_family("negative_rows");
  n.problem.scale = std::ldexp(1.0, 127);
  EXPECT_NO_THROW(make_instance(n, 0));  // level 8: 2^-124
}

// Regression (fuzzing, 2026-11-30): nonsensical parameters (tie_sign = 87, ties = −10, mask = 111,
// do_exp = 111, ...) were silently clamped or misread, so the fuzzer reported garbage families as findings.
// Out-of-domain parameters throw attncheck::Error naming the parameter and its domain.
TEST(Family, OutOfDomainParametersThrowAClearError) {
  struct Bad {
    const char* generator;
    const char* key;
    double value;
  };
  for (const Bad& b : {Bad{"tied_max", "tie_sign", 87}, Bad{"tied_max", "ties", -10}, Bad{"normal", "mask", 111},
                       Bad{"normal", "do_exp", 111}, Bad{"normal", "v_exp", -40}, Bad{"normal", "quant", 111},
                       Bad{"normal", "erange", -1}, Bad{"normal", "v_sign", 2}, Bad{"normal", "v_binade", 0.5},
                       Bad{"random_mask", "keep", 1.5}, Bad{"sliding_window", "window", 0}, Bad{"padding", "pad", -3},
                       Bad{"near_duplicate", "eps", 65}, Bad{"max_zero", "tie_level", -2}, Bad{"tied_max", "gap", 0},
                       Bad{"near_tie", "near", 2}, Bad{"low_rank", "rank", 0}, Bad{"large_logits", "log2_mag", 200},
                       Bad{"sink", "sink_pos", -1}, Bad{"negative_rows", "level", -8}}) {
    Family f = default_family(b.generator);
    f.params[b.key] = b.value;
    try {
      make_instance(f, 0);
      ADD_FAILURE() << b.generator << " " << b.key << "=" << b.value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + b.key + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("domain"), std::string::npos) << e.what();
    }
    EXPECT_THROW(validate_family(f), Error);
  }
  // In the domain: edge values, integer parameters read rounded (as the generators read them), shape-dependent
  // limits clamped (so shrinking the shape keeps a family valid); and every default family of every generator.
  Family f = default_family("tied_max");
  f.params["ties"] = 4.2;
  f.params["tie_sign"] = -1;
  f.params["do_exp"] = 32;
  f.params["v_exp"] = -32;
  f.params["quant"] = 0;
  EXPECT_NO_THROW(make_instance(f, 0));
  Family p = default_family("padding");
  p.params["pad"] = 1000;
  EXPECT_NO_THROW(make_instance(p, 0));
  for (const auto& g : generators()) EXPECT_NO_THROW(make_instance(default_family(g.name), 0)) << g.name;
  // clamp_to_domain (for decoders) always lands inside, and keeps values already inside.
  for (const char* key : {"quant", "erange", "v_sign", "v_binade", "do_exp", "mask", "keep", "ties", "gap", "c"}) {
    const ParamDomain d = *param_domain(key, Format::kBF16);
    for (double v : {-1e300, -111.0, -1.0, -0.4, 0.0, 0.3, 0.5, 1.0, 4.2, 87.0, 111.0, 1e300, HUGE_VAL, -HUGE_VAL, std::nan("")})
      EXPECT_TRUE(in_domain(d, clamp_to_domain(d, v))) << key << " " << v << " -> " << clamp_to_domain(d, v);
    for (double v : {0.0, 1.0}) {
      if (in_domain(d, v)) {
        EXPECT_EQ(clamp_to_domain(d, v), d.kind == ParamDomain::Kind::kInteger ? std::round(v) : v) << key;
      }
    }
  }
  EXPECT_FALSE(param_domain("no_such_parameter", Format::kBF16).has_value());
  // A name no generator reads is refused, naming it (a case file's "tiess" ran with the default ties).
  Family typo = default_family("tied_max");
  typo.params["tiess"] = 4;
  try {
    validate_family(typo);
    ADD_FAILURE() << "tiess was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown parameter 'tiess' (parameters: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(", ties, "), std::string::npos) << "the known ones named: " << e.what();
  }
  for (const char* s : {"default", "bias", "gpu", "quick"})
    for (const auto& e : suite(s)) EXPECT_NO_THROW(validate_family(e.family)) << s << " " << e.family.describe();
}

}  // namespace
}  // namespace attncheck
