// fuzz_input_test.cpp — the fuzz decoder is total, the encoder inverts it, the mutator keeps inputs
// coherent, edits keep values in the input format, feedback buckets are monotone, and the kernel target
// runs a seed without a finding on a null control and writes a replayable case for a real failure.
// Run: ctest -R fuzz_input
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>

#include "harness/corpus.h"
#include "harness/fuzz/feedback.h"
#include "harness/fuzz/fuzz_input.h"
#include "harness/fuzz/kernel_target.h"
#include "harness/fuzz/mutator.h"
#include "reference/memo.h"
#include "reference/reference.h"

namespace attncheck::fuzz {
namespace {

std::vector<std::uint8_t> random_bytes(std::mt19937& rng, std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

TEST(FuzzInput, EveryByteStringDecodesToAValidProblem) {
  std::mt19937 rng(7);
  EXPECT_NO_THROW(decode_input(nullptr, 0).family.problem.validate());
  for (int t = 0; t < 2000; ++t) {
    const auto b = random_bytes(rng, rng() % 120);
    const FuzzInput in = decode_input(b.data(), b.size());
    const Problem& p = in.family.problem;
    ASSERT_NO_THROW(p.validate()) << to_hex(b.data(), b.size());
    ASSERT_LE(p.n_q, kMaxN);
    ASSERT_LE(p.n_k, kMaxN);
    ASSERT_LE(p.head_dim, kMaxD);
    if (is_long(p)) {
      ASSERT_EQ(p.batch, 1);
      ASSERT_LE(p.heads_q, kMaxLongHeads);
    }
    ASSERT_LE(in.family.tile_q, p.n_q);
    ASSERT_LE(in.family.tile_k, p.n_k);
    ASSERT_LE(in.edits.size(), static_cast<std::size_t>(kMaxEdits));
    ASSERT_EQ(p.has_mask, in.family.param("mask", 0) != 0);
  }
}

TEST(FuzzInput, EncodeInvertsDecode) {
  std::mt19937 rng(11);
  for (int t = 0; t < 500; ++t) {
    const auto b = random_bytes(rng, 24 + rng() % 60);
    const FuzzInput a = decode_input(b.data(), b.size());
    const auto enc = encode_input(a);
    const FuzzInput c = decode_input(enc.data(), enc.size());
    ASSERT_EQ(family_to_json(a.family), family_to_json(c.family)) << to_hex(b.data(), b.size());
    ASSERT_EQ(a.run_bias, c.run_bias);
    ASSERT_EQ(a.edits.size(), c.edits.size());
  }
}

TEST(FuzzInput, DefaultFamiliesEncodeExactly) {
  for (const GeneratorInfo& g : generators()) {
    FuzzInput in;
    in.family = default_family(g.name);
    in.family.tile_q = in.family.tile_k = 0;
    const Problem& p = in.family.problem;
    if (p.n_q > kMaxN || p.n_k > kMaxN || p.heads_q > kMaxHeads ||
        (is_long(p) && (p.batch > 1 || p.heads_q > kMaxLongHeads)))
      continue;
    const auto enc = encode_input(in);
    const FuzzInput back = decode_input(enc.data(), enc.size());
    EXPECT_EQ(family_to_json(back.family), family_to_json(in.family)) << g.name;
  }
}

// Bytes 18-20 were reserved (ignored) in the first layout: an input with them at 0 must decode exactly as it did,
// so committed seeds and grown corpora keep their meaning. The first layout's shape, written out here: n_q, n_k,
// head_dim = 1 + byte % 32, heads_q = 1 + byte % 4, batch = 1 + byte % 2; and bytes 18-20 change nothing else.
TEST(FuzzInput, ZeroLongBytesDecodeAsTheFirstLayout) {
  std::mt19937 rng(13);
  for (int t = 0; t < 2000; ++t) {
    auto b = random_bytes(rng, kHeaderBytes + rng() % 60);
    b[18] = b[19] = b[20] = 0;
    const Problem p = decode_input(b.data(), b.size()).family.problem;
    ASSERT_EQ(p.n_q, 1 + b[2] % 32) << to_hex(b.data(), b.size());
    ASSERT_EQ(p.n_k, 1 + b[3] % 32);
    ASSERT_EQ(p.head_dim, 1 + b[4] % 32);
    ASSERT_EQ(p.heads_q, 1 + b[16] % 4);
    ASSERT_EQ(p.batch, 1 + b[17] % 2);
    ASSERT_FALSE(is_long(p));
    // Any bytes 18-20: a family that differs in nothing but n_q, n_k, head_dim (and batch, heads, GQA when long).
    auto long_b = b;
    for (int i = 18; i <= 20; ++i) long_b[i] = static_cast<std::uint8_t>(rng());
    const FuzzInput a = decode_input(b.data(), b.size()), c = decode_input(long_b.data(), long_b.size());
    Family same = c.family;
    same.problem = a.family.problem;
    // The tiles are taken modulo the length: one that exceeds the short length is the same tile byte.
    if (b[5] != 0) same.tile_q = a.family.tile_q;
    if (b[6] != 0) same.tile_k = a.family.tile_k;
    ASSERT_EQ(family_to_json(same), family_to_json(a.family)) << to_hex(long_b.data(), long_b.size());
    ASSERT_EQ(a.edits.size(), c.edits.size());
  }
}

// The committed seeds of the first layout (every one but long_*) have bytes 18-20 at 0: they decode as before.
TEST(FuzzInput, CommittedSeedsOfTheFirstLayoutAreShort) {
  const std::filesystem::path dir = std::filesystem::path(ATTNCHECK_SOURCE_DIR) / "corpus" / "seeds" / "kernel";
  int seeds = 0, long_seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<std::uint8_t> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const Problem p = decode_input(b.data(), b.size()).family.problem;
    ++seeds;
    if (e.path().filename().string().rfind("long_", 0) == 0) {
      EXPECT_GT(std::max(p.n_q, p.n_k), 64) << e.path() << ": a long seed crosses a 64-key tile";
      ++long_seeds;
      continue;
    }
    ASSERT_GE(b.size(), 21u) << e.path();
    EXPECT_EQ(b[18] | b[19] | b[20], 0) << e.path();
    EXPECT_FALSE(is_long(p)) << e.path();
  }
  EXPECT_GE(seeds, 20);
  EXPECT_GE(long_seeds, 1) << "a campaign starts with a multi-tile input";
}

// Bytes 18-20 add 32 · (0..7) to n_q, n_k and 32 · (0..3) to head_dim; larger values add nothing. A long input has
// batch 1 and at most kMaxLongHeads query heads (GQA: 2 query heads on 1 kv head).
TEST(FuzzInput, LongBytesAddMultiplesOf32) {
  std::vector<std::uint8_t> b(kHeaderBytes, 0);
  b[2] = 31, b[18] = 7;   // n_q 32 + 7 · 32 = 256
  b[3] = 0, b[19] = 2;    // n_k 1 + 64 = 65: one key past the first 64-key tile
  b[4] = 31, b[20] = 3;   // head_dim 128
  b[16] = 3, b[17] = 1;   // heads_q 4 and batch 2 in a short input
  b[0] = kFlagGqa;
  Problem p = decode_input(b.data(), b.size()).family.problem;
  EXPECT_EQ(p.n_q, 256);
  EXPECT_EQ(p.n_k, 65);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.heads_q, 2);
  EXPECT_EQ(p.heads_kv, 1);
  b[18] = 8, b[19] = 255, b[20] = 4;  // past the ranges: nothing added, a short input again
  p = decode_input(b.data(), b.size()).family.problem;
  EXPECT_EQ(p.n_q, 32);
  EXPECT_EQ(p.n_k, 1);
  EXPECT_EQ(p.head_dim, 32);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 4);
  b[20] = 1;  // head_dim alone makes an input long
  p = decode_input(b.data(), b.size()).family.problem;
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.batch, 1);
  // Every size once: 1..256 for n, 1..128 for head_dim, and nothing past them.
  for (const bool head_dim : {false, true}) {
    std::vector<int> seen(kMaxN + 1, 0);
    for (int low = 0; low < 256; ++low)
      for (int high = 0; high < 256; ++high) {
        const int n = size_from_bytes(static_cast<std::uint8_t>(low), static_cast<std::uint8_t>(high), head_dim);
        ASSERT_GE(n, 1);
        ASSERT_LE(n, head_dim ? kMaxD : kMaxN);
        seen[n] = 1;
      }
    for (int n = 1; n <= (head_dim ? kMaxD : kMaxN); ++n) {
      EXPECT_TRUE(seen[n]) << n;
      const auto [low, high] = bytes_for_size(n, head_dim);
      EXPECT_EQ(size_from_bytes(low, high, head_dim), n);
    }
  }
}

