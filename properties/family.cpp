// family.cpp — the catalogue of generators (names, summaries, default parameters and shapes), Family
// descriptions and the Family <-> JSON mapping. Instance construction lives in generators.cpp.
//
// Invariants: every generator's default family validates and generates; family_from_json(family_to_json(f))
// == f field by field; unknown generators and bad fields throw attncheck::Error naming them.
// Run the tests: ctest -R family_test
#include "properties/family.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace attncheck {

namespace {

using Params = std::map<std::string, double>;

// Parameters every generator understands (generators.cpp reads them), with their domains (validate_family in
// generators.cpp enforces them: a value outside throws attncheck::Error naming the parameter and its domain;
// integer parameters are read, and checked, rounded to the nearest integer; flags must be exactly 0 or 1):
//   quant     mantissa bits kept in generated noise values (7 = full bf16, 0 = powers of two only); integer in
//             [0, mantissa bits of the input format] (bf16 7, fp16 10)
//   erange    noise values have exponents in [-erange, 0] (|x| in [2^-erange, 2)); integer in [0, -emin]
//             (bf16 126, fp16 14: values stay normal numbers of the input format)
//   v_sign    0 = mixed signs, +1/-1 = every V element of that sign; integer in {-1, 0, 1}
//   v_binade  1 = every V element in one binade [2^v_exp, 2^(v_exp+1)) (bias-amplifying), 0 = noise exponents;
//             flag
//   v_exp     the binade's exponent when v_binade = 1; integer in [-32, 32] (fp16: [-14, 15]): products of V
//             and dO values stay inside fp32's range in the backward pass (generators.cpp derives it)
//   do_sign, do_binade, do_exp   the same for dO, with the same domains
//   mask      0 none, 1 padding (last `pad` keys), 2 sliding window (`window` keys ending at the causal
//             diagonal), 3 fully masked rows (every `masked_every`-th row), 4 first tile masked (the first
//             `first_masked` keys of every row), 5 random keep-mask with keep probability `keep`; integer in
//             [0, 5]. pad, first_masked >= 0 (n_k or more acts as n_k - 1); window, masked_every >= 1;
//             keep in [0, 1]
// Generator-specific parameters and their domains: ties, ties_min >= 1 (more than n_k acts as n_k; near ties
// at most 7); tie_sign in {-1, 0, 1}; tie_spread, near: flags; tie_level >= 0; gap, level > 0 (and, divided
// by the scale, finite and nonzero in the input format; the scaled gap not lost below tie_level: A − gap < A in fp64);
// tie_rows in [0, 1] (the fraction of rows, each drawn, whose maximum is the tied keys; the others' maximum is an
// ordinary key; absent = 1, every row); sink_pos >= 0; rank >= 1 (above head_dim acts as head_dim); eps in
// [0, 64]; log2_mag in [0, emax of the input format]; c finite in the input format.
Params common() {
  return {{"quant", 7}, {"erange", 3}, {"v_sign", 0}, {"v_binade", 0}, {"v_exp", 0},
          {"do_sign", 0}, {"do_binade", 0}, {"do_exp", 0}, {"mask", 0}};
}

Params with(Params base, const Params& extra) {
  for (const auto& [k, v] : extra) base[k] = v;
  return base;
}

// Bias-amplifying values: V and dO one-sign, one binade (mechanism.md, steps 2-4).
const Params kBiasValues = {{"v_sign", 1}, {"v_binade", 1}, {"do_sign", 1}, {"do_binade", 1}};

struct Entry {
  GeneratorInfo info;
  Problem shape;
  int tile_q = 0, tile_k = 0;
};

Problem shape(int b, int hq, int hkv, int nq, int nk, int d, bool causal = false) {
  return Problem::of_shape(b, hq, hkv, nq, nk, d, causal);
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = [] {
    const Params c = common();
    const Problem small = shape(1, 2, 2, 16, 32, 16);
    std::vector<Entry> e;
    auto add = [&](const std::string& name, const std::string& summary, Params p, Problem s, int tq = 0,
                   int tk = 0) { e.push_back({{name, summary, std::move(p)}, s, tq, tk}); };
    add("normal", "control: independent bf16 noise in Q, K, V, dO", c, small);
    add("low_rank",
        "Q, K (and V unless v_sign or v_binade set it) of rank `rank` (small-integer bases and coefficients: exact)",
        with(c, {{"rank", 2}}), small);
    add("near_duplicate",
        "rows of Q, K, V copy one row, with d/4 + 1 drawn elements each moved up to `eps` ulps (a repeat moves further)",
        with(c, {{"eps", 1}}), small);
    add("tied_max",
        "ties_min (2) to `ties` keys share exactly the top score of every row; others at least `gap`/2 (scaled) below",
        with(with(c, kBiasValues), {{"ties", 4}, {"gap", 8}, {"tie_level", 2}, {"tie_sign", 1}, {"tie_spread", 1}}),
        small);
    add("tied_max_flat", "tied_max with a flat gap (other keys close below the tied maximum)",
        with(with(c, kBiasValues), {{"ties", 4}, {"gap", 0.5}, {"tie_level", 2}, {"tie_sign", 1}, {"tie_spread", 1}}),
        small);
    add("tied_max_negative", "tied_max with a negative tied maximum (the fix's m = 0 branch)",
        with(with(c, kBiasValues), {{"ties", 4}, {"gap", 8}, {"tie_level", 2}, {"tie_sign", -1}, {"tie_spread", 1}}),
        small);
    add("max_zero", "ties_min (2) to `ties` keys share a row maximum of exactly 0; all other scores negative",
        with(with(c, kBiasValues), {{"ties", 4}, {"gap", 8}, {"tie_level", 0}, {"tie_sign", 0}, {"tie_spread", 1}}),
        small);
    add("near_tie", "ties_min (2) to `ties` keys within 2^-9 of the row maximum (p̄ rounds to 1 in bf16) but distinct",
        with(with(c, kBiasValues), {{"ties", 4}, {"gap", 8}, {"tie_sign", 1}, {"tie_spread", 1}, {"near", 1}}),
        small);
    add("negative_rows", "every score of every row negative (about -`level` scaled)",
        with(c, {{"level", 8}}), small);
    add("very_negative_rows", "every score about -`level` (huge): finite sentinels and -inf handling",
        with(c, {{"level", 1e9}}), small);
    add("large_logits", "|Q|, |K| about 2^log2_mag: Q·Kᵀ near (or, at 64+, past) fp32 overflow",
        with(c, {{"log2_mag", 60}}), small);
    add("sink", "one key (`sink_pos`) at least `gap`/2 (scaled) above every other: near one-hot attention",
        with(c, {{"ties", 1}, {"gap", 30}, {"tie_level", 2}, {"tie_sign", 1}, {"tie_spread", 0}, {"sink_pos", 0}}),
        small);
    add("constant_v", "V = c·1 (the exact output is c)", with(c, {{"c", 1.5}}), small);
    add("causal", "causal (bottom-right) mask, n_q = n_k", c, shape(1, 2, 2, 24, 24, 16, true), 8, 8);
    add("causal_cross", "causal with n_q < n_k (bottom-right alignment)", c, shape(1, 1, 1, 9, 40, 16, true), 8, 8);
    add("causal_short_keys", "causal with n_q > n_k: the first n_q - n_k rows see no key",
        c, shape(1, 1, 1, 24, 10, 16, true), 8, 8);
    add("padding", "keep-mask hides the last `pad` keys of every row", with(c, {{"mask", 1}, {"pad", 7}}), small);
    add("sliding_window", "keep-mask: each row sees `window` keys ending at its causal diagonal",
        with(c, {{"mask", 2}, {"window", 5}}), shape(1, 2, 2, 24, 24, 16), 8, 8);
    add("masked_rows", "keep-mask: every `masked_every`-th row fully masked", with(c, {{"mask", 3}, {"masked_every", 3}}),
        small);
    add("first_tile_masked", "keep-mask hides the first `first_masked` keys (the whole first 8-key tile; --suite gpu also masks 64)",
        with(c, {{"mask", 4}, {"first_masked", 8}}), small, 8, 8);
    add("random_mask", "random keep-mask, keep probability `keep`", with(c, {{"mask", 5}, {"keep", 0.5}}), small);
    add("tails", "lengths that are not tile multiples", c, shape(1, 1, 1, 19, 37, 16), 8, 16);
    add("odd_dims", "odd head dimension", c, shape(1, 1, 1, 12, 20, 7));
    add("gqa", "grouped-query attention: 4 query heads share 2 kv heads, batch 2", c, shape(2, 4, 2, 12, 20, 16));
    return e;
  }();
  return kEntries;
}

const Entry& entry(const std::string& name) {
  for (const auto& e : entries())
    if (e.info.name == name) return e;
  std::string known;
  for (const auto& e : entries()) known += (known.empty() ? "" : ", ") + e.info.name;
  throw Error("unknown generator '" + printable(name) + "' (known: " + known + ")");  // a NUL cut it short
}

}  // namespace

