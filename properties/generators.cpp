// generators.cpp — make_instance: instance k of a family, a pure function of (family, k).
//
// Every value is built from a sign, an exponent and a mantissa bit pattern of the input format (never from a
// random real), so it is exactly representable; `quant` keeps only the top mantissa bits, which is how
// shrinking moves values toward small integers and powers of two.
//
// Score structure ("lead" construction, used by the tie, near-tie, sink and negative-row generators):
// every query has q_i0 in [1, 2) (a row left out of the ties by tie_rows < 1 has it negated: its lead keys score
// lowest, and its maximum is an ordinary key's); a tied key's row is [A, 0, ..., 0], so its raw score
// q_i·k_j = q_i0·A exactly, the tied keys are bit-identical rows (every kernel computes bit-identical scores for
// them, whatever its arithmetic). Every other key has k_j0 <= A − G (G = gap / scale, in raw units) and noise in
// dims 1.. bounded by ν with (d−1)·ν² <= G/2, so its raw score is at most q_i0·(A − G) + G/2 <= q_i0·A − G/2: the
// tied keys are the strict row maximum. Near ties: the tied keys' lead is A + n_j·step with distinct small integers
// n_j, and 2·6·step·scale < 2^-9, so every pair of near-tied scaled scores differs by less than 2^-9 but not by zero.
// All products q_i0·k_j0 are exact in fp32 (8-bit by 8-bit significands).
// With masks or causal rows, the guarantee holds for rows that see every tied key. A bias (has_bias: random, added
// to the scores; the fuzzer sets it on any family) breaks the ties and the gap: such a family no longer has them.
// Run the tests: ctest -R family_test
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <numeric>
#include <sstream>

#include "harness/kernel.h"
#include "properties/family.h"
#include "properties/family_internal.h"
#include "properties/property_util.h"
#include "reference/memo.h"