// The bias flag (byte 0, bit 4) runs the bias property on a short input only: a long input's batch of T = 32 took
// seconds, and long inputs with the flag took 80% of a campaign's time.
TEST(FuzzInput, ALongInputIgnoresTheBiasFlag) {
  std::vector<std::uint8_t> b(kHeaderBytes, 0);
  b[0] = kFlagRunBias;
  b[1] = 3;  // any generator
  EXPECT_TRUE(decode_input(b.data(), b.size()).run_bias);
  for (const int at : {18, 19, 20}) {
    auto long_b = b;
    long_b[at] = 1;
    const FuzzInput in = decode_input(long_b.data(), long_b.size());
    EXPECT_TRUE(is_long(in.family.problem));
    EXPECT_FALSE(in.run_bias) << "byte " << at;
  }
}

// A long family round-trips through the encoder (the target's memo key is its encoding: decode(encode(f)) == f).
TEST(FuzzInput, LongFamiliesEncodeExactly) {
  std::mt19937 rng(17);
  for (int t = 0; t < 500; ++t) {
    FuzzInput in;
    in.family = default_family(t % 2 ? "first_tile_masked" : "normal");
    Problem& p = in.family.problem;
    p.n_q = 1 + static_cast<int>(rng() % kMaxN);
    p.n_k = 1 + static_cast<int>(rng() % kMaxN);
    p.head_dim = 1 + static_cast<int>(rng() % kMaxD);
    p.scale = Problem::default_scale(p.head_dim);
    p.batch = 1;
    p.heads_q = 1 + static_cast<int>(rng() % kMaxLongHeads);
    p.heads_kv = p.heads_q == 2 && rng() % 2 ? 1 : p.heads_q;
    in.family.tile_q = static_cast<int>(rng() % std::min(p.n_q + 1, 256));
    in.family.tile_k = static_cast<int>(rng() % std::min(p.n_k + 1, 256));
    const auto enc = encode_input(in);
    ASSERT_EQ(family_to_json(decode_input(enc.data(), enc.size()).family), family_to_json(in.family))
        << to_hex(enc.data(), enc.size());
  }
}

TEST(FuzzMutator, KeepsInputsDecodableAndWithinMaxSize) {
  std::mt19937 rng(3);
  std::vector<std::uint8_t> buf(4096);
  int changed = 0;
  for (int t = 0; t < 3000; ++t) {
    const std::size_t size = rng() % 80, max_size = 24 + rng() % 200;
    const auto b = random_bytes(rng, size);
    std::copy(b.begin(), b.end(), buf.begin());
    const std::size_t n = mutate_structured(buf.data(), std::min(size, max_size), max_size, rng());
    ASSERT_LE(n, max_size);
    ASSERT_GE(n, static_cast<std::size_t>(kHeaderBytes));
    const std::size_t edits_at = edits_offset(buf.data(), n);
    if (n >= edits_at) {
      ASSERT_EQ((n - edits_at) % kEditBytes, 0u) << "edits stay aligned";
    }
    ASSERT_NO_THROW(decode_input(buf.data(), n).family.problem.validate());
    changed += !(n == size && std::equal(b.begin(), b.end(), buf.begin()));
  }
  EXPECT_GT(changed, 2500) << "the mutator almost always changes something";
}