const std::vector<GeneratorInfo>& generators() {
  static const std::vector<GeneratorInfo> kInfos = [] {
    std::vector<GeneratorInfo> out;
    for (const auto& e : entries()) out.push_back(e.info);
    return out;
  }();
  return kInfos;
}

Family default_family(const std::string& generator) {
  const Entry& e = entry(generator);
  Family f;
  f.generator = generator;
  f.problem = e.shape;
  f.tile_q = e.tile_q;
  f.tile_k = e.tile_k;
  f.params = e.info.defaults;
  f.problem.has_mask = f.param("mask", 0) != 0;
  return f;
}

std::string Family::describe() const {
  std::ostringstream s;
  s << generator << " [" << problem.describe() << "] tiles ";
  if (tile_q || tile_k)  // 0 = the kernel's own (a family may set one of the two)
    s << "q" << (tile_q ? std::to_string(tile_q) : "default") << " k" << (tile_k ? std::to_string(tile_k) : "default");
  else
    s << "default";
  s << " {";
  bool first = true;
  for (const auto& [k, v] : params) {
    s << (first ? "" : ", ") << k << "=" << v;
    first = false;
  }
  s << "} seed=" << seed;
  return s.str();
}

nlohmann::json family_to_json(const Family& f) {
  const Problem& p = f.problem;
  nlohmann::json j;
  j["generator"] = f.generator;
  j["problem"] = {{"batch", p.batch},     {"heads_q", p.heads_q},     {"heads_kv", p.heads_kv},
                  {"n_q", p.n_q},         {"n_k", p.n_k},             {"head_dim", p.head_dim},
                  {"scale", p.scale},     {"causal", p.causal},       {"has_mask", p.has_mask},
                  {"has_bias", p.has_bias}, {"input_format", format_name(p.input_format)}};
  j["tile_q"] = f.tile_q;
  j["tile_k"] = f.tile_k;
  j["params"] = nlohmann::json::object();
  for (const auto& [k, v] : f.params) j["params"][k] = v;
  j["seed"] = seed_to_json(f.seed);
  return j;
}