namespace attncheck {

namespace {

struct Rng {
  std::uint64_t seed;
  std::uint64_t counter = 0;
  std::uint64_t next() { return mix64(seed ^ mix64(counter++)); }
  int below(int n) {  // a power of two masks (the same value as %, without the 64-bit division)
    if (n <= 1) return 0;
    const std::uint64_t u = static_cast<std::uint64_t>(n);
    return static_cast<int>((u & (u - 1)) == 0 ? next() & (u - 1) : next() % u);
  }
  double u01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int sign() { return (next() & 1) ? 1 : -1; }
};

// sign · 2^e · (1 + m / 2^mbits): m random with only its top `quant` bits kept. Inlined into the fill loops, where
// everything but the random numbers is the same for every element (the format's constants, the range).
[[gnu::always_inline]] inline double value(Rng& r, Format fmt, int e_lo, int e_hi, int sign, int quant) {
  const FormatInfo fi = format_info(fmt);
  const int mbits = fi.precision - 1;
  const int keep = std::clamp(quant, 0, mbits);
  const int e = e_lo + r.below(e_hi - e_lo + 1);
  std::uint64_t m = r.next() & ((1ull << mbits) - 1);
  m &= ~((1ull << (mbits - keep)) - 1);
  const int s = sign == 0 ? r.sign() : (sign > 0 ? 1 : -1);
  // 1 + m·2^-mbits is exact (m < 2^mbits <= 2^52); times 2^e it stays a normal double for e in fp64's normal
  // exponent range, so the product is exact and equals ldexp (libm's scalbn was ~2% of a fuzz execution).
  const double mant = 1.0 + static_cast<double>(m) * exp2_int(-mbits);
  const double v = s * (e >= -1022 && e <= 1023 ? mant * exp2_int(e) : std::ldexp(mant, e));
  // A normal exponent and a value within the largest finite one: v has at most mbits fraction bits, so it is a
  // value of fmt and rounding it is the identity (skipped: it is most of the generator's time). Otherwise round.
  if (e >= fi.emin && std::fabs(v) <= fi.max_finite) return v;
  return round_to(v, fmt);
}

// The largest value of fmt that is <= x (one step down the bit patterns when round-to-nearest went up).
double round_down(double x, Format fmt) {
  const double r = round_to(x, fmt);
  if (r <= x) return r;
  const std::uint64_t bits = encode(r, fmt);
  const std::uint64_t sign_bit = 1ull << (format_info(fmt).bits - 1);
  if (r == 0.0) return decode(sign_bit | 1u, fmt);  // the negative smallest subnormal
  return decode(r > 0 ? bits - 1 : bits + 1, fmt);
}

int iparam(const Family& f, const char* k, double fallback) { return static_cast<int>(std::lround(f.param(k, fallback))); }

// lead_layout's tie branch: no `level` (negative rows) and ties >= 1. It reads ties, ties_min, tie_level, near and
// (contiguous ties) sink_pos.
bool reads_ties(const Family& f) { return !f.params.count("level") && f.param("ties", 0) >= 1; }

// A shape-limited count read at most as its limit (above it the generator reads the limit), at least as its
// domain's least value (0 for pad, first_masked and sink_pos, else 1): one rule for make_instance, lead_layout,
// tie_positions and shape_limit (family_internal.h).
int acting_count(const Family& f, const char* key, int fallback) {
  // param_domain's least values, read once (an integer domain's does not depend on the format): this runs several
  // times per instance and tie slice, and param_domain builds its description string on every call.
  static const std::map<std::string, int> kLeast = [] {
    std::map<std::string, int> m;
    for (const char* k : {"pad", "first_masked", "rank", "ties", "ties_min", "sink_pos"})
      m[k] = static_cast<int>(param_domain(k, Format::kBF16).value().lo);
    return m;
  }();
  const int lo = kLeast.at(key);
  const int v = std::max(lo, iparam(f, key, fallback));
  const std::optional<ShapeLimit> limit = shape_limit(f, key);
  return limit ? std::max(lo, std::min(v, limit->most)) : v;
}

struct ValueSpec {
  int sign = 0;
  bool binade = false;
  int exp = 0;
};

void fill_values(std::vector<double>& t, Rng& r, const Family& f, const ValueSpec& vs) {
  const Format fmt = f.problem.input_format;
  const int erange = std::max(0, iparam(f, "erange", 3));
  const int quant = iparam(f, "quant", 7);
  for (double& x : t)
    x = vs.binade ? value(r, fmt, vs.exp, vs.exp, vs.sign, quant) : value(r, fmt, -erange, 0, vs.sign, quant);
}

// Rows of one (b, head) slice: [rows][d] at `base`, each Σ_t c_it B_t with small-integer-and-half entries.
void fill_low_rank(std::vector<double>& t, Rng& r, std::size_t base, int rows, int d, int rank) {
  static const double kBasis[] = {-1, -0.5, 0, 0.5, 1};
  static const double kCoef[] = {-2, -1, 1, 2};
  std::vector<double> b(std::size_t(rank) * d);
  for (double& x : b) x = kBasis[r.below(5)];
  for (int i = 0; i < rows; ++i)
    for (int c = 0; c < d; ++c) t[base + std::size_t(i) * d + c] = 0;
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < rank; ++k) {
      const double c = kCoef[r.below(4)];
      for (int col = 0; col < d; ++col) t[base + std::size_t(i) * d + col] += c * b[std::size_t(k) * d + col];
    }
}

// Every row of the slice = the slice's first row, with about d/4 + 1 elements moved by up to `eps` ulps.
void make_near_duplicates(std::vector<double>& t, Rng& r, std::size_t base, int rows, int d, int eps, Format fmt) {
  for (int i = 1; i < rows; ++i) {
    for (int c = 0; c < d; ++c) t[base + std::size_t(i) * d + c] = t[base + c];
    for (int n = 0; n < d / 4 + 1; ++n) {
      double& x = t[base + std::size_t(i) * d + r.below(d)];
      const int k = r.below(2 * eps + 1) - eps;
      x = round_to(x + k * ulp(x, fmt), fmt);
    }
  }
}

}  // namespace