// The mutator takes a size across 32 (bytes 18-20) in one shape move of kLongOneIn (mutator.cpp: 1 in 16 of the
// shape moves, which are 1 in 10 of its mutations), both ways, and mostly to a 64-row edge or a real head dim; it
// never writes the reserved bytes 22-23 (byte 21, tie_rows, only 0..7). (libFuzzer's own byte mutations, the other
// quarter, are not counted here.)
TEST(FuzzMutator, TakesSizesAcross32RarelyAndBothWays) {
  FuzzInput in;
  in.family = default_family("normal");
  in.family.tile_q = in.family.tile_k = 0;
  const std::vector<std::uint8_t> short_start = encode_input(in);
  in.family.problem = Problem::of_shape(1, 2, 2, 130, 200, 64);
  const std::vector<std::uint8_t> long_start = encode_input(in);
  std::mt19937 rng(19);  // libFuzzer passes random seeds; consecutive minstd seeds would correlate the picks
  std::vector<std::uint8_t> buf(512);
  int tie_rows_set = 0;  // mutations that set byte 21 (tie_rows) from 0
  const auto mutate = [&](const std::vector<std::uint8_t>& from) {
    std::copy(from.begin(), from.end(), buf.begin());
    const std::size_t n = mutate_structured(buf.data(), from.size(), buf.size(), rng());
    EXPECT_EQ(buf[22] | buf[23], 0) << "reserved bytes";
    EXPECT_LT(buf[kTieRowsByte], kTieRowsSteps) << "tie_rows: 0 (every row) or k/8";
    tie_rows_set += buf[kTieRowsByte] != 0;
    return decode_input(buf.data(), n).family.problem;
  };
  const int trials = 40000;
  int made_long = 0, multi_tile = 0, at_edge = 0;
  for (int t = 0; t < trials; ++t) {
    const Problem p = mutate(short_start);
    if (!is_long(p)) continue;
    ++made_long;
    multi_tile += std::max(p.n_q, p.n_k) > 64;
    for (const int size : {p.n_q, p.n_k, p.head_dim})
      at_edge += size > 32 && (size % 64 == 0 || size % 64 == 1 || size % 64 == 63);
  }
  int made_short = 0;  // one of n_q 130, n_k 200, d 64 to 32 or less (the other two stay long)
  for (int t = 0; t < trials; ++t) {
    const Problem p = mutate(long_start);
    made_short += p.n_q <= 32 || p.n_k <= 32 || p.head_dim <= 32;
    ASSERT_LE(std::max(p.n_q, p.n_k), kMaxN);
  }
  // mutate_structured: 1/10 · 1/16 = 0.625% of its calls, ~250 of 40,000 (bounds: a factor of 2 either way). The
  // long-to-short count adds the ordinary moves of a long size to 1..256 (1/10 · 15/16 · 1/4 · 32/256 of the calls).
  EXPECT_GT(made_long, trials / 320) << "short to long";
  EXPECT_LT(made_long, trials / 80) << "rarely: a long input costs up to hundreds of short ones";
  EXPECT_GT(multi_tile, made_long / 4) << "many cross a 64-row tile";
  EXPECT_GT(at_edge, made_long / 4) << "many sit at a 64-row edge or a head dim of 64 or 128";
  EXPECT_GT(made_short, trials / 320) << "long back to short";
  EXPECT_LT(made_short, trials / 40);
  // Byte 21 (tie_rows): 1/10 · 1/5 · 7/8 = 1.75% of the calls from an input at 0, ~700 of each 40,000 (bounds: a
  // factor of ~2 either way; both loops count, the long start has it at 0 too).
  EXPECT_GT(tie_rows_set, 2 * trials / 120) << "tie_rows is reached";
  EXPECT_LT(tie_rows_set, 2 * trials / 28);
}

// Byte 21 sets tie_rows = k/8 (k in 1..7) on a generator with a `ties` parameter, and nothing else: 0 and 8..255
// leave it unset (every input written before it had a meaning decodes as before; a blind byte mutation lands in range
// 7 times in 256), and a generator without ties ignores it. The families decode, encode back, and make instances.
TEST(FuzzInput, Byte21SetsTieRowsOnTieGenerators) {
  int tie_generators = 0;
  for (std::size_t gi = 0; gi < generators().size(); ++gi) {
    const GeneratorInfo& g = generators()[gi];
    FuzzInput in;
    in.family = default_family(g.name);
    in.family.problem = Problem::of_shape(1, 2, 2, 16, 32, 16);
    in.family.problem.scale = Problem::default_scale(16);
    in.family.tile_q = in.family.tile_k = 0;
    std::vector<std::uint8_t> b = encode_input(in);
    ASSERT_EQ(b[kTieRowsByte], 0) << g.name;
    const bool ties = g.defaults.count("ties") > 0;
    tie_generators += ties;
    const FuzzInput base = decode_input(b.data(), b.size());
    ASSERT_EQ(base.family.params.count("tie_rows"), 0u) << g.name;
    for (int k = 1; k < 256; ++k) {
      b[kTieRowsByte] = static_cast<std::uint8_t>(k);
      const FuzzInput got = decode_input(b.data(), b.size());
      Family expect = base.family;
      if (ties && k < kTieRowsSteps) expect.params["tie_rows"] = k / 8.0;
      ASSERT_EQ(family_to_json(got.family), family_to_json(expect)) << g.name << " byte " << k;
      const auto enc = encode_input(got);
      ASSERT_EQ(family_to_json(decode_input(enc.data(), enc.size()).family), family_to_json(got.family)) << g.name;
    }
    if (!ties || g.defaults.at("ties") < 1) continue;
    b[kTieRowsByte] = 1;  // 1 row in 8 (what it does to the rows: Family.TieRowsTiesThatFractionOfRows)
    const Instance all = make_instance(base.family, 0);
    Instance some;
    ASSERT_NO_THROW(some = make_instance(decode_input(b.data(), b.size()).family, 0)) << g.name;
    EXPECT_NE(all.q, some.q) << g.name;
  }
  EXPECT_GE(tie_generators, 5);
  // A tie_rows the layout cannot hold is encoded as the nearest code, as the other parameters are (fuzz_input.h):
  // 0.3 as 2/8; 0 as 1/8 (not as unset, which would tie every row); 1, the default, as unset.
  FuzzInput in;
  in.family = default_family("tied_max");
  for (const auto& [v, byte] : {std::pair{0.3, 2}, std::pair{0.0, 1}, std::pair{0.99, 0}, std::pair{1.0, 0},
                                std::pair{1e300, 0}, std::pair{-5.0, 1}, std::pair{std::nan(""), 0}}) {
    in.family.params["tie_rows"] = v;
    EXPECT_EQ(encode_input(in)[kTieRowsByte], byte) << v;
  }
}

TEST(FuzzInput, EditsKeepValuesInTheInputFormat) {
  std::mt19937 rng(5);
  Family f = default_family("normal");
  f.problem.n_q = 4;
  f.problem.n_k = 5;
  f.problem.head_dim = 3;
  const Instance base = make_instance(f, 0);
  for (int t = 0; t < 300; ++t) {
    std::vector<Edit> edits(1 + rng() % 6);
    for (Edit& e : edits) {
      e.op = static_cast<EditOp>(rng() % kEditOps);
      e.tensor = static_cast<int>(rng() % 4);
      e.row = static_cast<int>(rng() % 256);
      e.col = static_cast<int>(rng() % 256);
      e.arg = static_cast<int>(rng() % 256);
    }
    const Instance in = apply_edits(base, edits);
    ASSERT_NO_THROW(in.validate());
  }
  // A copied K row gives two keys with identical scores for every query: a tie.
  const Instance tied = apply_edits(base, {Edit{EditOp::kCopyRow, 1, 3, 0, 1}});
  for (int c = 0; c < 3; ++c) EXPECT_EQ(tied.k[tied.problem.kv_at(0, 0, 3, c)], tied.k[tied.problem.kv_at(0, 0, 1, c)]);
  EXPECT_TRUE(std::isinf(special_value(1, Format::kBF16)));
  EXPECT_TRUE(std::isnan(special_value(2, Format::kBF16)));
  EXPECT_EQ(special_value(0x80 | 6, Format::kBF16), -1.0);
}

