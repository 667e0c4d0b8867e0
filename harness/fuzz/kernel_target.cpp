// kernel_target.cpp — one fuzz input through the kernel under test (see kernel_target.h for the steps).
//
// Invariants: deterministic per input (no global state besides the read-only config and the feedback
// counters); a finding's case file is on disk before anything is printed and before abort().
#include "harness/fuzz/kernel_target.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <set>
#include <stdexcept>

#include "harness/bias_confirmation.h"
#include "harness/corpus.h"
#include "harness/fuzz/feedback.h"
#include "kernels/cpu/flash_model.h"
#if defined(ATTNCHECK_FUZZ_WITH_PLUGINS)
#include "harness/plugin/plugin_loader.h"
#endif
#include "properties/property_util.h"  // tiled(): the tiles exactly as the properties apply them
#include "reference/reference.h"

namespace attncheck::fuzz {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// The non-empty items of s between separators.
std::vector<std::string> split(const std::string& s, char separator) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, separator))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::uint64_t g_runs = 0;  // inputs run by this process (the planted kernel reports it)

// What this process reached, printed at exit (ATTNCHECK_FUZZ_STATS=1): the largest finite O error in
// row-scaled ulps over generated instances, and how many distinct (generator, O error bucket) cells.
double g_max_err = 0;
std::uint64_t g_bias_batches = 0;     // bias batches actually run (the rest were answered by bias_memo_)
std::uint64_t g_family_replays = 0;   // inputs whose steps 2 and 4 were answered by family_memo_
std::uint64_t g_long_runs = 0;        // inputs with a size past 32 (fuzz_input.h: bytes 18-20)
std::uint64_t g_multi_tile_runs = 0;  // of these, n_q or n_k past 64: more than one of the CUDA kernels' 64-row tiles
std::set<std::pair<int, int>> g_cells;
void print_stats() {
  std::fprintf(stderr,
               "attncheck-fuzz: stats runs=%llu long_runs=%llu multi_tile_runs=%llu max_o_error_ulps=%g "
               "error_cells=%zu bias_batches=%llu family_replays=%llu\n",
               static_cast<unsigned long long>(g_runs), static_cast<unsigned long long>(g_long_runs),
               static_cast<unsigned long long>(g_multi_tile_runs), g_max_err, g_cells.size(),
               static_cast<unsigned long long>(g_bias_batches), static_cast<unsigned long long>(g_family_replays));
}

int generator_slot(const std::string& name) {
  const auto& gens = generators();
  for (std::size_t i = 0; i < gens.size(); ++i)
    if (gens[i].name == name) return static_cast<int>(i);
  return 0;
}

// Drops the features the kernel cannot run, so a fuzz input is never wasted on "unsupported".
void fit_to_caps(Family& f, const KernelCaps& caps) {
  Problem& p = f.problem;
  if (!caps.mask) {
    p.has_mask = false;
    if (f.params.count("mask")) f.params["mask"] = 0;
  }
  if (!caps.bias) p.has_bias = false;
  if (!caps.causal) p.causal = false;
  if (!caps.gqa) p.heads_kv = p.heads_q;
  if (caps.max_head_dim > 0 && p.head_dim > caps.max_head_dim) p.head_dim = caps.max_head_dim;
}

// Events the exact scores show: tied maxima (p̄ == 1 for several keys), near ties, fully masked rows. Each
// event counts once per instance (a count per row would make every new row count a "new" input and bloat
// the corpus without telling the fuzzer anything about error levels).
void record_score_events(const Instance& in) {
  const Problem& p = in.problem;
  bool masked = false, tie2 = false, tie3 = false, near = false;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const std::vector<double> s = reference_scores(in, b, h);
      for (int i = 0; i < p.n_q; ++i) {
        double best = -HUGE_VAL, second = -HUGE_VAL;
        int at_best = 0;
        for (int j = 0; j < p.n_k; ++j) {
          const double x = s[static_cast<std::size_t>(i) * p.n_k + j];
          if (std::isinf(x) && x < 0) continue;
          if (x > best) {
            second = best;
            best = x;
            at_best = 1;
          } else if (x == best) {
            ++at_best;
          } else if (x > second) {
            second = x;
          }
        }
        masked |= at_best == 0;
        tie2 |= at_best == 2;
        tie3 |= at_best >= 3;
        near |= at_best == 1 && std::isfinite(second) && best - second <= ulp(best, Format::kBF16);
      }
    }
  }
  if (masked) record_event(Event::kMaskedRow);
  if (tie2) record_event(Event::kTiedMax2);
  if (tie3) record_event(Event::kTiedMax3Plus);
  if (near) record_event(Event::kNearTie);
}