LeadLayout lead_layout(const Family& f) {
  const Problem& p = f.problem;
  LeadLayout L;
  const Format fmt = p.input_format;
  const int d = p.head_dim;
  if (f.params.count("level")) {  // negative rows: every key at −level (scaled)
    L.active = true;
    L.ties = 0;
    const double g = round_to(std::max(f.param("level", 8), 1e-3) / p.scale, fmt);
    L.gap_raw = g;
    L.other_lead = -g;
    L.noise = d > 1 ? std::sqrt(g / (2.0 * (d - 1))) : 0;
  } else if (reads_ties(f)) {
    L.active = true;
    L.near = f.param("near", 0) != 0;
    L.ties = acting_count(f, "ties", 2);
    const int sgn = iparam(f, "tie_sign", 1);
    const double level = std::fabs(f.param("tie_level", 2));
    if (L.near) {
      // 2·6·step·scale < 2^-9: the widest near-tie spread (n in -3..3, times q_i0 < 2) stays below 2^-9.
      L.step = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(0x1.0p-9 / (12.0 * p.scale)))) - 1);
      L.a = sgn == 0 ? 0.0 : sgn * L.step * 64;  // A's ulp (2^-7 A) is below step: A + n·step is exact
    } else {
      L.a = sgn == 0 ? 0.0 : round_to(sgn * level, fmt);
    }
    L.gap_raw = round_to(std::max(f.param("gap", 8), 1e-3) / p.scale, fmt);
    L.other_lead = round_down(L.a - L.gap_raw, fmt);
    L.noise = d > 1 ? std::sqrt(L.gap_raw / (2.0 * (d - 1))) : 0;
  }
  if (L.noise > 0) L.noise = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(L.noise))));  // power of two
  return L;
}