TEST(FuzzFeedback, BucketsAreMonotoneAndCountersAreSet) {
  EXPECT_EQ(ulp_bucket(0), 0);
  EXPECT_EQ(ulp_bucket(NAN), kUlpBuckets - 1);
  int last = 0;
  for (double u = 1.0 / 64; u < 1e6; u *= 1.5) {
    const int b = ulp_bucket(u);
    EXPECT_GE(b, last);
    EXPECT_LT(b, kUlpBuckets - 1);
    last = b;
  }
  EXPECT_EQ(ulp_bucket(1.0), 11);
  EXPECT_EQ(ulp_bucket(1.5), 12);
  EXPECT_EQ(ulp_bucket(2.0), 13);
  clear();
  set_enabled(true);
  Observation o;
  o.max_ulp_o = 3;
  record(o);
  int set = 0;
  for (std::size_t i = 0; i < counter_count(); ++i) set += counters()[i] != 0;
  EXPECT_GE(set, 2);
  clear();
  set_enabled(false);
  record(o);
  set = 0;
  for (std::size_t i = 0; i < counter_count(); ++i) set += counters()[i] != 0;
  EXPECT_EQ(set, 0) << "ATTNCHECK_FUZZ_FEEDBACK=0 leaves the counters alone";
  set_enabled(true);
}

// A target that saves into `dir`, quietly, and goes on past findings (the memo tests' configuration).
TargetConfig going_config(const std::string& dir, const char* kernel) {
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.keep_going = true;
  cfg.kernel = kernel;
  return cfg;
}

// A seed-like input: the tied_max generator, small shape, bias flag on.
std::vector<std::uint8_t> tied_input() {
  FuzzInput in;
  in.family = default_family("tied_max");
  in.family.problem.n_q = 8;
  in.family.problem.n_k = 16;
  in.family.problem.head_dim = 8;
  in.family.problem.heads_q = in.family.problem.heads_kv = 1;
  in.family.problem.scale = Problem::default_scale(8);
  in.family.tile_q = in.family.tile_k = 0;
  in.run_bias = true;
  return encode_input(in);
}

// Every ATTNCHECK_FUZZ_* setting is checked when the target starts: a typo in a property name selected no property
// (a campaign that checks nothing) and atoi turned "abc" into a clamped 1; now each is an Error naming it.
TEST(FuzzTarget, ConfigFromEnvRefusesWhatItCannotRead) {
  const char* names[] = {"ATTNCHECK_FUZZ_PROPERTIES", "ATTNCHECK_FUZZ_INSTANCES", "ATTNCHECK_FUZZ_BIAS_T",
                         "ATTNCHECK_FUZZ_FEEDBACK", "ATTNCHECK_FUZZ_QUIET", "ATTNCHECK_FUZZ_CONTINUE",
                         "ATTNCHECK_FUZZ_PLANTED_FEATURES", "ATTNCHECK_FUZZ_CONFIRM_BIAS"};
  for (const char* n : names) ::unsetenv(n);
  EXPECT_NO_THROW(config_from_env());
  const std::pair<const char*, const char*> bad[] = {
      {"ATTNCHECK_FUZZ_PROPERTIES", "unbaised"}, {"ATTNCHECK_FUZZ_PROPERTIES", "finite,nope"},
      {"ATTNCHECK_FUZZ_INSTANCES", "abc"},        {"ATTNCHECK_FUZZ_INSTANCES", "0"},
      {"ATTNCHECK_FUZZ_BIAS_T", "1"},             {"ATTNCHECK_FUZZ_FEEDBACK", "yes"},
      {"ATTNCHECK_FUZZ_QUIET", "true"},           {"ATTNCHECK_FUZZ_CONTINUE", "2"},
      {"ATTNCHECK_FUZZ_PLANTED_FEATURES", "10"},  {"ATTNCHECK_FUZZ_CONFIRM_BIAS", "no"}};
  for (const auto& [name, value] : bad) {
    ::setenv(name, value, 1);
    try {
      (void)config_from_env();
      ADD_FAILURE() << name << "=" << value << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    ::unsetenv(name);
  }
  const std::pair<const char*, const char*> good[] = {
      {"ATTNCHECK_FUZZ_PROPERTIES", "none"}, {"ATTNCHECK_FUZZ_PROPERTIES", "finite,unbiased"},
      {"ATTNCHECK_FUZZ_FEEDBACK", "error"},  {"ATTNCHECK_FUZZ_INSTANCES", "4"}};
  for (const auto& [name, value] : good) {
    ::setenv(name, value, 1);
    EXPECT_NO_THROW(config_from_env()) << name << "=" << value;
    ::unsetenv(name);
  }
}

TEST(FuzzTarget, NullControlPassesAndPaperKernelGivesAReplayableFinding) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-target-test";
  std::filesystem::remove_all(dir);
  const auto bytes = tied_input();
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.kernel = "oracle";
  const RunResult ok = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_FALSE(ok.finding) << ok.property << ": " << ok.message;
  EXPECT_FALSE(ok.skipped) << ok.message;
  cfg.kernel = "paper";
  cfg.bias_instances = 64;
  const RunResult bad = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  ASSERT_TRUE(bad.finding) << "the paper's kernel fails on tied maxima (bias, or its known LSE accuracy edge)";
  const Case c = load_case(bad.finding_path);
  EXPECT_EQ(c.kernel, "paper");
  EXPECT_EQ(c.found_by, "fuzz");
  EXPECT_EQ(replay_case(c, default_registry()).status, c.expected);
  std::filesystem::remove_all(dir);
}

// A finding that cannot be saved (a full disk; here a findings folder under a regular file) is said and tried again
// by the next input that fails the same way: it was marked as reported before the write, and the write's error
// ended the run as a skipped input, so the whole group was lost without a word (probe, session 20).
TEST(FuzzTarget, AFindingThatCannotBeSavedIsSaidAndTriedAgain) {
  const std::string base = testing::TempDir() + "attncheck-fuzz-save-test";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  const std::string blocker = base + "/findings";
  std::ofstream(blocker) << "a file where the folder should be\n";
  TargetConfig cfg;
  cfg.findings_dir = blocker + "/raw";
  cfg.quiet = true;
  cfg.keep_going = true;
  cfg.kernel = "paper";
  cfg.properties = {"unbiased"};
  cfg.bias_instances = 64;
  const auto bytes = tied_input();
  KernelTarget t(cfg);
  const RunResult lost = t.run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(lost.finding) << lost.message;
  EXPECT_FALSE(lost.skipped) << lost.message;
  EXPECT_TRUE(lost.finding_path.empty());
  EXPECT_NE(lost.save_error, "");
  std::filesystem::remove(blocker);  // space again
  const RunResult saved = t.run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(saved.finding);
  ASSERT_FALSE(saved.finding_path.empty()) << "the group was marked reported although its case was never written";
  EXPECT_TRUE(std::filesystem::exists(saved.finding_path));
  std::filesystem::remove_all(base);
}