// Trace counts keep libFuzzer's hit-count buckets (1, 2, 3, 4-7, ...): more tied tiles is worth keeping.
void record_trace(const ModelTrace& t) {
  auto n = [](std::uint64_t v) { return static_cast<int>(v > 255 ? 255 : v); };
  record_event(Event::kPOne, n(t.rows_with_p_one));
  record_event(Event::kExactTieTile, n(t.exact_tie_tiles));
  record_event(Event::kPolicyTie, n(t.policy_tie_tiles));
  record_event(Event::kShifted, n(t.shifted_tiles));
  record_event(Event::kUnshiftedTie, n(t.unshifted_ties));
  record_event(Event::kClampedSum, n(t.clamped_sums));
  record_event(Event::kZeroRowSum, n(t.zero_row_sums));
}

// Reads a number from a property's stats whichever of the given keys it uses.
double stat(const nlohmann::json& stats, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = stats.find(k);
    if (it != stats.end() && it->is_number()) return it->get<double>();
  }
  return 0;
}

}  // namespace

ErrorSummary o_error(const std::vector<double>& got, const std::vector<double>& exact, Format out_fmt, int row_len) {
  ErrorSummary e;
  // ulp(x, out_fmt) (kernels/formats.h) for x >= 0, not NaN, with the format looked up once.
  const FormatInfo fi = format_info(out_fmt);
  const auto ulp_at = [&fi](double x) { return exp2_int(quantum_exponent(std::isinf(x) ? fi.max_finite : x, fi)); };
  double sum = 0;
  const std::size_t n = std::min(got.size(), exact.size());
  const std::size_t len = row_len < 1 ? 1 : static_cast<std::size_t>(row_len);
  // Row by row (no modulo per element); within a row the elements in order, so every sum is as it was.
  for (std::size_t row = 0; row < n; row += len) {
    const std::size_t end = std::min(n, row + len);
    double ss = 0;  // the row's exact rms
    int m = 0;
    for (std::size_t j = row; j < end; ++j)
      if (std::isfinite(exact[j])) ss += exact[j] * exact[j], ++m;
    const double row_rms = m ? std::sqrt(ss / m) : 0;
    for (std::size_t i = row; i < end; ++i) {
      if (!std::isfinite(exact[i])) continue;
      if (!std::isfinite(got[i])) {
        e.max_ulp = NAN;
        continue;
      }
      const double u = (got[i] - exact[i]) / ulp_at(std::max(std::fabs(exact[i]), row_rms));
      sum += u;
      if (u != 0) {
        ++e.nonzero;
        if (u > 0) ++e.positive;
      }
      if (!std::isnan(e.max_ulp) && std::fabs(u) > e.max_ulp) e.max_ulp = std::fabs(u);
    }
  }
  e.mean_signed_ulp = n ? sum / static_cast<double>(n) : 0;
  return e;
}

