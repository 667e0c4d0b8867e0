// suites.cpp — which properties run on which families.
//   default: every property on a curated set of families, sized so that all six built-in kernels run in about
//            a minute on one core; it contains the tie family on which `paper` fails `unbiased` and
//            `paper-fixed` passes.
//   bias:    `unbiased` over every tie / sign family (and the normal control), `unbiased_at_ties` over the tie
//            families, two where one row in eight ties, and low_rank.
//   gpu:     `gpu_matches_cpu_model` (GPU kernels against their CPU twins) over the families of special paths.
//   long:    the properties that see tiling bugs at lengths past several 64- and 128-wide key tiles (below).
//   quick:   a handful of checks for a smoke run.
// Family seeds are fixed here; the CLI's --seed mixes into them.
#include <initializer_list>
#include <utility>

#include "kernels/formats.h"
#include "properties/property.h"

namespace attncheck {

namespace {

Family fam(const std::string& generator, std::initializer_list<std::pair<const char*, double>> params = {}) {
  Family f = default_family(generator);
  for (const auto& [k, v] : params) f.params[k] = v;
  f.problem.has_mask = f.param("mask", 0) != 0;
  return f;
}

void add(std::vector<SuiteEntry>& s, const std::string& property, std::initializer_list<Family> families) {
  for (const Family& f : families) s.push_back({property, f, f.generator});
}

// A family variant with the label reports show for it.
SuiteEntry variant(const std::string& property, Family f, const std::string& what) {
  return {property, std::move(f), what};
}

std::vector<SuiteEntry> default_suite() {
  std::vector<SuiteEntry> s;
  add(s, "accurate", {fam("normal"), fam("low_rank"), fam("tied_max"), fam("near_tie"), fam("causal"), fam("tails"),
                      fam("gqa"), fam("first_tile_masked"), fam("negative_rows"), fam("odd_dims")});
  add(s, "finite", {fam("normal"), fam("large_logits"), fam("large_logits", {{"log2_mag", 64}}),
                    fam("very_negative_rows"), fam("masked_rows"), fam("causal_short_keys")});
  // A repeated maximum far above the other scores but far below fp32 overflow: scaled 0.25·q_i0·400 with q_i0 in
  // [1, 2), i.e. 100 to 200. Every plain softmax is exact there (p̄ = 1 at the max); the fix's shift to 2r makes the
  // tied p̄ = e^-r, fp32-subnormal past r = 87.3: 1/l overflows past 89.4 (O = ±inf), bf16(p̄) is 0 in P̄V past
  // ~92.5 (O = 0·inf = NaN), l = 0 past ~103.9 (FA2's epilogue: O = 0, LSE = +inf). fa2 passes; fa2-fixed (and a
  // CUDA or plugin kernel with the same fix in FA2's numerics) does not. (paper-fixed's clamp keeps it finite: wrong
  // from r ≈ 24 on, which `accurate` sees, not this.)
  s.push_back(variant("finite", fam("tied_max", {{"tie_level", 400}}), "tied_max, scaled max 100-200"));
  add(s, "constant_v", {fam("constant_v"), fam("causal"), fam("padding")});
  add(s, "within_v_range", {fam("normal"), fam("tied_max"), fam("sink"), fam("sliding_window"), fam("near_duplicate")});
  add(s, "key_permutation", {fam("normal"), fam("tied_max"), fam("tails")});
  add(s, "logit_shift", {fam("normal"), fam("negative_rows")});
  add(s, "masked_value", {fam("padding"), fam("first_tile_masked"), fam("random_mask"), fam("causal")});
  add(s, "causal_prefix", {fam("causal"), fam("causal_cross"), fam("causal_short_keys")});
  add(s, "masked_row", {fam("masked_rows"), fam("causal_short_keys")});
  // A window's fully masked rows: n_q > n_k puts the first n_q − n_k rows' windows before the first key (bottom-right
  // alignment). At n_q = n_k every row sees its own key, and this check skipped on every kernel of every default run
  // (a UX review, session 33: the run's 6 skips).
  Family short_window = fam("sliding_window");
  short_window.problem.n_k = 16;
  s.push_back(variant("masked_row", short_window, "sliding_window, n_q 24 > n_k 16"));
  add(s, "deterministic", {fam("normal"), fam("gqa")});
  add(s, "unbiased", {fam("normal"), fam("tied_max"), fam("near_tie"), fam("max_zero"), fam("tied_max_negative")});
  add(s, "unbiased_at_ties", {fam("tied_max")});
  s.push_back(variant("unbiased_at_ties", fam("tied_max", {{"tie_rows", 0.125}}), "tied_max, 1 row in 8 tied"));
  return s;
}

std::vector<SuiteEntry> bias_suite() {
  std::vector<SuiteEntry> s;
  Family tiled_ties = fam("tied_max");
  tiled_ties.tile_q = tiled_ties.tile_k = 8;  // ties spread over several key tiles
  Family low_rank_signed = fam("low_rank", {{"v_sign", 1}, {"v_binade", 1}, {"do_sign", 1}, {"do_binade", 1}});
  add(s, "unbiased",
      {fam("normal"), fam("tied_max"), fam("tied_max_flat"), fam("tied_max_negative"), fam("max_zero"),
       fam("near_tie")});
  s.push_back(variant("unbiased", fam("near_tie", {{"tie_sign", -1}}), "near_tie, negative max"));
  add(s, "unbiased", {fam("sink")});
  s.push_back(variant("unbiased", fam("tied_max", {{"v_sign", -1}, {"do_sign", -1}}), "tied_max, V and dO < 0"));
  s.push_back(variant("unbiased", fam("tied_max", {{"ties", 8}, {"ties_min", 4}}), "tied_max, 4-8 ties"));
  s.push_back(variant("unbiased", tiled_ties, "tied_max, tiles 8x8"));
  s.push_back(variant("unbiased", fam("tied_max", {{"v_sign", 0}, {"v_binade", 0}, {"do_sign", 0}, {"do_binade", 0}}),
                      "tied_max, mixed-sign V, dO"));
  s.push_back(variant("unbiased", low_rank_signed, "low_rank, one-sign V, dO"));
  // The same statistic on the rows whose maximum repeats and the keys that share it (props_bias.cpp): where a bias
  // lives on a few rows or keys, the whole-tensor mean dilutes it below ε.
  add(s, "unbiased_at_ties", {fam("tied_max"), fam("tied_max_flat"), fam("tied_max_negative"), fam("max_zero"),
                              fam("near_tie")});
  s.push_back(variant("unbiased_at_ties", fam("tied_max", {{"tie_rows", 0.125}}), "tied_max, 1 row in 8 tied"));
  s.push_back(variant("unbiased_at_ties", fam("near_tie", {{"tie_rows", 0.125}}), "near_tie, 1 row in 8 near-tied"));
  s.push_back(variant("unbiased_at_ties", low_rank_signed, "low_rank, one-sign V, dO"));
  return s;
}

// gpu_matches_cpu_model over the families that reach the GPU kernels' special paths (ties for the fix, masks and
// bias, tails, GQA, overflow, empty rows). CPU kernels skip it (no twin); ci/gpu.sh runs it on the cuda: kernels.
std::vector<SuiteEntry> gpu_suite() {
  std::vector<SuiteEntry> s;
  add(s, "gpu_matches_cpu_model",
      {fam("normal"), fam("low_rank"), fam("tied_max"), fam("tied_max_flat"), fam("near_tie"), fam("max_zero"),
       fam("negative_rows"), fam("very_negative_rows"), fam("large_logits"), fam("large_logits", {{"log2_mag", 64}}),
       fam("causal"), fam("causal_short_keys"), fam("tails"), fam("odd_dims"), fam("gqa"), fam("padding"),
       fam("masked_rows"), fam("random_mask"), fam("first_tile_masked"), fam("sliding_window"), fam("sink")});
  // The CUDA kernels' key tiles are 64 wide: first_tile_masked's 8 keys leave their first tile partly visible, so the
  // running max's −inf start on a wholly masked tile needs 64 masked keys (and more keys after them).
  Family gpu_tile = fam("first_tile_masked", {{"first_masked", 64}});
  gpu_tile.problem.n_k = 160;
  s.push_back(variant("gpu_matches_cpu_model", gpu_tile, "first_tile_masked, 64 keys (a CUDA key tile)"));
  for (const char* g : {"normal", "causal", "random_mask"}) {
    Family biased = fam(g);
    biased.problem.has_bias = true;
    s.push_back(variant("gpu_matches_cpu_model", biased, std::string(g) + ", bias"));
  }
  return s;
}

// The default suite's families are small (n_k <= 40): one 64-key tile of the CUDA kernels and of the CPU models'
// default tiles, so a kernel's own tiling (the running max and sum rescaled across key tiles, tails at 64 and 128,
// a wholly masked key tile, ties in different tiles) is met only where a family sets tiny tiles, which a GPU or
// plugin kernel cannot take. `long`: the properties that see such bugs, at lengths past several 64- and 128-wide
// tiles with tails (n 130-260), head dims 64 and 128, in the kernel's own tiles.
std::vector<SuiteEntry> long_suite() {
  auto at = [](const std::string& generator, int n_q, int n_k, int d,
               std::initializer_list<std::pair<const char*, double>> params = {}) {
    Family f = fam(generator, params);
    f.problem.n_q = n_q, f.problem.n_k = n_k, f.problem.head_dim = d;
    f.problem.scale = Problem::default_scale(d);  // 1/sqrt(d), as a model would run (the small families' d16: 1/4)
    f.tile_q = f.tile_k = 0;                      // the kernel's own tiles
    return f;
  };
  std::vector<SuiteEntry> s;
  const auto entry = [&](const std::string& property, Family f) {
    const Problem& p = f.problem;
    const std::string label = f.generator + ", " + std::to_string(p.n_q) + "x" + std::to_string(p.n_k) + " d" +
                              std::to_string(p.head_dim);
    s.push_back(variant(property, std::move(f), label));
  };
  for (const int d : {64, 128}) {
    entry("accurate", at("normal", 130, 200, d));
    entry("accurate", at("tied_max", 130, 200, d));  // ties land in different key tiles
  }
  entry("accurate", at("near_tie", 130, 200, 64));
  entry("accurate", at("low_rank", 130, 200, 64));
  entry("accurate", at("causal", 200, 200, 64));
  entry("accurate", at("causal_cross", 70, 260, 64));
  entry("accurate", at("causal_short_keys", 260, 70, 64));
  entry("accurate", at("tails", 129, 193, 128));
  Family gqa = at("gqa", 150, 150, 64);
  gqa.problem.heads_q = 8, gqa.problem.heads_kv = 2;
  entry("accurate", gqa);
  entry("finite", at("large_logits", 130, 200, 64));
  entry("finite", at("very_negative_rows", 130, 200, 64));
  entry("masked_value", at("padding", 130, 200, 64, {{"pad", 72}}));  // the last key tile wholly masked, and more
  entry("masked_value", at("first_tile_masked", 130, 200, 64, {{"first_masked", 128}}));  // two 64-key tiles
  entry("masked_row", at("masked_rows", 130, 200, 64));
  entry("causal_prefix", at("causal", 200, 200, 64));
  entry("causal_prefix", at("causal_cross", 70, 260, 64));
  entry("within_v_range", at("sink", 130, 200, 64, {{"sink_pos", 150}}));  // the sink in the third key tile
  entry("deterministic", at("normal", 130, 200, 64));
  for (const char* g : {"tied_max", "max_zero", "near_tie"}) entry("unbiased", at(g, 130, 200, 64));
  entry("unbiased_at_ties", at("tied_max", 130, 200, 64));
  s.push_back(variant("unbiased_at_ties", at("tied_max", 130, 200, 64, {{"tie_rows", 0.125}}),
                      "tied_max, 130x200 d64, 1 row in 8 tied"));
  return s;
}

std::vector<SuiteEntry> quick_suite() {
  std::vector<SuiteEntry> s;
  add(s, "accurate", {fam("normal")});
  add(s, "finite", {fam("normal")});
  add(s, "deterministic", {fam("normal")});
  add(s, "masked_row", {fam("masked_rows")});
  add(s, "unbiased", {fam("tied_max")});
  return s;
}

}  // namespace

std::vector<std::string> suite_names() { return {"default", "bias", "gpu", "long", "quick"}; }

std::string suite_purpose(const std::string& name) {
  if (name == "default")
    return "every property but gpu_matches_cpu_model on small families (d16 and d7, n_k <= 40): the main job";
  if (name == "bias")
    return "unbiased and unbiased_at_ties on every tie family and its sign and tile variants: the bias, more ways "
           "than default";
  if (name == "gpu") return "gpu_matches_cpu_model: each cuda: kernel against its CPU twin (CPU kernels skip it)";
  if (name == "long") return "the properties tiling bugs break, at 70-260 queries and keys, d64 and d128, in the "
                             "kernel's own tiles";
  if (name == "quick")
    return "one family each of accurate, finite, deterministic, masked_row and unbiased: a smoke test (under a "
           "second on the CPU kernels)";
  throw Error("unknown suite '" + name + "'");
}

std::uint64_t reseeded(std::uint64_t family_seed, std::uint64_t run_seed) { return mix64(family_seed ^ mix64(run_seed)); }

std::vector<SuiteEntry> suite(const std::string& name) {
  if (name == "default") return default_suite();
  if (name == "bias") return bias_suite();
  if (name == "gpu") return gpu_suite();
  if (name == "long") return long_suite();
  if (name == "quick") return quick_suite();
  throw Error("unknown suite '" + name + "'" + did_you_mean(name, suite_names()) +
              " (known: default, bias, gpu, long, quick)");
}

}  // namespace attncheck