#if defined(ATTNCHECK_FAULTY_PLUGIN)
// A plugin kernel is fuzzed through the same isolated calls as `check`: its crash is a finding of the property whose
// check met it, saved and replayed as the same fault (`attncheck replay --plugin` reports it as the failure); a
// correct plugin kernel gives no finding. (attncheck fuzz had no --plugin and the target loaded no plugins.)
TEST(FuzzTarget, APluginKernelIsFuzzedAndItsCrashIsAFindingThatReplays) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-plugin-test";
  std::filesystem::remove_all(dir);
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.keep_going = true;
  cfg.plugins = {ATTNCHECK_FAULTY_PLUGIN, ATTNCHECK_EXAMPLE_PLUGIN};
  cfg.kernel = "plugin:crash";
  cfg.properties = {"finite"};
  const auto bytes = tied_input();
  const RunResult r = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(r.finding) << r.skipped << " " << r.message;
  EXPECT_EQ(r.property, "finite");
  EXPECT_NE(r.message.find("kernel fault: "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("SIGSEGV"), std::string::npos) << r.message;
  ASSERT_FALSE(r.finding_path.empty());
  const Case c = load_case(r.finding_path);
  EXPECT_EQ(c.kernel, "plugin:crash");
  EXPECT_THROW(replay_case(c, default_registry()), KernelFault);
  // With no property (`--property none`: faults only) the crash is a finding too, met by `finite` (it read "no
  // finding": a fuzz audit, session 40).
  cfg.properties = {"none"};
  const RunResult bare = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(bare.finding) << bare.skipped << " " << bare.message;
  EXPECT_EQ(bare.property, "finite");
  EXPECT_NE(bare.message.find("SIGSEGV"), std::string::npos) << bare.message;
  // A bias-only campaign on an input with the bias flag: step 5's batch meets the crash, as `unbiased`'s finding.
  cfg.properties = {"unbiased"};
  const RunResult bias_only = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(bias_only.finding) << bias_only.skipped << " " << bias_only.message;
  EXPECT_EQ(bias_only.property, "unbiased") << bias_only.message;
  // A crash the properties' own run does not meet again (plugin:flaky crashes on its first call only) is a finding
  // too, as step 2 met it: it was dropped, and the family's later probe crashes with it.
  const std::string marker = dir + "-flaky-marker";
  std::filesystem::remove(marker);
  ::setenv("ATTNCHECK_FLAKY_MARKER", marker.c_str(), 1);
  cfg.kernel = "plugin:flaky";
  cfg.properties = {"finite"};  // its zeros are finite: the property's own run passes
  const RunResult flaky = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  ::unsetenv("ATTNCHECK_FLAKY_MARKER");
  std::filesystem::remove(marker);
  EXPECT_TRUE(flaky.finding) << flaky.skipped << " " << flaky.message;
  EXPECT_EQ(flaky.property, "finite");
  EXPECT_TRUE(flaky.message.find("kernel fault: ") != std::string::npos &&
              flaky.message.find("SIGABRT") != std::string::npos) << flaky.message;
  ::setenv("ATTNCHECK_EXAMPLE_DEFECT", "none", 1);
  cfg.kernel = "plugin:example";
  cfg.properties = {"finite", "accurate"};
  const RunResult ok = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  ::unsetenv("ATTNCHECK_EXAMPLE_DEFECT");
  EXPECT_FALSE(ok.finding) << ok.property << ": " << ok.message;
  EXPECT_FALSE(ok.skipped) << ok.message;
  std::filesystem::remove_all(dir);
}
#endif

// Step 5 runs the bias batch once per family: the same family again, with or without value edits, is answered
// from the target's memo with the same result; another seed is a new family and runs its own batch.
TEST(FuzzTarget, BiasBatchRunsOncePerFamilyAndItsReplayEqualsAFreshRun) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-bias-memo-test";
  std::filesystem::remove_all(dir);
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.keep_going = true;
  cfg.kernel = "paper";  // fails the bias property on this family: the replayed outcome must fail as well
  cfg.bias_instances = 64;
  cfg.properties = {"unbiased"};
  const auto bytes = tied_input();
  auto edited = bytes;
  for (std::uint8_t b : {0x10, 3, 5, 7}) edited.push_back(b);  // one value edit: the probe changes, not the family
  auto other = bytes;
  other[8] ^= 1;  // the family seed
  KernelTarget t(cfg);
  const RunResult first = t.run_input(bytes.data(), bytes.size(), false);
  EXPECT_EQ(t.bias_batches_run(), 1u);
  const RunResult again = t.run_input(edited.data(), edited.size(), false);
  EXPECT_EQ(t.bias_batches_run(), 1u);
  const RunResult fresh = KernelTarget(cfg).run_input(edited.data(), edited.size(), false);
  EXPECT_TRUE(first.finding) << "paper's bias on tied maxima (T = 64): " << first.message;
  EXPECT_TRUE(fresh.finding) << fresh.skipped << " " << fresh.message;
  EXPECT_EQ(again.finding, fresh.finding);
  EXPECT_EQ(again.property, fresh.property);
  EXPECT_EQ(again.message, fresh.message);
  EXPECT_EQ(first.message, fresh.message);
  t.run_input(other.data(), other.size(), false);
  EXPECT_EQ(t.bias_batches_run(), 2u);
  std::filesystem::remove_all(dir);
}

// unbiased_at_ties runs only when ATTNCHECK_FUZZ_PROPERTIES names it (kernel_target.h: a second batch of T per bias
// input): paper fails it on tied maxima like `unbiased`, and its finding appears only when asked for.
TEST(FuzzTarget, UnbiasedAtTiesRunsOnlyWhenNamed) {
  for (const bool named : {false, true}) {
    SCOPED_TRACE(named ? "named" : "default");
    const std::string dir = testing::TempDir() + "attncheck-fuzz-at-ties-test";
    std::filesystem::remove_all(dir);
    TargetConfig cfg;
    cfg.findings_dir = dir;
    cfg.quiet = true;
    cfg.keep_going = true;
    cfg.kernel = "paper";
    cfg.bias_instances = 64;
    if (named) cfg.properties = {"unbiased", "unbiased_at_ties"};
    const auto bytes = tied_input();
    KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
    int whole = 0, at_ties = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      at_ties += name.find("-unbiased_at_ties-") != std::string::npos;
      whole += name.find("-unbiased-") != std::string::npos;
    }
    EXPECT_EQ(whole, 1);
    EXPECT_EQ(at_ties, named ? 1 : 0);
    std::filesystem::remove_all(dir);
  }
}