TargetConfig config_from_env() {
  TargetConfig c;
#if defined(ATTNCHECK_FUZZ_DEFAULT_KERNEL)
  c.kernel = ATTNCHECK_FUZZ_DEFAULT_KERNEL;  // a build's default (ClusterFuzzLite fuzzes paper-fixed)
#endif
  // Every setting is checked: a typo must stop the campaign at its start, not leave an overnight run checking
  // nothing (an unknown property name selected no property) or something else (atoi("abc") = 0, clamped).
  auto integer = [](const char* name, const char* fallback, int lo, int hi) {
    const std::string v = env_or(name, fallback);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (*end || n < lo || n > hi)
      throw Error(std::string(name) + "='" + v + "': use an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<int>(n);
  };
  auto one_of = [](const char* name, const char* fallback, std::initializer_list<const char*> allowed) {
    const std::string v = env_or(name, fallback);
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw Error(std::string(name) + "='" + v + "': use one of " + list);
  };
  c.kernel = env_or("ATTNCHECK_FUZZ_KERNEL", c.kernel);
  c.findings_dir = env_or("ATTNCHECK_FUZZ_FINDINGS", c.findings_dir);
  const std::string feedback = one_of("ATTNCHECK_FUZZ_FEEDBACK", "1", {"1", "0", "error"});
  c.feedback = feedback != "0";
  c.feedback_error_only = feedback == "error";
  c.instances = integer("ATTNCHECK_FUZZ_INSTANCES", "1", 1, 1 << 20);
  c.bias_instances = integer("ATTNCHECK_FUZZ_BIAS_T", "32", kMinBiasInstances, 100000);  // property.h: why 24
  c.properties = split(env_or("ATTNCHECK_FUZZ_PROPERTIES", ""), ',');
  for (const std::string& name : c.properties) {  // "none": no property (the feedback A/B measures errors only)
    bool known = name == "none";
    std::string list;
    for (const Property& p : all_properties()) known = known || p.name == name, list += p.name + ", ";
    if (!known) throw Error("ATTNCHECK_FUZZ_PROPERTIES: unknown property '" + name + "' (known: " + list + "or none)");
  }
  c.quiet = one_of("ATTNCHECK_FUZZ_QUIET", "0", {"0", "1"}) == "1";
  c.keep_going = one_of("ATTNCHECK_FUZZ_CONTINUE", "0", {"0", "1"}) == "1";
  c.confirm_bias = one_of("ATTNCHECK_FUZZ_CONFIRM_BIAS", "1", {"0", "1"}) == "1";
  c.planted_base = env_or("ATTNCHECK_FUZZ_PLANTED_BASE", c.planted_base);
  c.planted_features = integer("ATTNCHECK_FUZZ_PLANTED_FEATURES", "9", 1, kPlantedFeatures);
  if (!env_or("ATTNCHECK_FUZZ_ERROR_FD", "").empty()) c.error_fd = integer("ATTNCHECK_FUZZ_ERROR_FD", "-1", 3, 1 << 20);
  c.plugins = split(env_or("ATTNCHECK_FUZZ_PLUGINS", ""), '\n');
  return c;
}

namespace {
// A kernel fault as a property's failure on the family, its message as kernel_fault_message says it.
Outcome fault_outcome(const Property& p, const Kernel& k, const Family& f, const std::string& message) {
  Outcome o = make_outcome(p.name, k, f);
  o.status = Status::kFail;
  o.message = message;
  return o;
}

// p.check, where a kernel fault (a plugin kernel crashed, hung, returned an error or wrote outside its outputs) is
// the property's failure on this family, as `attncheck check` reports it (cmd_check.cpp) and `replay` replays it.
Outcome checked(const Property& p, const Kernel& k, const Family& f, const Budget& b) {
  try {
    return p.check(k, f, b);
  } catch (const KernelFault& e) {
    return fault_outcome(p, k, f, kernel_fault_message(e));
  }
}
}  // namespace

KernelTarget::KernelTarget(TargetConfig cfg) : cfg_(std::move(cfg)) {
  Registry& r = default_registry();
  static std::set<std::string> loaded;  // once per process: a second target (the tests) finds them registered
  for (const std::string& spec : cfg_.plugins) {
#if defined(ATTNCHECK_FUZZ_WITH_PLUGINS)
    if (!loaded.count(spec)) {
      load_plugin(spec, r);  // Error (exit 2 at the start) for a bad library
      loaded.insert(spec);
    }
#else
    throw Error("ATTNCHECK_FUZZ_PLUGINS: this build of the fuzz target has no plugin loader (harness/plugin/)");
#endif
  }
  if (cfg_.kernel == "planted") {
    planted_ = make_planted_kernel(r.get(cfg_.planted_base), cfg_.planted_features, &g_runs);
    kernel_ = planted_.get();
  } else {
    kernel_ = &r.get(cfg_.kernel);
  }
  memo_ = std::make_unique<MemoKernel>(*kernel_);
  takes_tiles_ = kernel_->with_tiles(64, 64) != nullptr;
  if (env_or("ATTNCHECK_FUZZ_STATS", "0") == "1") std::atexit(print_stats);
  set_enabled(cfg_.feedback);
  set_error_only(cfg_.feedback_error_only);
  const auto& all = all_properties();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Property& p = all[i];
    if (cfg_.properties.empty() ? p.name == "unbiased_at_ties"  // opt-in: a second batch per bias input (header)
                                : std::find(cfg_.properties.begin(), cfg_.properties.end(), p.name) ==
                                      cfg_.properties.end())
      continue;
    (p.across_instances ? across_ : per_instance_).push_back(&p);
  }
  for (const Property* p : per_instance_) {
    property_index_.push_back(static_cast<int>(p - all.data()));
    lend_once_.push_back(p->name == "deterministic");  // once here, not a string compare per property per input
  }
}