nlohmann::json seed_to_json(std::uint64_t seed) {
  if (seed <= (std::uint64_t(1) << 53)) return seed;  // exact in a double: kept a number (committed cases, names)
  char hex[19];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(seed));
  return hex;
}

namespace {
template <class T>
T field(const nlohmann::json& j, const char* name, const char* where) {
  if (!j.is_object() || !j.contains(name)) throw Error(std::string("family: missing field '") + where + name + "'");
  const nlohmann::json& v = j.at(name);
  const std::string label = std::string("family: field '") + where + name + "'";
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Strictly an integer of T's range: get<int> turned 1.7 into 1 and 4294967297 into 1, get<uint64_t> -1 into
    // 2^64 - 1, and the case still replayed (found by an adversarial probe).
    if (!v.is_number_integer()) throw Error(label + " must be an integer");
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<std::uint64_t>())
                                             : std::in_range<T>(v.get<std::int64_t>());
    if (!fits) throw Error(label + " = " + v.dump() + " is out of range");
    return v.get<T>();
  } else {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error(label + " has the wrong type");
    }
  }
}
}  // namespace

Family family_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("family: expected a JSON object");
  Family f;
  f.generator = field<std::string>(j, "generator", "");
  entry(f.generator);  // throws for an unknown generator
  const nlohmann::json& pj = j.contains("problem") ? j.at("problem") : nlohmann::json();
  if (!pj.is_object())  // a number or a list there was called missing
    throw Error(j.contains("problem") ? std::string("family: field 'problem' must be an object, not ") + pj.type_name()
                                      : std::string("family: missing field 'problem'"));
  Problem& p = f.problem;
  p.batch = field<int>(pj, "batch", "problem.");
  p.heads_q = field<int>(pj, "heads_q", "problem.");
  p.heads_kv = field<int>(pj, "heads_kv", "problem.");
  p.n_q = field<int>(pj, "n_q", "problem.");
  p.n_k = field<int>(pj, "n_k", "problem.");
  p.head_dim = field<int>(pj, "head_dim", "problem.");
  p.scale = field<double>(pj, "scale", "problem.");
  p.causal = field<bool>(pj, "causal", "problem.");
  p.has_mask = field<bool>(pj, "has_mask", "problem.");
  p.has_bias = field<bool>(pj, "has_bias", "problem.");
  p.input_format = parse_format(field<std::string>(pj, "input_format", "problem."));
  p.validate();
  f.tile_q = field<int>(j, "tile_q", "");
  f.tile_k = field<int>(j, "tile_k", "");
  if (f.tile_q < 0 || f.tile_k < 0) throw Error("family: tile_q and tile_k must be >= 0");
  if (!j.contains("params")) throw Error("family: missing field 'params'");
  if (!j.at("params").is_object())
    throw Error(std::string("family: field 'params' must be an object, not ") + j.at("params").type_name());
  for (const auto& [k, v] : j.at("params").items()) {
    if (!v.is_number()) throw Error("family: field 'params." + k + "' must be a number");
    f.params[k] = v.get<double>();
  }
  // Every parameter the generator lists must be written: one left out would fall back to generators.cpp's
  // in-code value, not to the default `attncheck list` shows (ties 0, v_sign 0 in a tie family), so a
  // hand-written case would check another family without a word. (A parameter the generator does not list, such
  // as `pad` in a family whose mask was switched on by hand, stays optional: its in-code value applies.)
  std::ostringstream missing;
  for (const auto& [k, v] : entry(f.generator).info.defaults)
    if (!f.params.count(k)) missing << (missing.tellp() > 0 ? ", '" : "'") << k << "' (default " << v << ")";
  if (missing.tellp() > 0)
    throw Error("family: params lacks " + missing.str() + ": a case names every parameter of " + f.generator +
                " (attncheck list shows them)");
  // The generator makes the mask from params.mask alone (make_instance), so a problem.has_mask that disagrees
  // would be written in the case and not act: a file with has_mask true and mask 0 ran without a mask.
  if (p.has_mask != (f.param("mask", 0) != 0))
    throw Error(std::string("family: problem.has_mask is ") + (p.has_mask ? "true" : "false") + " but params.mask is " +
                (f.params.count("mask") ? fmt::format("{}", f.params.at("mask")) : std::string("not set (0)")) +
                ": the generator makes the mask from params.mask, so set both (mask 0 and has_mask false: no mask)");
  if (j.contains("seed") && j.at("seed").is_string()) {  // seed_to_json's form past 2^53
    const std::string s = j.at("seed").get<std::string>();
    const bool hex = s.size() > 2 && s.size() <= 18 && s.compare(0, 2, "0x") == 0 &&
                     s.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
    if (!hex) throw Error("family: field 'seed' = \"" + s + "\" is neither an integer nor \"0x\" and 1 to 16 hex digits");
    f.seed = std::stoull(s.substr(2), nullptr, 16);
  } else {
    f.seed = field<std::uint64_t>(j, "seed", "");
  }
  return f;
}

}  // namespace attncheck