// A raw bias failure is confirmed on a fresh sample before the target writes it or aborts (bias_confirmation.h):
// one check at the target's T fails an unbiased kernel about once in 3·10^5 and a campaign makes tens a second.
// fa2's lean on low_rank with one-sign V, dO (−0.049 ulp, at ε) fails the bias suite's check with --seed 35 (T = 64)
// and passes a fresh sample (T = 256): the same case as Cli.FuzzReports…'s `attncheck fuzz` group "not confirmed".
// The bare target wrote it as a finding and aborted.
TEST(FuzzTarget, ABiasFailureAFreshSampleDoesNotConfirmIsNotAFinding) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-confirm-test";
  std::filesystem::remove_all(dir);
  FuzzInput in;
  for (const SuiteEntry& e : suite("bias"))
    if (e.label == "low_rank, one-sign V, dO") in.family = e.family;
  ASSERT_EQ(in.family.generator, "low_rank");
  in.family.seed = reseeded(in.family.seed, 35);
  in.run_bias = true;
  const auto bytes = encode_input(in);
  ASSERT_EQ(decode_input(bytes.data(), bytes.size()).family.describe(), in.family.describe()) << "not the suite's family";
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.kernel = "fa2";
  cfg.properties = {"unbiased"};
  cfg.bias_instances = 64;
  Budget b;
  b.instances = cfg.bias_instances;
  ASSERT_EQ(get_property("unbiased").check(default_registry().get("fa2"), in.family, b).status, Status::kFail)
      << "the raw check no longer fails: this test needs another family";
  const RunResult r = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), /*abort_on_finding=*/true);
  EXPECT_FALSE(r.finding) << r.property << ": " << r.message;
  EXPECT_FALSE(r.skipped) << r.message;
  EXPECT_TRUE(r.finding_path.empty()) << r.finding_path;
  EXPECT_FALSE(std::filesystem::exists(dir)) << "a case was written into " << dir;
  // Said in one line, with the family and both samples' numbers (the raw O mean is about −0.05, the fresh one −0.04).
  EXPECT_EQ(r.unconfirmed.find('\n'), std::string::npos) << r.unconfirmed;
  for (const std::string& part : {std::string("NOT CONFIRMED, not a finding: fa2 fails 'unbiased' on "),
                                  in.family.describe(), std::string(" at T = 64 (O mean -0.05"),
                                  std::string(", T = 256) gives pass (O mean -0.04"), to_hex(bytes.data(), bytes.size())})
    EXPECT_NE(r.unconfirmed.find(part), std::string::npos) << part << " not in: " << r.unconfirmed;
  // ATTNCHECK_FUZZ_CONFIRM_BIAS=0 (`attncheck fuzz`, which confirms each group itself): the raw failure is written.
  cfg.confirm_bias = false;
  const RunResult raw = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(raw.finding) << raw.message;
  EXPECT_TRUE(raw.unconfirmed.empty()) << raw.unconfirmed;
  EXPECT_TRUE(std::filesystem::exists(raw.finding_path)) << raw.finding_path;
  std::filesystem::remove_all(dir);
}

// A bias check that fails on a NaN or infinite output where the exact value is finite ("not finite: ...") has
// found no statistic but one wrong value, on an instance its replay names: a fresh sample need not draw that
// instance again, so it is a finding without confirmation, as a kernel fault is. A kernel exact but for a NaN on
// one instance of the raw sample (none of the fresh one's): before, the target said "NOT CONFIRMED, not a finding"
// and wrote nothing.
TEST(FuzzTarget, ANotFiniteBiasFailureIsAFindingWithoutConfirmation) {
  const auto bytes = tied_input();
  const Family fam = decode_input(bytes.data(), bytes.size()).family;
  const std::uint64_t bad_seed = make_instance(fam, 5).seed;  // instance 5 of the raw sample
  Registry& reg = default_registry();
  struct NanOnOneInstance : Kernel {
    std::uint64_t bad_seed;
    explicit NanOnOneInstance(std::uint64_t s) : bad_seed(s) {}
    const Kernel& oracle() const { return default_registry().get("oracle"); }
    std::string name() const override { return "nan_on_one_instance"; }
    std::string summary() const override { return "test kernel: the oracle, but O is NaN on one instance"; }
    KernelCaps caps() const override { return oracle().caps(); }
    ForwardOutput forward(const Instance& in) const override {
      ForwardOutput o = oracle().forward(in);
      if (in.seed == bad_seed) o.o[0] = std::nan("");
      return o;
    }
    BackwardOutput backward(const Instance& in, const ForwardOutput& f) const override {
      return oracle().backward(in, f);
    }
  };
  if (!reg.find("nan_on_one_instance")) reg.add(std::make_unique<NanOnOneInstance>(bad_seed));
  const std::string dir = testing::TempDir() + "attncheck-fuzz-not-finite-test";
  std::filesystem::remove_all(dir);
  TargetConfig cfg;
  cfg.findings_dir = dir;
  cfg.quiet = true;
  cfg.kernel = "nan_on_one_instance";
  cfg.properties = {"unbiased"};
  const RunResult r = KernelTarget(cfg).run_input(bytes.data(), bytes.size(), false);
  EXPECT_TRUE(r.finding) << r.message << " | " << r.unconfirmed;
  EXPECT_TRUE(r.unconfirmed.empty()) << r.unconfirmed;
  EXPECT_NE(r.message.find("not finite"), std::string::npos) << r.message;
  std::filesystem::remove_all(dir);
}

// A kernel that takes no tiles (oracle here; the CUDA kernels, cuDNN and plugins alike) runs every tiling the same:
// inputs that differ only in the tile bytes are one family, replayed from the memo, and a finding's case names no
// tiles. A kernel that tiles (fa2) runs each tiling afresh.
TEST(FuzzTarget, TileBytesMakeNoNewFamilyForAKernelThatTakesNoTiles) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-tile-bytes-test";
  std::filesystem::remove_all(dir);
  for (const char* kernel : {"oracle", "fa2"}) {
    const TargetConfig cfg = going_config(dir, kernel);
    auto untiled = tied_input();
    untiled[0] &= ~0x10;  // no bias batch
    untiled[5] = untiled[6] = 0;
    auto tiled = untiled;
    tiled[5] = 2, tiled[6] = 1;  // tile_q 2, tile_k 1
    ASSERT_EQ(decode_input(tiled.data(), tiled.size()).family.tile_k, 1);
    KernelTarget t(cfg);
    t.run_input(untiled.data(), untiled.size(), false);
    t.run_input(tiled.data(), tiled.size(), false);
    EXPECT_EQ(t.family_replays(), std::string(kernel) == "oracle" ? 1u : 0u) << kernel;
  }
  std::filesystem::remove_all(dir);
}