namespace {
Instance make_instance_uncached(const Family& f, std::uint64_t index) {
  validate_family(f);
  Instance in;
  in.problem = f.problem;
  Problem& p = in.problem;
  p.has_mask = f.param("mask", 0) != 0;
  const Format fmt = p.input_format;
  const int d = p.head_dim;
  std::uint64_t gh = 0;
  for (char c : f.generator) gh = mix64(gh ^ static_cast<unsigned char>(c));
  Rng r{mix64(f.seed * 0x9e3779b97f4a7c15ull ^ mix64(index) ^ gh)};
  in.seed = r.next();

  in.q.assign(p.q_size(), 0.0);
  in.k.assign(p.kv_size(), 0.0);
  in.v.assign(p.kv_size(), 0.0);
  in.d_o.assign(p.q_size(), 0.0);
  const ValueSpec noise{};
  fill_values(in.q, r, f, noise);
  fill_values(in.k, r, f, noise);
  const ValueSpec vspec{iparam(f, "v_sign", 0), f.param("v_binade", 0) != 0, iparam(f, "v_exp", 0)};
  fill_values(in.v, r, f, vspec);
  fill_values(in.d_o, r, f, {iparam(f, "do_sign", 0), f.param("do_binade", 0) != 0, iparam(f, "do_exp", 0)});

  const std::string& g = f.generator;
  if (g == "low_rank") {
    const int rank = acting_count(f, "rank", 2);
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < p.heads_q; ++h) fill_low_rank(in.q, r, p.q_at(b, h, 0, 0), p.n_q, d, rank);
      for (int h = 0; h < p.heads_kv; ++h) {
        fill_low_rank(in.k, r, p.kv_at(b, h, 0, 0), p.n_k, d, rank);
        if (vspec.sign == 0 && !vspec.binade) fill_low_rank(in.v, r, p.kv_at(b, h, 0, 0), p.n_k, d, rank);
      }
    }
  } else if (g == "near_duplicate") {
    const int eps = std::clamp(iparam(f, "eps", 1), 0, 64);
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < p.heads_q; ++h) make_near_duplicates(in.q, r, p.q_at(b, h, 0, 0), p.n_q, d, eps, fmt);
      for (int h = 0; h < p.heads_kv; ++h) {
        make_near_duplicates(in.k, r, p.kv_at(b, h, 0, 0), p.n_k, d, eps, fmt);
        make_near_duplicates(in.v, r, p.kv_at(b, h, 0, 0), p.n_k, d, eps, fmt);
      }
    }
  } else if (g == "large_logits") {
    const int mag = iparam(f, "log2_mag", 60);
    const int erange = std::max(0, iparam(f, "erange", 3));
    const int quant = iparam(f, "quant", 7);
    for (double& x : in.q) x = value(r, fmt, mag - erange, mag, 0, quant);
    for (double& x : in.k) x = value(r, fmt, mag - erange, mag, 0, quant);
  } else if (g == "constant_v") {
    const double c = round_to(f.param("c", 1.5), fmt);
    std::fill(in.v.begin(), in.v.end(), c);
  }

  const LeadLayout L = lead_layout(f);
  if (L.active) {
    // Noise in dims 1.. of Q and of the non-tied keys: |x| < ν, so (d−1)·ν² <= G/2 bounds their dot product.
    const int e_hi = static_cast<int>(std::log2(L.noise > 0 ? L.noise : 1.0)) - 1;
    const int erange = std::max(0, iparam(f, "erange", 3));
    const int quant = iparam(f, "quant", 7);
    const double tie_rows = L.ties > 0 ? f.param("tie_rows", 1) : 1;  // the fraction of rows the lead keys top
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.n_q; ++i) {
          // q_i0 in [1, 2): every row's tied score q_i0·A differs (so a kernel's rounding of p̄ or l at the
          // tie is not the same deterministic error in every row), and q_i0 >= 1 keeps the gap guarantee.
          in.q[p.q_at(b, h, i, 0)] = value(r, fmt, 0, 0, 1, quant);
          // tie_rows < 1: a row left out of the ties gets q_i0 negated, so the lead keys score lowest in it and its
          // maximum is an ordinary key (the noise decides which, generally one). Drawn only then: a family
          // without tie_rows keeps its instances bit for bit.
          if (tie_rows < 1 && !(r.u01() < tie_rows)) in.q[p.q_at(b, h, i, 0)] = -in.q[p.q_at(b, h, i, 0)];
          for (int c = 1; c < d; ++c) in.q[p.q_at(b, h, i, c)] = value(r, fmt, e_hi - erange, e_hi, 0, quant);
        }
      for (int h = 0; h < p.heads_kv; ++h) {
        const std::vector<int> tied = tie_positions(f, index, b, h);
        for (int j = 0; j < p.n_k; ++j) {
          const auto at = std::find(tied.begin(), tied.end(), j);
          if (at != tied.end()) {
            const int slot = static_cast<int>(at - tied.begin());
            static const int kNear[] = {0, 1, -1, 2, -2, 3, -3};  // distinct, |n_a − n_b| <= 6
            in.k[p.kv_at(b, h, j, 0)] = L.near ? L.a + kNear[slot] * L.step : L.a;
            for (int c = 1; c < d; ++c) in.k[p.kv_at(b, h, j, c)] = 0.0;
          } else {
            in.k[p.kv_at(b, h, j, 0)] = L.other_lead;
            for (int c = 1; c < d; ++c) in.k[p.kv_at(b, h, j, c)] = value(r, fmt, e_hi - erange, e_hi, 0, quant);
          }
        }
      }
    }
  }

  if (p.has_mask) {
    const int kind = iparam(f, "mask", 0);
    in.mask.assign(p.scores_size(), 1);
    const int off = p.n_k - p.n_q;
    // The kinds' parameters, read once (the same values the per-element reads gave).
    const int pad = acting_count(f, "pad", 1);
    const int window = std::max(1, iparam(f, "window", 4));
    const int masked_every = std::max(1, iparam(f, "masked_every", 3));
    const int first_masked = acting_count(f, "first_masked", 8);
    const double keep_p = f.param("keep", 0.5);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.n_q; ++i)
          for (int j = 0; j < p.n_k; ++j) {
            bool keep = true;
            switch (kind) {
              case 1: keep = j < p.n_k - pad; break;
              case 2: keep = j <= i + off && j > i + off - window; break;
              case 3: keep = i % masked_every != 0; break;
              case 4: keep = j >= first_masked; break;
              case 5: keep = r.u01() < keep_p; break;
              default: break;
            }
            in.mask[p.score_at(b, h, i, j)] = keep ? 1 : 0;
          }
  }
  if (p.has_bias) {
    in.bias.resize(p.scores_size());
    const int quant = iparam(f, "quant", 7);
    for (double& x : in.bias) x = value(r, Format::kBF16, -3, 0, 0, quant);  // bf16 values are fp32 values
  }
  memo::validate_once(in);  // = in.validate(); the reference then skips validating the same instance again
  return in;
}
}  // namespace

