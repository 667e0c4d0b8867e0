// shrink.cpp — candidates and the greedy loop of shrink.h, and check_and_shrink.
#include "properties/shrink.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <set>

#include "properties/family_internal.h"
#include "properties/property_util.h"
#include "properties/report.h"

namespace attncheck {

namespace {

using Clock = std::chrono::steady_clock;

// Smaller values to try for an integer field, most aggressive first: lo, v/2, v−1 (distinct, in [lo, v)).
std::vector<int> smaller(int v, int lo) {
  std::vector<int> out;
  for (int c : {lo, v / 2, v - 1})
    if (c >= lo && c < v && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

bool valid(const Family& f) {
  try {
    validate_family(f);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Is `cand` the same failure as `orig`? Per-instance properties: a failure naming the same tensor. `unbiased`: the
// original headline tensor still fails, with a mean of the same sign, and its per-instance means still vary (sd > 0).
// Without the first, a shrink could trade the O bias for an unrelated dV error; without the sign, a bias turned the
// other way (paper-fixed's dV:tied at -0.151 ulp shrank to +1.484, fa2-fixed's dQ on near_tie at +1.50 to -4.50: a
// UX review, session 34), and the direction is the finding; without the last, it reaches families whose T
// instances are all the same instance (values quantised to 1), where a single deterministic error reads as an
// infinite z: that is an error, not a bias across instances.
bool same_failure(const Property& p, const Outcome& orig, const Outcome& cand) {
  if (!p.across_instances) return failure_kind(orig.message) == failure_kind(cand.message);
  if (orig.message.rfind("not finite: ", 0) == 0) return cand.message.rfind("not finite: ", 0) == 0;
  const std::string tensor = orig.stats.value("tensor", std::string());
  if (tensor.empty() || !cand.stats.contains("tensors") || !cand.stats["tensors"].contains(tensor)) return false;
  const auto& t = cand.stats["tensors"][tensor];
  const bool has_mean = orig.stats.contains("tensors") && orig.stats["tensors"].contains(tensor) &&
                        orig.stats["tensors"][tensor].contains("mean_ulp");
  const bool same_sign =
      !has_mean || (t.value("mean_ulp", 0.0) > 0) == (orig.stats["tensors"][tensor]["mean_ulp"].get<double>() > 0);
  // Not set aside in the candidate (a null control failing there too): that failure would be another tensor's.
  const bool aside = cand.stats.contains("set_aside") && cand.stats["set_aside"].is_array() &&
                     std::find(cand.stats["set_aside"].begin(), cand.stats["set_aside"].end(), tensor) !=
                         cand.stats["set_aside"].end();
  return t.value("fails", false) && t.value("sd", 0.0) > 0 && same_sign && !aside;
}

std::vector<int> upto(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}
std::vector<int> without(int n, int drop) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i)
    if (i != drop) v.push_back(i);
  return v;
}

// Smaller instances than `in`, most aggressive first, as cuts (each instance is built when its turn comes: built at
// once, a 130x200 d128 instance's ~590 candidates took ~800 MB): one batch, one kv head, one query head per group; then
// one query row; then every query row, key and head-dim column dropped in turn.
std::vector<Cut> literal_cuts(const Problem& p) {
  const auto B = upto(p.batch), H = upto(p.heads_kv), G = upto(p.group()), I = upto(p.n_q), J = upto(p.n_k),
             C = upto(p.head_dim);
  std::vector<Cut> out;
  for (int b = 0; p.batch > 1 && b < p.batch; ++b) out.push_back({{b}, H, G, I, J, C});
  for (int h = 0; p.heads_kv > 1 && h < p.heads_kv; ++h) out.push_back({B, {h}, G, I, J, C});
  for (int g = 0; p.group() > 1 && g < p.group(); ++g) out.push_back({B, H, {g}, I, J, C});
  for (int i = 0; p.n_q > 1 && i < p.n_q; ++i) out.push_back({B, H, G, {i}, J, C});
  for (int i = 0; p.n_q > 1 && i < p.n_q; ++i) out.push_back({B, H, G, without(p.n_q, i), J, C});
  for (int j = 0; p.n_k > 1 && j < p.n_k; ++j) out.push_back({B, H, G, I, without(p.n_k, j), C});
  for (int c = 0; p.head_dim > 1 && c < p.head_dim; ++c) out.push_back({B, H, G, I, J, without(p.head_dim, c)});
  return out;
}

// Simpler values for x, most readable first, each representable in f and different from x: 0, the nearest power of
// two (sign kept), x to 2 and to 4 significant bits. (A -inf bias, an additive mask, is kept as it is.)
std::vector<double> simpler_values(double x, Format f) {
  std::vector<double> out;
  if (x == 0 || !std::isfinite(x)) return out;
  auto add = [&](double v) {
    if (v != x && representable(v, f) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  add(0.0);
  add(std::copysign(std::exp2(std::round(std::log2(std::fabs(x)))), x));
  const int e = std::ilogb(x);
  for (int bits : {2, 4}) add(std::ldexp(std::round(std::ldexp(x, bits - 1 - e)), e - (bits - 1)));
  return out;
}

// The query head of `in` that a cut's query head h was: the cut keeps kv heads `hks`, each with the query heads
// `in_group` of its group (of g_old).
int cut_query_head(const std::vector<int>& hks, const std::vector<int>& in_group, int g_old, int h) {
  const int g_new = int(in_group.size());
  return hks[h / g_new] * g_old + in_group[h % g_new];
}
}  // namespace

Instance sub_instance(const Instance& in, const Cut& c) {
  // (named references, not a structured binding: the lambdas below use them, which clang 14 does not allow)
  const std::vector<int> &bs = c.bs, &hks = c.hks, &in_group = c.in_group, &is = c.is, &js = c.js, &cs = c.cs;
  const Problem& p = in.problem;
  Instance out;
  out.seed = in.seed;
  Problem& q = out.problem;
  q = p;
  q.batch = int(bs.size());
  q.heads_kv = int(hks.size());
  q.heads_q = int(hks.size() * in_group.size());
  q.n_q = int(is.size());
  q.n_k = int(js.size());
  q.head_dim = int(cs.size());
  const auto q_head = [&](int h) { return cut_query_head(hks, in_group, p.group(), h); };
  auto rows = [&](const std::vector<double>& t, bool kv) {
    std::vector<double> r;
    if (t.empty()) return r;
    r.reserve(kv ? q.kv_size() : q.q_size());
    for (int b = 0; b < q.batch; ++b)
      for (int h = 0; h < (kv ? q.heads_kv : q.heads_q); ++h)
        for (int x = 0; x < (kv ? q.n_k : q.n_q); ++x)
          for (int c : cs)
            r.push_back(kv ? t[p.kv_at(bs[b], hks[h], js[x], c)] : t[p.q_at(bs[b], q_head(h), is[x], c)]);
    return r;
  };
  out.q = rows(in.q, false);
  out.k = rows(in.k, true);
  out.v = rows(in.v, true);
  out.d_o = rows(in.d_o, false);
  auto scores = [&](const auto& t) {
    std::decay_t<decltype(t)> r;
    if (t.empty()) return r;
    r.reserve(q.scores_size());
    for (int b = 0; b < q.batch; ++b)
      for (int h = 0; h < q.heads_q; ++h)
        for (int i : is)
          for (int j : js) r.push_back(t[p.score_at(bs[b], q_head(h), i, j)]);
    return r;
  };
  out.mask = scores(in.mask);
  out.bias = scores(in.bias);
  return out;
}

bool keeps_rows_seeing(const Instance& in, const Instance& cut, const Cut& c) {
  if (!in.problem.causal && !in.problem.has_mask) return true;
  const auto sees = [](const Instance& x, int b, int h, int i) {
    for (int j = 0; j < x.problem.n_k; ++j)
      if (x.visible(b, h, i, j)) return true;
    return false;
  };
  for (int b = 0; b < cut.problem.batch; ++b)
    for (int h = 0; h < cut.problem.heads_q; ++h)
      for (int i = 0; i < cut.problem.n_q; ++i)
        if (sees(cut, b, h, i) != sees(in, c.bs[b], cut_query_head(c.hks, c.in_group, in.problem.group(), h), c.is[i]))
          return false;
  return true;
}

std::string failure_kind(const std::string& message) {
  const bool named = message.rfind("instance ", 0) == 0 || message.rfind(kLiteralInstance + std::string(": "), 0) == 0;
  std::size_t at = named ? message.find(": ") : std::string::npos;
  at = at == std::string::npos ? 0 : at + 2;
  std::size_t end = at;
  while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '_')) ++end;
  return message.substr(at, end - at);
}

std::string fault_signature(const std::string& message) {
  if (!is_kernel_fault_message(message)) return "";
  const std::string prefix = "kernel fault: ";  // kernel_fault_message's
  // "K: kind: detail": kernel names hold ':' but never ": ".
  const std::size_t kernel_end = message.find(": ", prefix.size());
  if (kernel_end == std::string::npos) return message.substr(prefix.size());
  const std::size_t kind_end = message.find(": ", kernel_end + 2);
  const std::string kind = message.substr(kernel_end + 2, kind_end == std::string::npos ? std::string::npos
                                                                                          : kind_end - kernel_end - 2);
  std::string signature = message.substr(prefix.size(), kernel_end - prefix.size()) + ": " + kind;
  if (kind == "crash" && kind_end != std::string::npos) {  // the signal: a SIGSEGV is not a SIGABRT
    const std::string detail = message.substr(kind_end + 2);
    signature += ": " + detail.substr(0, detail.find(" ("));
  }
  return signature;
}

std::string fault_kind(const std::string& message) {
  const std::string signature = fault_signature(message);
  const std::size_t kernel_end = signature.find(": ");  // kernel names hold ':' but never ": "
  return kernel_end == std::string::npos ? signature : signature.substr(kernel_end + 2);
}

bool shrinks_fault(const std::string& message) {
  const std::string s = fault_signature(message);
  return !s.empty() && s.find(": timeout") == std::string::npos;
}

ShrinkOptions default_shrink_options() {
  ShrinkOptions o;
  if (const char* s = std::getenv("ATTNCHECK_SHRINK_SECONDS"); s && *s) {  // set and not empty
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (*end || !(v >= 0) || !std::isfinite(v))
      throw Error(std::string("ATTNCHECK_SHRINK_SECONDS='") + s + "': use a number of seconds >= 0");
    o.max_seconds = v;
  }
  return o;
}

std::vector<Family> shrink_candidates(const Family& f) {
  std::vector<Family> out;
  // A count the smaller shape limits is written as it acts (family_internal.h): the shrunk case at n_k 4 reads pad 3,
  // not the pad 7 it started with, and two candidates that make the same instances are one.
  auto push = [&](Family g) {
    if (valid(g)) out.push_back(with_acting_params(std::move(g)));
  };
  const Problem& p = f.problem;
  const int min_d = f.param("near", 0) != 0 ? 2 : 1;  // near ties need the noise-free lead dim and one more
  for (int v : smaller(p.n_q, 1)) {
    Family g = f;
    g.problem.n_q = v;
    push(g);
  }
  for (int v : smaller(p.n_k, 1)) {
    Family g = f;
    g.problem.n_k = v;
    push(g);
  }
  if (p.batch > 1) {
    Family g = f;
    g.problem.batch = 1;
    push(g);
  }
  if (p.heads_q > 1) {
    Family g = f;
    g.problem.heads_q = g.problem.heads_kv = 1;
    push(g);
    if (p.heads_kv < p.heads_q) {  // drop GQA, keep heads
      Family h = f;
      h.problem.heads_kv = h.problem.heads_q;
      push(h);
    }
  }
  for (int v : smaller(p.head_dim, min_d)) {
    Family g = f;
    g.problem.head_dim = v;
    if (p.scale == Problem::default_scale(p.head_dim)) g.problem.scale = Problem::default_scale(v);
    push(g);
  }
  for (int v : smaller(f.tile_q, 1)) {
    Family g = f;
    g.tile_q = v;
    push(g);
  }
  for (int v : smaller(f.tile_k, 1)) {
    Family g = f;
    g.tile_k = v;
    push(g);
  }
  auto shrink_param = [&](const char* key, int lo) {
    if (!f.params.count(key)) return;
    for (int v : smaller(static_cast<int>(f.param(key, lo)), lo)) {
      Family g = f;
      g.params[key] = v;
      push(g);
    }
  };
  shrink_param("ties", 1);
  shrink_param("rank", 1);
  shrink_param("quant", 0);   // mantissa bits: toward powers of two and small integers
  shrink_param("erange", 0);  // exponents: toward one binade
  shrink_param("eps", 1);
  shrink_param("pad", 1);           // mask extents toward one key
  shrink_param("first_masked", 1);
  shrink_param("window", 1);
  for (const char* key : {"v_exp", "do_exp"})
    if (f.param(key, 0) != 0) {
      Family g = f;
      g.params[key] = 0;
      push(g);
    }
  return out;
}

namespace {
// The literal phase of shrink_failure: edits `best`'s instance while the property fails the same way; `best` takes the
// last failing literal. Structural candidates restart the scan when one is taken; values go element by element,
// pass after pass, until a pass changes none. Returns the steps taken.
int shrink_literal(const Property& p, const Kernel& k, const Outcome& failing, Outcome& best, Clock::time_point t0,
                   const ShrinkOptions& opt) {
  const auto out_of_time = [&] { return seconds_since(t0) >= opt.max_seconds || stop_requested(); };
  const Outcome before = best;
  int steps = 0;
  // The same failure on cand (then `best` takes it, and holds cand as its literal).
  auto fails = [&](std::shared_ptr<const Instance> cand) -> bool {
    Outcome o;
    try {
      o = p.check_literal(k, best.family, cand);  // (its outcome's family is best.family)
    } catch (const std::exception&) {
      return false;  // a candidate the kernel cannot run (an error, a fault, out of memory) is not simpler
    }
    if (o.status != Status::kFail || !same_failure(p, failing, o)) return false;
    o.instance_index = best.instance_index;
    o.instances_run = best.instances_run;  // the family's check drew these (a time budget's case pins them)
    o.seconds = best.seconds;
    best = std::move(o);
    return true;
  };
  const auto more = [&] { return steps < opt.max_literal_steps && !out_of_time(); };
  // dO only moves a backward's outputs: for a kernel without one, or a failure of O or LSE, every dO value "keeps
  // the failure" (a step and a kernel call each, and a case whose dO reads 0 for no reason).
  std::vector<std::vector<double> Instance::*> tensors = {&Instance::q, &Instance::k, &Instance::v, &Instance::bias};
  const std::string kind = failure_kind(failing.message);
  if (k.caps().backward && kind != "O" && kind != "LSE") tensors.push_back(&Instance::d_o);
  try {
    if (out_of_time() || !fails(make_instance_shared(best.family, best.instance_index))) return 0;  // (it fails)
    // Smaller first, then simpler values; a value made simpler can let a row, key or column go (a column that is 0
    // in Q and K), so the two alternate until neither changes anything.
    for (bool changed = true; changed && more();) {
      changed = false;
      for (bool progress = true; progress && more();) {
        progress = false;
        const std::shared_ptr<const Instance> now = best.literal;  // (fails() replaces best.literal)
        for (const Cut& c : literal_cuts(now->problem)) {
          if (out_of_time()) break;
          auto cut = std::make_shared<const Instance>(sub_instance(*now, c));
          if (keeps_rows_seeing(*now, *cut, c) && fails(cut)) {
            ++steps, progress = changed = true;
            break;
          }
        }
      }
      const Format in_fmt = best.literal->problem.input_format;
      for (auto tensor : tensors) {
        const Format f = tensor == &Instance::bias ? Format::kF32 : in_fmt;
        for (std::size_t e = 0; e < ((*best.literal).*tensor).size() && more(); ++e) {
          for (double v : simpler_values(((*best.literal).*tensor)[e], f)) {
            if (out_of_time()) break;
            auto cand = std::make_shared<Instance>(*best.literal);
            ((*cand).*tensor)[e] = v;
            if (fails(std::move(cand))) {
              ++steps, changed = true;
              break;
            }
          }
        }
      }
    }
  } catch (const std::bad_alloc&) {  // a copy this phase made: `best` is the last failure checked, kept as it is
  }
  if (steps == 0) best = before;  // nothing simpler: the family's instance stays the case
  return steps;
}
}  // namespace

Outcome shrink_failure(const Property& p, const Kernel& k, const Budget& b, const Outcome& failing,
                       const ShrinkOptions& opt) {
  const auto t0 = Clock::now();
  Outcome best = failing;
  int steps = 0;
  std::set<std::string> tried;
  bool progress = true;
  // A kernel that takes no tiles (with_tiles gives none: the CUDA kernels, cuDNN, plugins) runs every tiling
  // alike. Its case keeps the kernel's own tiles (0): shrinking tiles towards 1 always "succeeded" there, and the
  // GPU case read "tiles q1 k1", tiles it never ran, which a CPU model replaying the case would take (40 s of
  // fuzzing cuda:fa2-fixed on an H100: 64 of 73 cases named tiles; on the fa2-fixed model 32 replayed with another
  // verdict tiled that way, 3 at its own 64x64). Its candidates have tiles 0, the first of them best with tiles 0
  // (shrink_candidates makes no tile candidate from tiles 0, so none repeats best once its tiles are cleared).
  const bool own_tiles = k.with_tiles(64, 64) == nullptr;
  auto candidates = [own_tiles](const Family& f) {
    std::vector<Family> c = shrink_candidates(f);
    if (!own_tiles) return c;
    for (Family& g : c) g.tile_q = g.tile_k = 0;
    if (f.tile_q || f.tile_k) {
      Family g = f;
      g.tile_q = g.tile_k = 0;
      c.insert(c.begin(), g);
    }
    return c;
  };
  // A kernel fault shrinks to candidates that fault the same way (fault_signature): the check throws, no outcome.
  const std::string fault = fault_signature(failing.message);
  // A stop request (Ctrl-C in `check`) ends shrinking where it is: `best` is a failure as found, and saving it beats
  // losing it (a candidate the request cut short threw Interrupted, caught below as "not simpler").
  while (progress && steps < opt.max_steps && seconds_since(t0) < opt.max_seconds && !stop_requested()) {
    progress = false;
    for (const Family& cand : candidates(best.family)) {
      if (seconds_since(t0) >= opt.max_seconds || stop_requested()) break;
      const std::string key = family_to_json(cand).dump();
      if (!tried.insert(key).second) continue;
      Outcome o;
      try {
        o = p.check(k, cand, b);
      } catch (const KernelFault& e) {
        if (fault.empty() || fault_signature(kernel_fault_message(e)) != fault) continue;
        o = best;
        o.family = cand;
        o.message = kernel_fault_message(e);
        o.instance_index = e.instance >= 0 ? static_cast<std::uint64_t>(e.instance) : 0;  // where the property knows
        o.stats = nlohmann::json();
      } catch (const std::exception&) {
        continue;  // a candidate the kernel cannot run (or that runs out of memory) is not simpler
      }
      const bool same = fault.empty() ? same_failure(p, failing, o) : fault_signature(o.message) == fault;
      if (o.status != Status::kFail || !same) continue;
      best = o;
      ++steps;
      progress = true;
      break;
    }
  }
  // The literal phase: the failing instance itself, smaller (rows, keys, columns, heads) and then simpler (values
  // toward 0, powers of two and short mantissas), while the same failure holds. A family's shrink stops where its
  // generator does (fa2's accurate on tied_max stayed at 8x16 d16, two heads: every smaller family failed on another
  // tensor first); the instance shrinks past that. Per-instance properties only (a statistic over instances is the
  // family's), and not a kernel fault (each try is a call that may crash or hang).
  if (p.check_literal && !p.across_instances && fault.empty()) steps += shrink_literal(p, k, failing, best, t0, opt);
  best.seconds = failing.seconds;
  best.shrink_steps = steps;
  best.shrink_seconds = seconds_since(t0);
  return best;
}

Outcome check_and_shrink(const Property& p, const Kernel& k, const Family& f, const Budget& b) {
  Outcome o = p.check(k, f, b);
  if (o.status != Status::kFail) return o;
  Outcome s = shrink_failure(p, k, b, o, default_shrink_options());
  if (s.shrink_steps > 0) s.message_checked = o.message, s.stats_checked = o.stats;
  s.report = failure_report(p, k, s);
  return s;
}

}  // namespace attncheck