// Step 5's check of one bias property, and of a failure its confirmation on a fresh sample (bias_confirmation.h).
// A kernel fault or a non-finite output is a failure as it is (not a statistic to confirm: needs_confirmation), and so
// is a fault on the fresh sample.
KernelTarget::BiasRun KernelTarget::bias_run(const Property& p, const Family& fam, const Budget& b,
                                             const std::uint8_t* data, std::size_t size) const {
  BiasRun r{checked(p, *kernel_, fam, b), ""};
  if (!cfg_.confirm_bias || !needs_confirmation(r.raw)) return r;
  try {
    const Confirmation c = confirm_on_a_fresh_sample(p, *kernel_, fam, b);
    if (c.confirmed()) return r;
    const std::string raw_numbers = deciding_numbers(r.raw), fresh_numbers = deciding_numbers(c.outcome);
    r.unconfirmed = "attncheck-fuzz: NOT CONFIRMED, not a finding: " + cfg_.kernel + " fails '" + p.name + "' on " +
                    fam.describe() + " at T = " + std::to_string(b.instances) +
                    (raw_numbers.empty() ? "" : " (" + raw_numbers + ")") + ", a fresh sample (seed=" +
                    std::to_string(c.seed) + ", T = " + std::to_string(c.budget.instances) + ") gives " +
                    status_name(c.outcome.status) + (fresh_numbers.empty() ? "" : " (" + fresh_numbers + ")") +
                    "; fuzz input " + to_hex(data, size);
  } catch (const KernelFault&) {  // the kernel faults on its fresh sample: a finding as the raw failure says it
  }
  return r;
}

// Step 2: the observed error of instance 0, with the model's own event trace when it is a CPU model, recorded as
// feedback; returns the O error. The kernel runs through the memo with the family's tiles applied exactly as the
// properties apply them (tiled(), property_util.h), so the properties of step 4 reuse this run instead of
// repeating it.
double KernelTarget::observe(const Family& fam, const Instance& inst) {
  memo_->clear();
  std::unique_ptr<Kernel> holder;
  const Kernel& observed = tiled(*memo_, fam, holder);
  const ForwardOutput got = observed.forward(inst);
  const ModelTrace* trace = static_cast<const MemoKernel&>(observed).trace_of(inst);
  const ReferenceForward ref = reference_forward(inst);
  const ErrorSummary eo = o_error(got.o, ref.o, kernel_->caps().output_format, fam.problem.head_dim);
  const ErrorSummary el = o_error(got.lse, ref.lse, Format::kF32, 1);
  Observation ob;
  ob.generator = generator_slot(fam.generator);
  ob.max_ulp_o = eo.max_ulp;
  ob.max_ulp_lse = el.max_ulp;
  ob.mean_signed_ulp_o = eo.mean_signed_ulp;
  ob.nonzero_errors = eo.nonzero;
  ob.positive_errors = eo.positive;
  record(ob);
  if (std::isfinite(eo.max_ulp)) g_max_err = std::max(g_max_err, eo.max_ulp);
  g_cells.insert({ob.generator, ulp_bucket(eo.max_ulp)});
  if (trace) record_trace(*trace);
  record_score_events(inst);
  bool nan_out = false, inf_out = false;
  for (double x : got.o) nan_out |= std::isnan(x), inf_out |= std::isinf(x);
  if (nan_out) record_event(Event::kNanOut);
  if (inf_out) record_event(Event::kInfOut);
  return eo.max_ulp;
}