// Steps 2 and 4 (instance 0's error and the per-instance properties) run once per family: the same family with
// other value edits replays them, with the same result and the same feedback counters as a fresh target's run.
// The first input carries a NaN edit (its probe records kProbeNanOut), the second none: a replay that stored the
// probe's events with the family's would differ from the fresh run.
TEST(FuzzTarget, FamilyReplayGivesTheFreshRunsResultAndCounters) {
  const std::string dir = testing::TempDir() + "attncheck-fuzz-family-memo-test";
  std::filesystem::remove_all(dir);
  for (const char* kernel : {"paper", "oracle"}) {  // paper: with findings (accurate, ...); oracle: none
    const TargetConfig cfg = going_config(dir, kernel);
    auto plain = tied_input();
    plain[0] &= ~0x10;  // no bias batch: steps 2-4 only
    auto with_nan = plain;
    for (std::uint8_t b : {0x00, 0, 0, 2}) with_nan.push_back(b);  // Q[0][0] = NaN in the probe
    KernelTarget t(cfg);
    clear();
    t.run_input(with_nan.data(), with_nan.size(), false);
    EXPECT_EQ(t.family_replays(), 0u);
    const std::vector<std::uint8_t> first(counters(), counters() + counter_count());
    clear();
    const RunResult again = t.run_input(plain.data(), plain.size(), false);
    EXPECT_EQ(t.family_replays(), 1u) << kernel;
    const std::vector<std::uint8_t> replayed(counters(), counters() + counter_count());
    clear();
    const RunResult fresh = KernelTarget(cfg).run_input(plain.data(), plain.size(), false);
    const std::vector<std::uint8_t> computed(counters(), counters() + counter_count());
    EXPECT_EQ(replayed, computed) << kernel;
    EXPECT_NE(first, computed) << kernel << ": the NaN probe's events should show in the first run only";
    EXPECT_GT(std::count_if(computed.begin(), computed.end(), [](std::uint8_t c) { return c != 0; }), 5) << kernel;
    EXPECT_EQ(again.finding, fresh.finding) << kernel;
    EXPECT_EQ(again.property, fresh.property) << kernel;
    EXPECT_EQ(again.message, fresh.message) << kernel;
    EXPECT_EQ(again.max_ulp_o, fresh.max_ulp_o) << kernel;
    if (std::string(kernel) == "oracle") {
      EXPECT_FALSE(fresh.finding) << fresh.property << ": " << fresh.message;
    } else {
      EXPECT_TRUE(fresh.finding);
    }
  }
  std::filesystem::remove_all(dir);
}

// The memos behind the target's speed (reference/memo.h, memo_kernel.h) return what a fresh call returns.
TEST(FuzzMemo, ReferenceAndInstanceMemosAnswerOnlyBitIdenticalInputs) {
  Family f = default_family("normal");
  f.problem = Problem::of_shape(1, 1, 1, 6, 6, 4);
  const Instance a = make_instance(f, 0);
  Family g = f;
  g.seed += 1;
  const Instance b = make_instance(g, 0);
  EXPECT_NE(a.q, b.q);  // the memo did not hand back f's instance for g
  EXPECT_EQ(make_instance(f, 0).q, a.q);
  const ReferenceForward ra = reference_forward(a);
  Instance a2 = a;
  a2.v[0] = -a2.v[0] == 0 ? 1.0 : -a2.v[0];  // one value changed
  const ReferenceForward r2 = reference_forward(a2);
  EXPECT_NE(r2.o, ra.o);
  const ReferenceForward again = reference_forward(a);
  EXPECT_EQ(again.o, ra.o);
  EXPECT_EQ(again.lse, ra.lse);
  Instance z = a;  // -0 and +0 are different keys (a kernel may tell them apart; the reference must be asked)
  z.q[0] = 0.0;
  Instance nz = z;
  nz.q[0] = -0.0;
  EXPECT_EQ(reference_forward(z).o, reference_forward(nz).o);  // same exact answer, computed twice
  // A backward reuses the forward memo's P and O when it holds the same inputs (dO aside): the same gradients.
  Instance d1 = a, d2 = a;
  d1.d_o[0] = d1.d_o[0] == 1.0 ? 2.0 : 1.0;  // each its own backward memo key
  d2.d_o[1] = d2.d_o[1] == 1.0 ? 2.0 : 1.0;
  reference_forward(b);  // the forward memo holds another instance: computed from scratch
  const ReferenceBackward scratch = reference_backward(d2);
  const ReferenceBackward other = reference_backward(d1);  // (the backward memo now holds d1)
  reference_forward(a);  // the forward memo holds a's inputs
  const ReferenceBackward shared = reference_backward(d2);  // a backward memo miss: P and O from the forward memo
  EXPECT_EQ(shared.dq, scratch.dq);
  EXPECT_EQ(shared.dk, scratch.dk);
  EXPECT_EQ(shared.dv, scratch.dv);
  EXPECT_EQ(shared.delta, scratch.delta);
  EXPECT_NE(other.dq, shared.dq);  // dO still counts
}

// The longest fuzz input (fuzz_input.h) is small enough for the memos: above kMemoMaxElements each property would
// generate it and run its fp64 reference again (1.4-3x the time of a long input).
TEST(FuzzMemo, TheLongestFuzzInputIsMemoised) {
  Instance in;
  in.problem = Problem::of_shape(1, kMaxLongHeads, kMaxLongHeads, kMaxN, kMaxN, kMaxD);
  in.problem.has_mask = in.problem.has_bias = true;
  EXPECT_TRUE(memo::small(in)) << in.problem.describe();
}

// validate_once (reference/memo.h) checks an instance with the last validated one's problem and sizes only where
// its elements differ: it must throw exactly when Instance::validate() throws, for every per-element rule
// (input-format values in Q, K, V, dO; 0/1 mask; fp32, non-NaN, non-+inf bias), and a throw leaves the root.
TEST(FuzzMemo, IncrementalValidationThrowsExactlyWhenValidateThrows) {
  Family f = default_family("random_mask");
  f.problem = Problem::of_shape(1, 2, 1, 5, 6, 4);
  f.problem.has_bias = true;
  const Instance root = make_instance(f, 0);
  ASSERT_TRUE(root.problem.has_mask);
  std::mt19937_64 rng(11);
  const double specials[] = {NAN,    HUGE_VAL, -HUGE_VAL, 0x1p-149, 1.0 + 0x1p-10, 3e38, 1e300,
                             -0.0,   1.5,      0x1p-133,  65280.0,  0x1p127,       -2.0};
  int thrown = 0, passed = 0;
  for (int trial = 0; trial < 600; ++trial) {
    memo::validate_once(root);  // the root (a hit after the first call)
    Instance t = root;
    for (int edit = 0; edit < 1 + trial % 3; ++edit) {
      const int which = static_cast<int>(rng() % 6);
      const double x = rng() % 2 ? specials[rng() % std::size(specials)] : std::bit_cast<double>(rng() >> (rng() % 2 ? 0 : 34));
      std::vector<double>* tensors[] = {&t.q, &t.k, &t.v, &t.d_o, &t.bias};
      if (which == 5) {
        t.mask[rng() % t.mask.size()] = static_cast<std::uint8_t>(rng() % 3 == 0 ? rng() % 256 : rng() % 2);
      } else {
        std::vector<double>& v = *tensors[which];
        v[rng() % v.size()] = x;
      }
    }
    bool full = false, incremental = false;
    try { t.validate(); } catch (const Error&) { full = true; }
    try { memo::validate_once(t); } catch (const Error&) { incremental = true; }
    EXPECT_EQ(full, incremental) << "trial " << trial;
    (full ? thrown : passed) += 1;
  }
  EXPECT_GT(thrown, 100);  // both outcomes exercised
  EXPECT_GT(passed, 100);
  Instance wrong_size = root;  // a size change is never checked incrementally
  wrong_size.q.pop_back();
  EXPECT_THROW(memo::validate_once(wrong_size), Error);
}