// A one-entry memo per thread (reference/memo.h): the fuzz target checks ten properties on instance 0 of one
// family, and each asks make_instance for it. Same family (every field, compared exactly) and index give the
// same instance, so it is built once. Errors are not memoised; large instances are not kept.
struct FamilyFields {  // Family's fields as compared below: a new field changes the size, and the build says so
  std::string generator;
  Problem problem;
  int tile_q, tile_k;
  std::map<std::string, double> params;
  std::uint64_t seed;
};
static_assert(sizeof(Family) == sizeof(FamilyFields), "Family changed: update make_instance's memo key");

Instance make_instance(const Family& f, std::uint64_t index) { return *make_instance_shared(f, index); }

std::shared_ptr<const Instance> make_instance_shared(const Family& f, std::uint64_t index) {
  using Key = std::pair<Family, std::uint64_t>;
  auto& m = memo::OneEntry<struct MakeInstanceTag, Key, std::shared_ptr<const Instance>>::mine();
  auto same_family = [&](const Key& k) {
    const Family& key = k.first;
    return k.second == index && key.seed == f.seed && key.tile_q == f.tile_q && key.tile_k == f.tile_k &&
           key.generator == f.generator && memo::same_problem(key.problem, f.problem) &&
           key.params.size() == f.params.size() &&
           std::equal(key.params.begin(), key.params.end(), f.params.begin(), [](const auto& a, const auto& b) {
             return a.first == b.first && std::memcmp(&a.second, &b.second, sizeof(double)) == 0;
           });
  };
  if (const auto* v = m.find(same_family)) {
    memo::adopt_shared(*v);  // the memos below may answer for it by identity (memo.h)
    return *v;
  }
  auto in = std::make_shared<const Instance>(make_instance_uncached(f, index));  // validated there
  if (memo::small(*in)) m.remember(Key{f, index}, in);
  memo::adopt_shared(in);
  return in;
}

std::vector<int> tie_positions(const Family& f, std::uint64_t index, int b, int hkv) {
  const LeadLayout L = lead_layout(f);
  const Problem& p = f.problem;
  std::vector<int> out;
  if (!L.active || L.ties <= 0) return out;
  Rng r{mix64(f.seed ^ mix64(index * 1000003ull + std::uint64_t(b) * 131 + hkv) ^ 0x7469657373ull)};
  // The count varies in [ties_min, ties] per (instance, b, kv head): with a fixed count every row's sum
  // l ≈ count would round (and its log would round) the same way in every instance, a deterministic error
  // that the bias statistic would rightly flag but that has nothing to do with ties.
  const int lo = acting_count(f, "ties_min", 2);
  const int n = lo + r.below(L.ties - lo + 1);
  if (f.param("tie_spread", 1) != 0) {
    std::vector<int> all(p.n_k);
    std::iota(all.begin(), all.end(), 0);
    for (int t = 0; t < n; ++t) std::swap(all[t], all[t + r.below(p.n_k - t)]);
    out.assign(all.begin(), all.begin() + n);
  } else {
    // acting_count's limit is n_k − ties_min, the most for every count; a larger count moves the keys up to fit.
    const int start = f.params.count("sink_pos") ? std::min(acting_count(f, "sink_pos", 0), p.n_k - n)
                                                 : r.below(p.n_k - n + 1);
    for (int t = 0; t < n; ++t) out.push_back(start + t);
  }
  return out;
}

std::optional<ShapeLimit> shape_limit(const Family& f, const std::string& key) {
  const Problem& p = f.problem;
  const bool tied = reads_ties(f);
  const int mask = iparam(f, "mask", 0);  // the mask kinds read their extents (make_instance)
  if ((key == "pad" && mask == 1) || (key == "first_masked" && mask == 4)) return ShapeLimit{p.n_k - 1, "n_k - 1"};
  if (key == "rank" && f.generator == "low_rank") return ShapeLimit{std::max(1, p.head_dim), "head_dim"};
  if (key == "ties" && tied) {
    if (f.param("near", 0) != 0 && p.n_k > 7) return ShapeLimit{7, "near ties' most"};
    return ShapeLimit{p.n_k, "n_k"};
  }
  if (key == "ties_min" && tied) return ShapeLimit{acting_count(f, "ties", 2), "ties"};
  if (key == "sink_pos" && tied && f.param("tie_spread", 1) == 0 && f.params.count("sink_pos"))
    return ShapeLimit{std::max(0, p.n_k - acting_count(f, "ties_min", 2)), "n_k - ties_min"};
  return std::nullopt;
}