RunResult KernelTarget::run_input(const std::uint8_t* data, std::size_t size, bool abort_on_finding) {
  RunResult res;
  ++g_runs;
  FuzzInput in = decode_input(data, size);
  // A kernel that takes no tiles (CUDA, cuDNN, plugins: with_tiles gives none) runs every tiling alike: its family
  // carries the kernel's own (0), so inputs that differ only in the tile bytes are one family (the memo below) and
  // its cases name no tiles it never ran (shrink.cpp, the same rule).
  if (!takes_tiles_) in.family.tile_q = in.family.tile_k = 0;
  g_long_runs += is_long(in.family.problem);
  g_multi_tile_runs += std::max(in.family.problem.n_q, in.family.problem.n_k) > 64;
  // The memos' key: the decoded family's canonical bytes (decode(encode(f)) == f for a decoded f), taken before
  // fit_to_caps, which is a function of it (after it the encoding can merge families: a clipped head_dim keeps
  // its old scale, which the byte code cannot express). Value edits and the bias flag are left out.
  FuzzInput family_only;
  family_only.family = in.family;
  const std::vector<std::uint8_t> key = encode_input(family_only);
  fit_to_caps(in.family, kernel_->caps());
  const Family& fam = in.family;
  if (!kernel_->caps().unsupported_reason(fam.problem, false).empty()) {
    res.skipped = true;
    res.message = kernel_->caps().unsupported_reason(fam.problem, false);
    return res;
  }
  auto finding = [&](const Property& p, const Outcome& o, const Budget& b) {
    res.finding = true;
    res.property = p.name;
    res.message = o.message;
    if (cfg_.keep_going && reported_.count({p.name, fam.generator})) return;  // seen and saved: count only
    Case c = case_from_outcome(o, b, "fuzz");
    c.kernel = cfg_.kernel;
    // A kernel fault's case says so first: `attncheck fuzz` then neither shrinks it (its groups keep raw cases;
    // `check` shrinks faults but hangs) nor runs the faulting kernel again per group to replay it (a hang cost its
    // time limit each).
    c.note = (is_kernel_fault_message(o.message) ? o.message + " | " : std::string()) + "fuzz input " +
             to_hex(data, size);
    try {
      res.finding_path = write_finding(cfg_.findings_dir, c);  // on disk before anything is said
    } catch (const std::exception& e) {
      // Not saved (a full disk): said, and not marked as reported, so the next input that fails this way tries
      // again. It was marked before the write, and the write's Error ended the run as a skipped input: every
      // finding of the group was dropped without a word. `attncheck fuzz` reads these lines: a group none of whose
      // cases could be saved is its exit 2.
      res.save_error = e.what();
      char line[1024];  // one write below PIPE_BUF: lines from several jobs on one pipe do not interleave
      std::snprintf(line, sizeof line, "attncheck-fuzz: error: cannot save a finding (%s fails '%s' on %s): %.600s\n",
                    cfg_.kernel.c_str(), p.name.c_str(), fam.generator.c_str(), e.what());
      std::fputs(line, stderr);
      if (cfg_.error_fd >= 0) (void)!::write(cfg_.error_fd, line, std::strlen(line));
      if (abort_on_finding && !cfg_.keep_going) std::abort();  // libFuzzer keeps the input as a crash artifact
      return;
    }
    if (cfg_.keep_going) reported_.insert({p.name, fam.generator});
    if (cfg_.quiet)
      std::fprintf(stderr, "attncheck-fuzz: FINDING %s fails '%s': %s\n", cfg_.kernel.c_str(), p.name.c_str(),
                   res.finding_path.c_str());
    else
      std::fprintf(stderr, "attncheck-fuzz: FINDING %s fails '%s' on %s\n  %s\n  case: %s\n  replay: attncheck replay %s\n",
                   cfg_.kernel.c_str(), p.name.c_str(), fam.describe().c_str(), o.message.c_str(),
                   res.finding_path.c_str(), res.finding_path.c_str());
    if (abort_on_finding && !cfg_.keep_going) std::abort();
  };
  // On every way out of this run (an early return, an Error): step 3's events, recorded last so that what steps 2
  // and 4 add to the counters can be kept apart from them, and the counters a first run set aside (below).
  bool pnan = false, pinf = false, prejected = false;
  CounterDelta earlier;
  struct AtExit {
    std::function<void()> f;
    ~AtExit() { f(); }
  } at_exit{[&] {
    if (pnan) record_event(Event::kProbeNanOut);
    if (pinf) record_event(Event::kProbeInfOut);
    if (prejected) record_event(Event::kProbeRejected);
    add_counters(earlier);
  }};
  try {
    // Steps 2 and 4 depend on the family alone; the value edits make only step 3's probe. A family met before
    // is answered from family_memo_: the feedback counters its first run added, its O error and its findings
    // (reported again the same way), so only the probe runs. (Not for the planted kernel, whose experiment
    // counts the runs of generated instances.) The memo assumes what `deterministic` checks, that the kernel is
    // a function of its input: a flaky kernel gets that check once per family here (the probe still runs it on
    // every input).
    const FamilyRun* seen = planted_ ? nullptr : family_memo_.find(key);
    // A first run counts from zero (what was there is added back at the end), so what it stores is exactly what
    // steps 2 and 4 recorded, saturation included.
    if (!seen) earlier = take_counters();
    const std::shared_ptr<const Instance> shared_inst =
        seen ? seen->inst : make_instance_shared(fam, 0);  // the properties' instance 0
    const Instance& inst = *shared_inst;
    // Step 3: the probe instance (values the generators do not reach): faults and feedback only (at_exit).
    // (Not for the planted kernel: its experiment measures the climb on generated instances, and a special
    // value in a probe is a one-mutation cliff that would reach any error level.)
    bool family_faulted = seen && seen->faulted;
    std::string step2_fault;  // the kernel fault step 2 met on the family's instance 0, as check would say it
    const auto probe = [&] {
      if (in.edits.empty() || planted_) return;
      try {
        const ForwardOutput pg = kernel_->forward(apply_edits(inst, in.edits));
        for (double x : pg.o) pnan |= std::isnan(x), pinf |= std::isinf(x);
      } catch (const KernelFault& e) {
        // A plugin kernel crashed (hung, ...) in its isolated call on the probe's values: no family reproduces
        // them, so the input itself is the finding, as an in-process crash would be (libFuzzer's crash artifact).
        // Not when the family's own instance faulted too: its finding says it (replayable), and aborting on every
        // such input ended a one-worker campaign at its first input with edits.
        if (family_faulted) {
          prejected = true;
          return;
        }
        std::fprintf(stderr, "attncheck-fuzz: FINDING %s: kernel fault on the probe input: %s\n", cfg_.kernel.c_str(),
                     e.what());
        std::abort();
      } catch (const Error&) {
        prejected = true;
      }
    };
    if (seen) {
      add_counters(seen->added);
      res.max_ulp_o = seen->max_ulp_o;
      ++family_replays_, ++g_family_replays;
      probe();
      Budget b;
      b.instances = cfg_.instances;
      for (const auto& [p, o] : seen->failures) {  // as the first run reported them (keep-going: counted)
        finding(*p, o, b);
        if (!cfg_.keep_going) return res;
      }
    } else {
      try {
        res.max_ulp_o = observe(fam, inst);  // step 2
      } catch (const KernelFault& e) {
        res.max_ulp_o = 0;  // nothing observed; step 4's first property meets the fault and reports it
        family_faulted = true;
        step2_fault = kernel_fault_message(e);
      }
      probe();  // before the properties, which may end the run with a finding
      // Step 4: per-instance properties on the family's own instances (replayable by `attncheck replay`).
      std::vector<std::pair<const Property*, Outcome>> failures;
      Budget b;
      b.instances = cfg_.instances;
      for (std::size_t i = 0; i < per_instance_.size(); ++i) {
        const Property& p = *per_instance_[i];
        memo_->set_lend_once(lend_once_[i] != 0);
        const Outcome o = checked(p, *memo_, fam, b);
        record_property(property_index_[i], static_cast<int>(o.status));
        if (o.status == Status::kFail) {
          failures.emplace_back(&p, o);
          finding(p, o, b);
        }
        if (res.finding && !cfg_.keep_going) return res;  // keep-going: the bias step still runs
      }
      // A fault step 2 met that no per-instance property reported (none configured: `--property none`, "crashes and
      // sanitizer faults only"; or a flaky fault the properties' own run did not meet) is a finding as it is, of the
      // first per-instance property, else `finite` (a fault is no property's: it carries it), on the family's
      // instance 0, which its check runs first. It was dropped, the campaign reading "no finding" (a fuzz audit,
      // session 40), and the memo's `faulted` then passed over the family's probe faults as reported. Where step 5's
      // bias batch runs on this input with no per-instance property before it, that batch meets the fault instead.
      const bool bias_meets_it = in.run_bias && !across_.empty() && per_instance_.empty();
      if (!step2_fault.empty() && failures.empty() && !bias_meets_it) {
        const Property& p = per_instance_.empty() ? get_property("finite") : *per_instance_.front();
        failures.emplace_back(&p, fault_outcome(p, *memo_, fam, step2_fault));
        finding(p, failures.back().second, b);
        if (!cfg_.keep_going) return res;
      }
      if (!planted_)
        family_memo_.put(key, FamilyRun{shared_inst, nonzero_counters(), res.max_ulp_o, std::move(failures), family_faulted});
    }
    // Step 5: the bias property on a small batch.
    if (in.run_bias && !across_.empty()) {
      Budget bb;
      bb.instances = cfg_.bias_instances;
      const std::vector<BiasRun>* runs = bias_memo_.find(key);
      const bool fresh_batch = !runs;
      if (!runs) {
        std::vector<BiasRun> fresh;
        for (const Property* p : across_) fresh.push_back(bias_run(*p, fam, bb, data, size));
        runs = &bias_memo_.put(key, std::move(fresh));
        ++g_bias_batches, ++bias_batches_;
      }
      for (std::size_t i = 0; i < across_.size(); ++i) {
        const Property* p = across_[i];
        const Outcome& o = (*runs)[i].raw;
        if (o.status == Status::kDegenerate) record_event(Event::kBiasDegenerate);
        if (o.status == Status::kSkip) record_event(Event::kBiasSkipped);
        record_bias(std::fabs(stat(o.stats, {"mean_ulp", "mean", "abs_mean_ulp", "max_abs_mean_ulp"})),
                    std::fabs(stat(o.stats, {"z", "abs_z", "max_abs_z"})));
        if (o.status != Status::kFail) continue;
        if (const std::string& line = (*runs)[i].unconfirmed; !line.empty()) {  // not a finding: said, not written
          res.unconfirmed = line;
          if (fresh_batch) std::fprintf(stderr, "%s\n", line.c_str());
          continue;
        }
        finding(*p, o, bb);
      }
    }
  } catch (const Error& e) {
    res.skipped = true;
    res.message = e.what();
  }
  return res;
}

}  // namespace attncheck::fuzz