class CountingKernel : public Kernel {
 public:
  explicit CountingKernel(const Kernel& b) : base_(b) {}
  std::string name() const override { return base_.name(); }
  std::string summary() const override { return ""; }
  KernelCaps caps() const override { return base_.caps(); }
  ForwardOutput forward(const Instance& in) const override { return ++forwards, base_.forward(in); }
  BackwardOutput backward(const Instance& in, const ForwardOutput& f) const override {
    return ++backwards, base_.backward(in, f);
  }
  mutable int forwards = 0, backwards = 0;

 private:
  const Kernel& base_;
};

TEST(FuzzMemo, MemoKernelRunsOncePerInstanceAndLendsOnlyOnceToDeterminism) {
  CountingKernel k(default_registry().get("fa2"));
  MemoKernel m(k);
  const Instance a = make_instance(default_family("tied_max"), 0);
  const ForwardOutput x = m.forward(a), y = m.forward(a);
  EXPECT_EQ(k.forwards, 1);
  EXPECT_EQ(x.o, y.o);
  EXPECT_EQ(m.trace_of(a), nullptr);  // not a CPU model (the counting wrapper): no trace
  MemoKernel direct(default_registry().get("fa2"));
  EXPECT_EQ(direct.forward(a).o, x.o);
  EXPECT_NE(direct.trace_of(a), nullptr);  // fa2 is: its trace is kept, its outputs are the kernel's
  const auto tiled = direct.with_tiles(3, 5);  // a tiled copy (gcc once dereferenced the moved-from pointer here)
  ASSERT_NE(tiled, nullptr);
  EXPECT_EQ(tiled->forward(a).o, default_registry().get("fa2").with_tiles(3, 5)->forward(a).o);
  m.backward(a, x);
  m.backward(a, x);
  EXPECT_EQ(k.backwards, 1);
  Instance b = a;
  b.seed += 1;  // the seed is part of the key (stochastic kernels read it)
  m.forward(b);
  EXPECT_EQ(k.forwards, 2);
  m.set_lend_once(true);  // `deterministic`: the first call may be the memo, every later one runs afresh
  m.forward(a);
  m.forward(a);
  m.forward(a);
  EXPECT_EQ(k.forwards, 4);
  m.backward(a, x);
  m.backward(a, x);
  EXPECT_EQ(k.backwards, 2);
  m.clear();
  m.forward(a);
  EXPECT_EQ(k.forwards, 5);
}

// The planted ladder (planted_kernel.h): each feature present adds one error level, all K at once throw.
TEST(FuzzTarget, PlantedKernelClimbsOneLevelPerFeature) {
  const Kernel& base = default_registry().get("fa2");
  Family f = default_family("normal");
  f.problem = Problem::of_shape(1, 2, 2, 8, 8, 8);  // short rows, even d and n_q, no GQA, no mask, default scale
  Instance plain = make_instance(f, 0);
  plain.seed &= ~std::uint64_t{1};  // an even seed (feature 5)
  ASSERT_EQ(planted_features(plain) & 0b111111000u, 0u);
  const int c0 = std::popcount(planted_features(plain));
  const auto err = [&](const Kernel& k, const Instance& in) {
    return o_error(k.forward(in).o, reference_forward(in).o, Format::kBF16, in.problem.head_dim).max_ulp;
  };
  const auto planted = make_planted_kernel(base, kPlantedFeatures);
  if (c0 == 0) {
    EXPECT_EQ(err(*planted, plain), err(base, plain));  // no feature, no added error
  }
  // Long rows, odd head dim, odd n_q: three more features, three more levels.
  Family g = f;
  g.problem = Problem::of_shape(1, 2, 2, 7, 30, 7);
  Instance more = make_instance(g, 0);
  more.seed &= ~std::uint64_t{1};
  const unsigned have = planted_features(more);
  EXPECT_EQ(have & 0b010011000u, 0b010011000u);
  const int c = std::popcount(have);
  ASSERT_LT(c, kPlantedFeatures);
  EXPECT_GT(c, c0);
  // O moves by exactly level x ulp(row scale); rounding the moved value to bf16 adds at most one ulp of that
  // scale (|O| <= the row scale), and fa2's own error on the instance (measured) adds at most itself.
  EXPECT_NEAR(err(*planted, more), std::exp2(2.25 + 0.5 * c), 1.0 + err(base, more)) << "features " << have;
  EXPECT_NO_THROW(planted->forward(more));
}

TEST(FuzzTarget, PlantedKernelThrowsExactlyWhenAllFeaturesArePresent) {
  const Kernel& base = default_registry().get("fa2");
  Family f = default_family("normal");
  // batch 2, n_q 7 (odd), n_k 30 (long), d 7 (odd), causal (masked keys), half the default scale (cool)
  f.problem = Problem::of_shape(2, 2, 1, 7, 30, 7, /*causal=*/true);
  f.problem.scale = Problem::default_scale(7) / 2;
  Instance in = make_instance(f, 0);
  std::fill(in.q.begin(), in.q.end(), 8.0);  // every score 64·7·scale ~ 85 (large), all keys alike (tied max)
  std::fill(in.k.begin(), in.k.end(), 8.0);
  in.seed |= 1;  // an odd instance seed
  ASSERT_EQ(planted_features(in), (1u << kPlantedFeatures) - 1u) << "features of the test instance";
  for (int k = 1; k <= kPlantedFeatures; ++k) EXPECT_THROW(make_planted_kernel(base, k)->forward(in), std::logic_error);
  in.problem.scale = Problem::default_scale(7);  // one feature fewer: no failure
  EXPECT_NO_THROW(make_planted_kernel(base, kPlantedFeatures)->forward(in));
  EXPECT_THROW(make_planted_kernel(base, 0), Error);
}

}  // namespace
}  // namespace attncheck::fuzz