std::vector<ClampedParam> clamped_params(const Family& f) {
  std::vector<ClampedParam> out;
  const Format fmt = f.problem.input_format;
  const bool tied = reads_ties(f);
  for (const auto& [key, value] : f.params) {
    if (const std::optional<ShapeLimit> limit = shape_limit(f, key); limit && std::lround(value) > limit->most) {
      const int acting = acting_count(f, key.c_str(), 0);
      out.push_back({key, value, double(acting), "at most " + std::to_string(acting) + ": " + limit->why});
      continue;
    }
    // An integer parameter's fraction: the generator reads the nearest integer (iparam), so ties = 2.5 made ties = 3
    // and was reported, named and saved as 2.5 (a review, session 39).
    if (const std::optional<ParamDomain> d = param_domain(key, fmt);
        d && d->kind == ParamDomain::Kind::kInteger && std::isfinite(value) && std::round(value) != value) {
      out.push_back({key, value, std::round(value), "an integer: the generator reads the nearest"});
      continue;
    }
    // Values the generator rounds to the input format: V = c (constant_v), the tied score A = ±|tie_level| (exact ties,
    // a nonzero sign). The sign and the magnitude are as given; only the rounding acts.
    const bool rounded = (key == "c" && f.generator == "constant_v") ||
                         (key == "tie_level" && tied && f.param("near", 0) == 0 && iparam(f, "tie_sign", 1) != 0);
    if (rounded && round_to(value, fmt) != value)
      out.push_back({key, value, round_to(value, fmt), std::string("the nearest ") + format_name(fmt) + " value"});
  }
  return out;
}

Family with_acting_params(Family f) {
  for (const ClampedParam& c : clamped_params(f)) f.params[c.key] = c.acting;
  return f;
}

namespace {

// Parameter domains (family.cpp lists what each parameter means). Integer parameters are read rounded to the
// nearest integer (iparam), so they are checked rounded: 4.2 ties is 4 ties, as the generator reads it (a case file
// may hold such a value; `check --family` refuses one, clamped_params, and the fuzzer's decoder rounds). Flags must
// be exactly 0 or 1 (the generators read them as "!= 0", so 0.3 would silently mean 1). Shape-dependent limits
// (pad < n_k, rank <= head_dim, ...) are not errors: the generators clamp them to the shape, so that shrinking the
// shape keeps a family valid.
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

constexpr double kNoLimit = 2147483647.0;  // INT_MAX: counts have no upper limit of their own (clamped to the shape)

// Every parameter a generator reads, numbered for param_domain's table.
const std::map<std::string, int>& param_index() {
  static const std::map<std::string, int> kIndex = {
      {"quant", 0},   {"erange", 1},     {"v_sign", 2},     {"do_sign", 3},       {"v_binade", 4},
      {"do_binade", 5}, {"v_exp", 6},    {"do_exp", 7},     {"mask", 8},          {"pad", 9},
      {"window", 10}, {"masked_every", 11}, {"first_masked", 12}, {"keep", 13},  {"rank", 14},
      {"eps", 15},    {"ties", 16},      {"ties_min", 17},  {"tie_sign", 18},     {"tie_spread", 19},
      {"near", 20},   {"tie_level", 21}, {"gap", 22},       {"level", 23},        {"sink_pos", 24},
      {"log2_mag", 25}, {"c", 26},         {"tie_rows", 27}};
  return kIndex;
}

}  // namespace

std::vector<std::string> family_param_names() {
  std::vector<std::string> names;
  for (const auto& [name, index] : param_index()) names.push_back(name);
  return names;
}

std::optional<ParamDomain> param_domain(const std::string& key, Format input_format) {
  const FormatInfo fi = format_info(input_format);
  using K = ParamDomain::Kind;
  auto integer = [](double lo, double hi, const char* m) { return ParamDomain{K::kInteger, lo, hi, false, m}; };
  auto flag = [](const char* m) { return ParamDomain{K::kFlag, 0, 1, false, m}; };
  auto real = [](double lo, bool open, double hi, const char* m) { return ParamDomain{K::kReal, lo, hi, open, m}; };
  // Binade exponents within ±32 (and the input format's normal range: fp16 [-14, 15]): a V value times a dO
  // value is then below 2^66 in magnitude, so the backward pass's dP = dO·Vᵀ and the gradients stay far inside
  // fp32's and bf16's range (2^128) for any head_dim and length below 2^30, and above 2^-66 (no underflow).
  // Larger exponents make the exact gradients overflow the output format: that exercises the reference's and
  // the rule's overflow handling (accuracy.h), not a kernel's softmax, and is reached by explicit inputs.
  const double e_lo = std::max(-32, fi.emin), e_hi = std::min(32, fi.emax);
  const auto it = param_index().find(key);
  if (it == param_index().end()) return std::nullopt;
  switch (it->second) {
    case 0: return integer(0, fi.precision - 1, "mantissa bits kept, at most the input format's");
    case 1: return integer(0, -fi.emin, "noise exponents in [-erange, 0], normal numbers of the input format");
    case 2: return integer(-1, 1, "0 mixed, +1/-1 one sign");
    case 3: return integer(-1, 1, "0 mixed, +1/-1 one sign");
    case 4: return flag("1 = every V element in the binade [2^v_exp, 2^(v_exp+1))");
    case 5: return flag("1 = every dO element in the binade [2^do_exp, 2^(do_exp+1))");
    case 6: return integer(e_lo, e_hi, "the V binade's exponent; |e| <= 32 keeps products of V and dO inside fp32");
    case 7: return integer(e_lo, e_hi, "the dO binade's exponent; |e| <= 32 keeps products of V and dO inside fp32");
    case 8: return integer(0, 5, "0 none, 1 padding, 2 sliding window, 3 masked rows, 4 first keys, 5 random");
    case 9: return integer(0, kNoLimit, "masked keys at the end; n_k or more acts as n_k - 1");
    case 10: return integer(1, kNoLimit, "visible keys per row");
    case 11: return integer(1, kNoLimit, "every masked_every-th row fully masked");
    case 12: return integer(0, kNoLimit, "masked keys at the start; n_k or more acts as n_k - 1");
    case 13: return real(0.0, false, 1.0, "keep probability");
    case 14: return integer(1, kNoLimit, "rank; above head_dim acts as head_dim");
    case 15: return integer(0, 64, "ulps of perturbation");
    case 16: return integer(1, kNoLimit, "tied keys; above n_k (near ties: 7) acts as that");
    case 17: return integer(1, kNoLimit, "fewest tied keys; above ties acts as ties");
    case 18: return integer(-1, 1, "sign of the tied maximum: +1, -1, or 0 for a maximum of exactly 0");
    case 19: return flag("1 = tied keys at random positions, 0 = contiguous");
    case 20: return flag("1 = near ties instead of exact ties");
    case 21: return real(0.0, false, fi.max_finite, "magnitude of the tied raw score; tie_sign gives its sign");
    case 22: return real(0.0, true, fi.max_finite, "scaled distance below the tied maximum");
    case 23: return real(0.0, true, fi.max_finite, "every scaled score about -level");
    case 24: return integer(0, kNoLimit, "the sink key; past the end acts as the last start");
    case 25: return integer(0, fi.emax, "|Q|, |K| about 2^log2_mag, finite in the input format");
    case 27: return real(0.0, false, 1.0, "fraction of rows whose maximum is the tied keys (each row drawn)");
    default: return real(-fi.max_finite, false, fi.max_finite, "the constant V value, finite in the input format");
  }
}

bool in_domain(const ParamDomain& d, double v) {
  if (!std::isfinite(v)) return false;
  switch (d.kind) {
    case ParamDomain::Kind::kFlag: return v == 0.0 || v == 1.0;
    case ParamDomain::Kind::kInteger: {
      const double r = std::round(v);  // as iparam reads it (lround: halves away from zero)
      return r >= d.lo && r <= d.hi;
    }
    case ParamDomain::Kind::kReal: return (d.lo_open ? v > d.lo : v >= d.lo) && v <= d.hi;
  }
  return false;
}

double clamp_to_domain(const ParamDomain& d, double v) {
  const double lo = d.lo_open ? std::nextafter(d.lo, HUGE_VAL) : d.lo;
  if (std::isnan(v)) return d.kind == ParamDomain::Kind::kFlag ? 0.0 : lo;
  switch (d.kind) {
    case ParamDomain::Kind::kFlag: return v != 0.0 ? 1.0 : 0.0;
    case ParamDomain::Kind::kInteger: return std::clamp(std::round(std::clamp(v, -1e18, 1e18)), d.lo, d.hi);
    case ParamDomain::Kind::kReal: return std::clamp(v, lo, d.hi);
  }
  return lo;
}

std::string describe_domain(const ParamDomain& d) {
  switch (d.kind) {
    case ParamDomain::Kind::kFlag: return "0 or 1 (" + d.meaning + ")";
    case ParamDomain::Kind::kInteger:
      return "an integer in [" + num(d.lo) + ", " + num(d.hi) + "] (" + d.meaning + ")";
    case ParamDomain::Kind::kReal:
      return std::string(d.lo_open ? "(" : "[") + num(d.lo) + ", " + num(d.hi) + "] (" + d.meaning + ")";
  }
  return "";
}

void validate_family(const Family& f) {
  default_family(f.generator);  // throws for an unknown generator
  f.problem.validate();
  if (f.tile_q < 0 || f.tile_k < 0 || f.tile_q > Kernel::kMaxTile || f.tile_k > Kernel::kMaxTile)
    throw Error("family: tiles must be in [0, " + std::to_string(Kernel::kMaxTile) + "] (0 = the kernel's own), got tile_q " +
                std::to_string(f.tile_q) + ", tile_k " + std::to_string(f.tile_k));  // ("0x1000000" read as hex)
  for (const auto& [k, v] : f.params)
    if (!std::isfinite(v)) throw Error("family: parameter '" + k + "' is not finite");
  if (f.problem.input_format != Format::kBF16 && f.problem.input_format != Format::kF16)
    throw Error("family: generators produce bf16 or fp16 inputs only");
  for (const auto& [k, v] : f.params) {
    const std::optional<ParamDomain> d = param_domain(k, f.problem.input_format);
    // A name no generator reads (a case file's typo, "tiess") would be ignored and the default used silently.
    if (!d)  // the known ones named (it pointed at a source file)
      throw Error("family " + f.generator + ": unknown parameter '" + k + "' (parameters: " +
                  comma_list(family_param_names()) + ")");
    if (!in_domain(*d, v))
      throw Error("family " + f.generator + ": parameter '" + k + "' = " + num(v) + " is outside its domain: " +
                  describe_domain(*d));
  }
  // The lead construction's raw values must be finite in the input format (a huge gap or level divided by a
  // small scale can overflow fp16).
  const LeadLayout L = lead_layout(f);
  if (L.active && !(std::isfinite(L.a) && std::isfinite(L.gap_raw) && std::isfinite(L.other_lead)))
    throw Error("family " + f.generator + ": tie_level, gap or level divided by the scale overflows the input format");
  // The scaled gap (or level) in the input format: divided by a large scale it can round to 0 (gap 1e-3 at scale
  // 2^127 is 2^-137, below bf16's least subnormal 2^-133), and the family would have no gap (or level) at all.
  if (L.active && L.gap_raw == 0) {
    const char* what = f.params.count("level") ? "level" : "gap";
    throw Error("family " + f.generator + ": " + what + " " + num(f.param(what, 8)) + " divided by the scale " +
                num(f.problem.scale) + " rounds to 0 in " + format_name(f.problem.input_format) +
                ": raise the " + what + " or lower the scale");
  }
  // The other keys lead by A − gap: where the gap is below half an fp64 ulp of A (tie_level ≳ 2^58 at gap 8), A − gap
  // is A, every key ties and the family has no gap at all (a helper's probe: tie_level 5e17, 32 of 32 keys tied).
  if (L.active && L.ties > 0 && !(L.other_lead < L.a))
    throw Error("family " + f.generator + ": gap " + num(f.param("gap", 8)) + " divided by the scale " +
                num(f.problem.scale) + " (" + num(L.gap_raw) + ") is lost below tie_level " +
                num(std::fabs(f.param("tie_level", 2))) +
                " (A − gap rounds to A): the other keys would tie too; lower the tie_level or the scale");
}

}  // namespace attncheck
