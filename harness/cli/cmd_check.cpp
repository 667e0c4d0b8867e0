// cmd_check.cpp — `attncheck check`: run a suite's (property, family) checks on kernels, shrink and save
// every failure to the findings directory *before* printing it, then print a kernel × property table and
// optionally write JSON / JUnit reports.
//
// Determinism: each check is a pure function of (kernel, family, budget); --seed mixes into every family's
// seed (mix64), so one seed names one run. Progress goes to stderr: a rewritten line on a TTY, else a line
// at most every kProgressEvery seconds (naming the checks still running when one runs long). Exit 0 all pass,
// 1 any failure, 2 usage/input error (or a check that ran out of memory); stopped by SIGINT/SIGTERM with no
// failure: ended by that signal (128 + N) once the summary and reports are written.
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "harness/cli/commands.h"
#include "harness/cli/stop_signals.h"
#include "harness/corpus.h"
#include "harness/plugin/plugin_cli.h"
#include "harness/run_report.h"
#include "harness/stdout_on_stderr.h"
#include "properties/family_internal.h"  // param_domain, in_domain
#include "properties/property_util.h"
#include "properties/report.h"
#include "properties/shrink.h"

namespace attncheck::cli {

namespace {

// The kernels every default run checks: the four models and the two null controls (design.md).
const char* const kBuiltinKernels[] = {"fa2", "fa2-fixed", "paper", "paper-fixed", "oracle", "stochastic"};

// The CPUs this process may use: its affinity mask (as `nproc` counts them), and no more than a cgroup's CPU quota
// (a container started with --cpus=2 on a 128-CPU host sees 128 in its mask); at least 1.
int default_jobs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = ::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0
              ? CPU_COUNT(&set)
              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // cgroup v2: "max 100000" (no quota) or "<quota> <period>"; v1: cfs_quota_us (-1: none) and cfs_period_us.
  double quota = -1, period = 0;
  if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
    std::string q;
    v2 >> q >> period;
    if (q != "max") quota = std::atof(q.c_str());
  } else {
    std::ifstream("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") >> quota;
    std::ifstream("/sys/fs/cgroup/cpu/cpu.cfs_period_us") >> period;
  }
  if (quota > 0 && period > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(quota / period))));
  return std::max(1, n);
}

struct CheckOptions {
  std::vector<std::string> kernels, families, properties;
  std::string suite = "default";
  int instances = 0;  // 0 = the Budget default
  double seconds = -1;  // < 0 = the Budget default
  std::string seed_text;
  std::uint64_t seed = 0;
  bool seed_given = false, json_given = false, junit_given = false;
  std::string json_path, junit_path;
  std::string baseline_path;  // --baseline FILE
  bool baseline_given = false;
  std::string findings = "corpus/findings";
  bool no_shrink = false;
  bool quiet = false;
  int jobs = 0;  // checks run at once (-j); 0 = default_jobs(), read when `check` runs, not at every start-up
};

using Clock = std::chrono::steady_clock;

// Progress on standard error (not with --quiet): on a terminal one line, rewritten as each check starts; else a line
// at most every kProgressEvery s, as a check starts or, while checks run past it, naming them (a check of a huge
// --instances, or a plugin call waiting out its time limit, said nothing until it ended). Every call, and the
// ticker's lines, hold the run's printing mutex `guard` (so they do not cut into a FAIL block or each other).
class Progress {
 public:
  Progress(std::size_t total, bool quiet, std::mutex& guard)
      : total_(total), tty_(!quiet && ::isatty(2)), quiet_(quiet), guard_(guard) {
    try {  // without a thread for it (a pids limit), the lines come as checks start, as before the ticker
      if (!quiet_ && !tty_) ticker_ = std::thread([this] { tick(); });
    } catch (const std::system_error&) {
    }
  }
  ~Progress() { stop(); }
  // A check starts (`done` checks have ended); `slot` names it until ended().
  void show(const void* slot, std::size_t done, const std::string& what) {
    if (quiet_) return;
    running_[slot] = {what, Clock::now()};
    done_ = done;
    if (tty_) {
      std::string line = "[" + std::to_string(done + 1) + "/" + std::to_string(total_) + "] " + what;
      if (line.size() > 100) line.resize(100);
      std::cerr << "\r\033[K" << line << std::flush;
      shown_ = true;
    } else if (seconds_since(last_) >= kProgressEvery) {
      std::cerr << "attncheck: " << done << "/" << total_ << " checks done, now " << what << "\n";
      last_ = Clock::now();
    }
  }
  void ended(const void* slot, std::size_t done) {
    running_.erase(slot);
    done_ = done;
  }
  void clear() {
    if (tty_ && shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }
  // Ends the ticker (the caller does not hold guard).
  void stop() {
    if (!ticker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(guard_);
      stop_ = true;
    }
    wake_.notify_all();
    ticker_.join();
  }

 private:
  void tick() {
    std::unique_lock<std::mutex> lock(guard_);
    while (!wake_.wait_for(lock, std::chrono::duration<double>(1.0), [this] { return stop_; })) {
      if (running_.empty() || seconds_since(last_) < kProgressEvery) continue;
      std::string names;
      for (const auto& [slot, started] : running_)
        names += (names.empty() ? "" : "; ") + started.first + " (" +
                 std::to_string(static_cast<long>(seconds_since(started.second))) + " s)";
      std::cerr << "attncheck: " << done_ << "/" << total_ << " checks done, still running: " << names << "\n";
      last_ = Clock::now();
    }
  }
  std::size_t total_, done_ = 0;
  bool tty_, quiet_, shown_ = false, stop_ = false;
  Clock::time_point last_ = Clock::now();
  std::map<const void*, std::pair<std::string, Clock::time_point>> running_;  // the checks started, not ended
  std::mutex& guard_;
  std::condition_variable wake_;
  std::thread ticker_;
};

std::vector<const Kernel*> pick_kernels(const CheckOptions& opt) {
  Registry& r = default_registry();
  std::vector<const Kernel*> out;
  if (!opt.kernels.empty()) {
    for (const auto& name : opt.kernels) {  // Error names the known kernels; one kernel named twice runs once
      const Kernel* k = &r.get(name);
      if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
    return out;
  }
  for (const char* name : kBuiltinKernels) out.push_back(&r.get(name));
  for (const Kernel* k : r.all())  // a GPU's kernels, and the kernels of every --plugin (they were loaded, then
    if (k->name().rfind("cuda:", 0) == 0 || k->name().rfind("plugin:", 0) == 0) out.push_back(k);  // left out)
  return out;
}

// --family GENERATOR[key=value,...]: the suite's families of GENERATOR with those values (a UX review, session 33:
// the parameters `list` prints could not be set, and every default, bias and quick family is d16 or d7, so a kernel of
// head dims 64 and 128 alone could run none of them). Keys: a generator parameter (family.cpp), or the shape.
struct FamilySpec {
  std::string text, generator;
  KernelParams values;
};
const std::vector<std::string> kShapeKeys = {"batch", "heads_q", "heads_kv", "n_q", "n_k", "head_dim",
                                             "causal", "scale", "tile_q", "tile_k"};

bool is_shape_key(const std::string& key) {
  return std::find(kShapeKeys.begin(), kShapeKeys.end(), key) != kShapeKeys.end();
}


FamilySpec parse_family(const std::string& text) {
  FamilySpec s;
  s.text = text;
  std::tie(s.generator, s.values) = parse_named_params(text, "--family");
  std::vector<std::string> generator_names;
  for (const auto& info : generators()) generator_names.push_back(info.name);
  if (std::find(generator_names.begin(), generator_names.end(), s.generator) == generator_names.end())
    throw Error("unknown family/generator '" + s.generator + "'" + did_you_mean(s.generator, generator_names) +
                " (known: " + comma_list(generator_names) + ")");
  const std::vector<std::string> params = family_param_names();
  std::vector<std::string> keys = params;
  keys.insert(keys.end(), kShapeKeys.begin(), kShapeKeys.end());
  for (const auto& [key, value] : s.values) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw Error("--family '" + text + "': unknown key '" + key + "'" + did_you_mean(key, keys) + " (parameters: " +
                  comma_list(params) + "; the shape: " + comma_list(kShapeKeys) + ")");
    // The shape's integers here (Problem holds ints); the generator's parameters in their domains below.
    if (!is_shape_key(key) || key == "scale") continue;
    const bool flag = key == "causal", tile = key == "tile_q" || key == "tile_k";
    if ((flag && value != 0 && value != 1) ||
        (!flag && (value != std::floor(value) || value < (tile ? 0 : 1) || value > 2147483647.0))) {
      char shown[64];
      std::snprintf(shown, sizeof shown, "%.17g", value);
      throw Error("--family '" + text + "': " + key + " = " + shown + " is not " +
                  (flag ? "0 or 1" : tile ? "an integer >= 0 (0 = the kernel's own tile)" : "a positive integer"));
    }
  }
  return s;
}

// `f` with the spec's values; the scale follows a new head_dim where it was the old one's default, 1/sqrt(d).
// Throws Error naming the spec where the family is not one a generator can make, or is too large.
Family with_values(Family f, const FamilySpec& s) {
  const int old_d = f.problem.head_dim;
  Problem& p = f.problem;
  for (const auto& [key, value] : s.values) {
    const int n = static_cast<int>(value);
    if (key == "batch") p.batch = n;
    else if (key == "heads_q") p.heads_q = n;
    else if (key == "heads_kv") p.heads_kv = n;
    else if (key == "n_q") p.n_q = n;
    else if (key == "n_k") p.n_k = n;
    else if (key == "head_dim") p.head_dim = n;
    else if (key == "causal") p.causal = value != 0;
    else if (key == "scale") p.scale = value;
    else if (key == "tile_q") f.tile_q = n;
    else if (key == "tile_k") f.tile_k = n;
    else f.params[key] = value;
  }
  if (!s.values.count("scale") && p.head_dim != old_d && p.scale == Problem::default_scale(old_d))
    p.scale = Problem::default_scale(p.head_dim);
  if (s.values.count("mask")) p.has_mask = s.values.at("mask") != 0;  // as the suites set it (suites.cpp)
  try {
    p.validate();
    if (!within_case_limits(p))
      throw Error("shape " + p.describe() + " is larger than a finding could be saved with (" + kCaseLimits + ")");
    make_instance(f, 0);  // the generator's own checks: every parameter in its domain, the shape it can fill
  } catch (const Error& e) {
    throw Error("--family '" + s.text + "': " + e.what());
  }
  return f;
}

// The shortest decimal that reads back as v (0.1, not 0.10000000000000001; 1000, not 1e+03), for a command line.
std::string shortest(double v) {
  char text[32];
  if (v == std::floor(v) && std::fabs(v) < 1e6) {
    std::snprintf(text, sizeof text, "%.0f", v);
    return text;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

// `base` with the spec's values, each of them acting on what the generator makes. Parameters are shared (they
// compose: normal[ties=3] makes ties), so a parameter the generator does not list is refused where it changes none of
// the first instances (normal[rank=2], normal[pad=3] without mask=1; param_acts): it was accepted and did nothing,
// and the run read as a test of it.
// A count of the spec's past the family's shape acts as the limit (pad 1000 at n_k 32 masks 31 keys): such a check
// would be a test of a value it never made, reported and saved with it. `past_the_shape` (when given) says why, and
// the caller leaves the check out (or refuses the spec, where that leaves none). The family comes back with every
// count as it acts (with_acting_params): a shape key may shrink a suite's own count (near_tie[n_k=3]: ties 4 acts
// as 3).
Family with_acting_values(const Family& base, const FamilySpec& s, std::string* past_the_shape = nullptr) {
  const Family f = with_values(base, s);
  for (const ClampedParam& c : clamped_params(f))
    if (s.values.count(c.key) && past_the_shape && past_the_shape->empty())
      *past_the_shape = c.key + " = " + shortest(c.given) + " acts as " + shortest(c.acting) + " in " + f.generator +
                        " at " + f.problem.describe() + " (" + c.why + ")";
  const auto& listed = default_family(s.generator).params;
  for (const auto& [key, value] : s.values) {
    if (is_shape_key(key) || listed.count(key) || param_acts(f, key)) continue;
    std::vector<std::string> listing;
    for (const auto& gen : generators())
      if (gen.defaults.count(key)) listing.push_back(gen.name);
    throw Error("--family '" + s.text + "': " + key + " changes nothing " + s.generator + " makes here, at this value " +
                "or others (its first instances are the same bits without it)" +
                (listing.empty() ? "" : "; " + comma_list(listing) + " list" + (listing.size() == 1 ? "s" : "") + " it"));
  }
  return with_acting_params(f);
}

// A check the run will make: the suite entry, and the --family argument that picks it again (the spec it came from,
// or its generator) for RunEntry::recheck.
struct Picked {
  SuiteEntry entry;
  std::string family_arg;
  int picks = 1;  // the run's checks of this property that family_arg picks, this one included (pin_family_args)
};


// A family's value of a --family key (a shape key or a parameter), or nothing where it has none to write.
std::optional<double> family_value(const Family& f, const std::string& key) {
  const Problem& p = f.problem;
  if (key == "batch") return p.batch;
  if (key == "heads_q") return p.heads_q;
  if (key == "heads_kv") return p.heads_kv;
  if (key == "n_q") return p.n_q;
  if (key == "n_k") return p.n_k;
  if (key == "head_dim") return p.head_dim;
  if (key == "causal") return p.causal ? 1 : 0;
  if (key == "scale") return p.scale;
  if (key == "tile_q") return f.tile_q;
  if (key == "tile_k") return f.tile_k;
  if (const auto it = f.params.find(key); it != f.params.end()) return it->second;
  const auto& listed = default_family(f.generator).params;  // the value the generator takes without it
  if (const auto it = listed.find(key); it != listed.end()) return it->second;
  return std::nullopt;
}

// Where several picked checks of one property share a --family argument (the bias suite's five tied_max families:
// `--family tied_max` picks them all), each gets the values that tell it from the others (`tied_max[v_sign=-1,...]`),
// so its re-check line runs it alone. Kept as it was where the values cannot be written or do not pick it alone.
void pin_family_args(std::vector<Picked>& out) {
  std::map<std::pair<std::string, std::string>, std::vector<Picked*>> groups;
  for (Picked& p : out) groups[{p.entry.property, p.family_arg}].push_back(&p);
  std::vector<std::string> keys = kShapeKeys;
  const std::vector<std::string> params = family_param_names();
  keys.insert(keys.end(), params.begin(), params.end());
  for (auto& [_, group] : groups) {
    if (group.size() < 2) continue;
    std::vector<std::string> differing;  // keys some member has another value of (or none)
    for (const std::string& key : keys)
      for (const Picked* other : group)
        if (family_value(other->entry.family, key) != family_value(group[0]->entry.family, key)) {
          differing.push_back(key);
          break;
        }
    std::vector<std::string> pinned(group.size());
    for (std::size_t i = 0; i < group.size(); ++i) {
      const std::string& arg = group[i]->family_arg;
      std::string values;
      for (const std::string& key : differing)  // a key it has no value for is left out: the check below decides
        if (const auto v = family_value(group[i]->entry.family, key))
          values += (values.empty() ? "" : ",") + key + "=" + shortest(*v);
      if (values.empty()) continue;
      const std::string text = arg.back() == ']' ? arg.substr(0, arg.size() - 1) + "," + values + "]"
                                                 : arg + "[" + values + "]";
      // It pins only if every member of the group, given those values, becomes this member's family.
      try {
        const FamilySpec spec = parse_family(text);
        const std::string want = family_to_json(group[i]->entry.family).dump();
        bool alone = true;
        for (const Picked* other : group) {
          std::string past;  // a member the spec's counts do not fit is left out of the run (pick_entries)
          const Family g = with_acting_values(other->entry.family, spec, &past);
          alone = alone && (!past.empty() || family_to_json(g).dump() == want);
        }
        if (alone) pinned[i] = text;
      } catch (const Error&) {  // a value a generator refuses at another member's shape: keep the shared argument
      }
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (pinned[i].empty()) group[i]->picks = static_cast<int>(group.size());
      else group[i]->family_arg = pinned[i];
    }
  }
}

std::vector<Picked> pick_entries(const CheckOptions& opt) {
  std::vector<SuiteEntry> all = suite(opt.suite);  // Error on an unknown suite
  std::vector<FamilySpec> specs;
  for (const auto& text : opt.families) specs.push_back(parse_family(text));
  for (const auto& p : opt.properties) get_property(p);  // Error lists the known properties
  std::vector<Picked> out;
  std::vector<std::vector<std::string>> left_out(specs.size());  // per spec: checks its counts do not fit, and why
  std::vector<int> kept(specs.size(), 0);
  std::set<std::string> checks;  // property and family of each entry in `out`
  const auto property_wanted = [&](const SuiteEntry& e) {
    return opt.properties.empty() ||
           std::find(opt.properties.begin(), opt.properties.end(), e.property) != opt.properties.end();
  };
  for (auto& e : all) {
    if (!property_wanted(e)) continue;
    if (opt.seed_given) e.family.seed = reseeded(e.family.seed, opt.seed);
    if (specs.empty()) {
      const std::string generator = e.family.generator;
      out.push_back({std::move(e), generator});
      continue;
    }
    for (std::size_t i = 0; i < specs.size(); ++i) {  // each spec of its generator: the entry with the spec's values
      const FamilySpec& s = specs[i];
      if (s.generator != e.family.generator) continue;
      SuiteEntry copy = e;
      if (!s.values.empty()) {
        std::string past;
        copy.family = with_acting_values(e.family, s, &past);
        if (!past.empty()) {
          left_out[i].push_back(past);
          continue;
        }
        // A variant's label may name its shape ("sliding_window, n_q 24 > n_k 16"): a new shape drops it.
        const bool reshaped =
            std::any_of(s.values.begin(), s.values.end(), [](const auto& kv) { return is_shape_key(kv.first); });
        const std::string label = e.label.empty() || reshaped ? e.family.generator : e.label;
        copy.label = label + " " + s.text.substr(s.text.find('['));
      }
      // One check per property and family: `--family normal --family 'normal[]'`, or values the family has already,
      // ran it twice under one name (JUnit's and compare_verdicts' keys).
      ++kept[i];
      if (checks.insert(copy.property + " " + family_to_json(copy.family).dump()).second)
        out.push_back({std::move(copy), s.text});
    }
  }
  // A spec whose counts fit none of its checks is refused; one that fits some runs those and says which it left out
  // (--suite gpu's first_tile_masked at n_k 32 and 160: first_masked=100 fits the second only).
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (left_out[i].empty()) continue;
    const bool fraction = left_out[i].front().find("(an integer") != std::string::npos;
    if (kept[i] == 0)
      throw Error("--family '" + specs[i].text + "': " + left_out[i].front() + "; give a value that acts as given (" +
                  (fraction ? "an integer" : "a count that fits, or a larger shape") + ")");
    std::cerr << "attncheck: note: --family '" << specs[i].text << "' leaves out " << left_out[i].size() << " of its "
              << left_out[i].size() + kept[i] << " checks, where " << left_out[i].front()
              << (left_out[i].size() > 1 ? ", and others" : "") << "\n";
  }
  if (out.empty()) {
    // Where such checks are: `--property unbiased --family sink` is in the bias suite, gpu_matches_cpu_model in gpu
    // (it said only "no check ... matches": a UX review, session 34).
    std::vector<std::string> elsewhere;
    for (const std::string& other : suite_names()) {
      if (other == opt.suite) continue;
      const std::vector<SuiteEntry> entries = suite(other);
      const bool any = std::any_of(entries.begin(), entries.end(), [&](const SuiteEntry& e) {
        return property_wanted(e) && (specs.empty() || std::any_of(specs.begin(), specs.end(), [&](const FamilySpec& s) {
                                        return s.generator == e.family.generator;
                                      }));
      });
      if (any) elsewhere.push_back("--suite " + other);
    }
    throw Error("no check of suite '" + opt.suite + "' matches the --family/--property filters" +
                (elsewhere.empty() ? std::string(" (nor of any other suite)")
                                   : "; " + comma_list(elsewhere) + " " + (elsewhere.size() == 1 ? "has" : "have") +
                                         " such checks"));
  }
  pin_family_args(out);
  // Reports, JUnit and --baseline name a check by its printed family (check_name), whose numbers keep 6 significant
  // digits: two --family values closer than that were two checks under one name (a review, session 35).
  std::map<std::string, std::string> named;  // check name without the kernel -> the family as JSON
  for (const Picked& p : out) {
    RunEntry e;
    e.outcome.property = p.entry.property;
    e.checked = p.entry.family.describe();
    const std::string family = family_to_json(p.entry.family).dump();
    const auto [it, is_new] = named.emplace(check_name(e), family);
    if (!is_new && it->second != family)
      throw Error("--family: two families print alike, as '" + it->first.substr(3) + "' (reports and --baseline "
                  "name a check by it, numbers to 6 significant digits): give values that differ sooner");
  }
  return out;
}

Outcome check_one(const Property& p, const Kernel& k, const Family& f, const Budget& b, bool shrink) {
  const auto t0 = Clock::now();
  // The outcome of a check that ended in an exception.
  auto ended = [&](Status status, const std::string& message) {
    Outcome o;
    o.property = p.name;
    o.kernel = k.name();
    o.family = f;
    o.status = status;
    o.message = message;
    o.seconds = seconds_since(t0);
    return o;
  };
  try {
    if (shrink) return check_and_shrink(p, k, f, b);
    Outcome o = p.check(k, f, b);
    if (o.status == Status::kFail && o.report.empty()) o.report = failure_report(p, k, o);
    return o;
  } catch (const Interrupted&) {
    throw;  // a stop request (Ctrl-C): the check has no verdict, run_check stops the run
  } catch (const std::bad_alloc&) {
    throw;  // the machine's memory, not the kernel's verdict (a null control "failed" on it): run_slot says so
  } catch (const Unsupported& e) {
    // The kernel declined the problem at run time (harness/problem.h): a skip, as for capabilities.
    return ended(Status::kSkip, e.what());
  } catch (const KernelFault& e) {
    // The kernel crashed, hung, returned an error or wrote outside its outputs: a finding, saved and replayable (the
    // family reproduces it). A crash, an error or a stray write shrinks to the smallest family that faults the same
    // way (a UX review, session 33: a plugin's SIGSEGV was reported on its 16x32 family as found); a hang does not
    // (each try would cost the call's time limit).
    Outcome o = ended(Status::kFail, kernel_fault_message(e));
    o.instance_index = e.instance >= 0 ? static_cast<std::uint64_t>(e.instance) : 0;
    if (shrink && shrinks_fault(o.message)) {
      Outcome s = shrink_failure(p, k, b, o, default_shrink_options());
      if (s.shrink_steps > 0) s.message_checked = o.message, s.stats_checked = o.stats;  // as check_and_shrink
      s.report = failure_report(p, k, s);  // the minimal case's inputs; its outputs: "unavailable", the fault
      return s;
    }
    o.report = "kernel:   " + k.name() + "\nproperty: " + p.name + "\nverdict:  " + o.message +
               "\nfamily:   " + f.describe() + "\n";
    return o;
  } catch (const std::exception& e) {
    // A check that throws (a generator bug, a harness error) is a failure to report, not a reason to stop.
    return ended(Status::kFail, std::string("error: ") + e.what());
  }
}

// Whether two report paths name one regular file, existing or to be created: the second report would replace the
// first. A stream (a device such as /dev/null, a FIFO, a terminal) takes both in turn; standard output ("-" or a
// name for it) takes one report only (run_check).
bool one_regular_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && S_ISREG(sa.st_mode);
  if (ea || eb) return false;
  // Neither exists: compare where they would be created. absolute() first: weakly_canonical leaves a relative path
  // whose first component does not exist relative ("r.out"), but resolves "./r.out" to /cwd/r.out. A dangling link
  // is not followed: the report's rename replaces the link itself.
  const auto where = [](const std::string& p) {
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(p, ec);
    return ec ? std::filesystem::path() : std::filesystem::weakly_canonical(abs, ec);
  };
  const auto ca = where(a), cb = where(b);
  return !ca.empty() && ca == cb;
}

// Whether a report path is standard output: "-", or a name for the regular file, pipe or socket stdout already is
// (/dev/stdout, /proc/self/fd/1, the file `> out.txt` redirected it to). Such a report is all that goes to standard
// output; the terminal report goes to standard error (StdoutOnStderr: at the descriptor, so a plugin's own writes
// move too). Written as a file, /dev/stdout was opened a second time: on a redirected regular file the open
// truncated what the tables had written, and the JSON then sat inside the text (`json.load` failed); on a pipe it
// came out ahead of the tables still buffered. A device is not taken for stdout (`--json /dev/null >/dev/null`: the
// same inode, but both streams go there in turn, as before).
bool names_stdout(const std::string& path) {
  if (path == "-") return true;
  struct stat a {}, b {};
  return ::stat(path.c_str(), &a) == 0 && ::fstat(1, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
         (S_ISREG(a.st_mode) || S_ISFIFO(a.st_mode) || S_ISSOCK(a.st_mode));
}

int run_check(const CheckOptions& opt) {
  const auto t0 = Clock::now();
  if (const char* rc = std::getenv("RC_PARAMS"))  // attncheck does not link RapidCheck (only the ctest tests do);
    std::cerr << "attncheck: RC_PARAMS=\"" << rc << "\" is ignored: attncheck does not use RapidCheck (its ctest "
              << "tests do); --seed N varies a run\n";  // it claimed to pass it through, and nothing changed
  if (!std::isfinite(opt.seconds)) throw Error("--seconds: not a finite number");
  const auto kernels = pick_kernels(opt);
  const auto entries = pick_entries(opt);
  const Baseline baseline = opt.baseline_given ? load_baseline(opt.baseline_path) : Baseline{};
  // Where findings and reports go is checked before anything runs: a finding is written before it is printed,
  // and a run must not end with it (or the report) unwritable.
  require_writable_dir(opt.findings, "--findings");
  if (!opt.no_shrink) (void)default_shrink_options();  // a bad ATTNCHECK_SHRINK_SECONDS is exit 2 before any check
  const bool json_stdout = opt.json_given && names_stdout(opt.json_path);
  const bool junit_stdout = opt.junit_given && names_stdout(opt.junit_path);
  if (json_stdout && junit_stdout)
    throw Error("--json and --junit both name standard output: one report there, the other to a file");
  if (opt.json_given && !json_stdout) require_writable_file(opt.json_path, "--json");
  if (opt.junit_given && !junit_stdout) require_writable_file(opt.junit_path, "--junit");
  if (opt.json_given && opt.junit_given && !json_stdout && !junit_stdout && one_regular_file(opt.json_path, opt.junit_path))
    throw Error("--json and --junit name one file (" + opt.junit_path + "): the JUnit report would replace the JSON one");
  // The baseline is not this run's report: as its own --json, a failure became known by the run that found it (a CI
  // retry turned red into green), and a run killed after the earlier report was removed left no baseline at all.
  const std::tuple<bool, bool, std::string, const char*> reports[] = {
      {opt.json_given, json_stdout, opt.json_path, "--json"}, {opt.junit_given, junit_stdout, opt.junit_path, "--junit"}};
  for (const auto& [given, to_stdout, path, option] : reports)
    if (opt.baseline_given && given && !to_stdout && one_regular_file(opt.baseline_path, path))
      throw Error(std::string(option) + " " + path + " is the --baseline file: keep the baseline apart (a file you "
                  "refresh by hand, `cp run.json baseline.json`, after a run whose failures you accept)");
  if (!baseline.interrupted.empty())
    std::cerr << "attncheck: warning: --baseline " << printable(baseline.path) << " is an interrupted run ("
              << printable(baseline.interrupted) << ", " << baseline.not_run << " checks not run): their failures here "
              << "count as new\n";
  // An earlier run's report at --json / --junit is removed before any check. Reports are written at the end: a run
  // interrupted or killed before it (Ctrl-C, a CI job's SIGTERM or time limit) left the earlier report in place, and a
  // CI step that reads the path anyway (a JUnit publisher run "always") took it, all passes perhaps, for this run's.
  // Now the report is this run's or missing. Only a regular file goes (not a link, device or pipe written in place;
  // not standard output's file), and require_writable_file has refused a saved case there.
  for (const auto& [given, to_stdout, path, option] : {std::tuple{opt.json_given, json_stdout, opt.json_path, "--json"},
                                                       std::tuple{opt.junit_given, junit_stdout, opt.junit_path, "--junit"}}) {
    struct stat st {};
    if (given && !to_stdout && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && std::remove(path.c_str()) != 0)
      throw Error(std::string(option) + " " + path + ": cannot remove the earlier report: " + std::strerror(errno));
  }
  StdoutOnStderr terminal(json_stdout || junit_stdout);  // a report on standard output is the only thing there
  RunReport report;
  for (const Kernel* k : kernels) report.kernels.push_back(k->name());
  report.suite = opt.suite;
  report.seed = opt.seed;
  report.seed_given = opt.seed_given;
  report.baseline = baseline.path;
  if (opt.instances > 0) report.budget.instances = opt.instances;
  if (opt.seconds >= 0) report.budget.seconds = opt.seconds;
  report.started_at = utc_now_iso8601();

  // The checks, kernel-major in suite order. Each is a pure function of (kernel, family, budget), so --jobs changes
  // when a check runs, not its outcome; results are printed and reported in this order whatever order they end in.
  struct Slot {
    const Kernel* kernel;
    const Picked* picked;
    RunEntry result;
    bool ran = false, done = false;
  };
  std::vector<Slot> slots;
  for (const Kernel* k : kernels)
    for (const Picked& e : entries) slots.push_back({k, &e, {}});
  // RunEntry::recheck: the options that chose this check, its own kernel, property and --family.
  const auto recheck = [&](const std::string& kernel, const Picked& e, bool is_plugin) {
    std::string args = "check -k " + shell_word(kernel);
    if (opt.suite != CheckOptions{}.suite) args += " --suite " + shell_word(opt.suite);
    args += " --property " + shell_word(e.entry.property) + " --family " + shell_word(e.family_arg);
    if (opt.seed_given) args += " --seed " + shell_word(opt.seed_text);
    if (opt.instances > 0) args += " --instances " + std::to_string(opt.instances);
    if (opt.seconds >= 0) args += " --seconds " + shortest(opt.seconds);
    if (opt.findings != CheckOptions{}.findings) args += " --findings " + shell_word(opt.findings);
    return is_plugin ? attncheck_command(args + plugin_replay_args(), plugin_replay_env()) : attncheck_command(args);
  };
  int unsaved = 0;  // failures whose case could not be written
  std::mutex mu;    // guards the slots' done flags, next/printed/finished, unsaved, the progress line and printing
  Progress progress(slots.size(), opt.quiet, mu);
  std::mutex device_mu;  // one CUDA check at a time (one device context)
  std::shared_mutex plugin_mu;  // a plugin's check holds it alone, every other check shares it (run_slot)
  std::size_t next = 0, printed = 0, finished = 0;
  std::map<std::string, std::string> faults_printed;  // fault_signature -> "property / generator" printed in full
  // Blocks on standard output are parted by a blank line; the first starts at the top (a run without failures began
  // with an empty line above its table: a UX review, session 48).
  bool stdout_used = false;
  const auto part = [&stdout_used] { return std::exchange(stdout_used, true) ? "\n" : ""; };
  // Prints, in suite order, every finished check not yet printed (the caller holds mu).
  const auto print_ready = [&] {
    for (; printed < slots.size() && slots[printed].done; ++printed) {
      const RunEntry& entry = slots[printed].result;
      if (!slots[printed].ran || entry.outcome.status != Status::kFail) continue;
      const Outcome& o = entry.outcome;
      progress.clear();
      std::cout << part() << "FAIL " << o.kernel << " / " << o.property << " / " << o.family.generator
                << (entry.known_failure ? "   (known: it failed in the baseline too)" : "") << "\n";
      // A kernel fault met again (a plugin that crashes on every call fails each property's first check) is said in
      // two lines, not a second whole block: the same inputs and "outputs unavailable" read as another bug (a UX
      // review, session 33). Its case is saved and replays as before.
      const std::string fault = fault_signature(o.message);
      const auto [first, is_new] = fault.empty() ? std::pair{faults_printed.end(), true}
                                                 : faults_printed.emplace(fault, o.property + " / " + o.family.generator);
      if (!is_new)
        std::cout << "  the same kernel fault as " << printable(first->second) << " above: "
                  << printable(o.message.substr(std::string("kernel fault: ").size())) << "\n  family: "
                  << o.family.describe() << "\n";
      else if (o.report.empty())  // a check that threw: the message is all there is
        std::cout << "  " << printable(o.message) << "\n  family: " << o.family.describe()
                  << "\n  stats: " << printable(o.stats.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) << "\n";
      else
        std::cout << printable(o.report, /*keep_newlines=*/true) << (o.report.back() == '\n' ? "" : "\n");
      if (!entry.finding.empty())  // the reports keep the command exact; the terminal gets it as text
        std::cout << "replay: " << printable(replay_command(entry.finding, entry.replay_extra, entry.replay_env))
                  << "\n";
      if (!entry.recheck.empty()) {  // the check again, to try more instances (--instances) or another --seed
        const int others = entry.recheck_siblings - 1;
        std::cout << "re-check: " << printable(entry.recheck);
        if (others > 0)
          std::cout << "   (with the suite's " << others << " other " << o.family.generator << " famil"
                    << (others == 1 ? "y" : "ies") << " for " << o.property << ")";
        std::cout << "\n";
      }
      std::cout << std::flush;
      if (!entry.finding_error.empty())  // said where errors go, and again at the end: the case is lost
        std::cerr << "attncheck: error: could not save the finding: " << printable(entry.finding_error) << "\n";
    }
  };
  // Runs one check and saves its finding (to disk before anything is printed: a crash after this loses nothing).
  const auto run_slot = [&](Slot& slot) {
    const Kernel& k = *slot.kernel;
    const SuiteEntry& e = slot.picked->entry;
    const Property& p = get_property(e.property);
    RunEntry& entry = slot.result;
    entry.label = e.label;
    entry.checked = e.family.describe();
    entry.recheck = recheck(k.name(), *slot.picked, k.caps().device == "plugin");
    entry.recheck_siblings = slot.picked->picks;
    entry.outcome.kernel = k.name();
    entry.outcome.property = p.name;
    // A plugin's check runs alone, its finding's save included: its calls fork (isolated_call.h), and a child forked
    // while another thread holds a C++ runtime or loader lock would hang in it (a false "timeout" finding); and its
    // kernel need not be reentrant. A CUDA kernel's check runs beside CPU checks, not beside another device check (one
    // context). The locks are held to the end of the slot.
    std::unique_lock<std::shared_mutex> alone;
    std::shared_lock<std::shared_mutex> beside;
    std::unique_lock<std::mutex> device;
    const std::string where = k.caps().device;
    if (where == "plugin") {
      alone = std::unique_lock<std::shared_mutex>(plugin_mu);
    } else {
      beside = std::shared_lock<std::shared_mutex>(plugin_mu);
      if (where != "cpu") device = std::unique_lock<std::mutex>(device_mu);
    }
    // After the locks, not before: a check that waited for one while a stop signal came does not start (it would
    // have been "not run" one check at a time; it ran, and a capability skip read as its outcome).
    if (g_stop_signals > 0) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      progress.show(&slot, finished, k.name() + " " + p.name + " " + e.family.generator);
    }
    try {
      entry.outcome = check_one(p, k, e.family, report.budget, !opt.no_shrink);
    } catch (const Interrupted&) {
      return;
    } catch (const std::bad_alloc&) {  // not run: listed so in the reports, and the run exits 2 (checks_not_run)
      entry.not_run_reason = "out of memory (std::bad_alloc): free memory, or run fewer checks at once (-j)";
      return;
    }
    slot.ran = true;
    const Outcome& o = entry.outcome;
    if (o.status != Status::kFail) return;
    entry.known_failure = known_in(baseline, entry);
    // A plugin kernel's replay needs its library loaded again and the settings its calls ran under (pad, timeout,
    // isolation); a built-in kernel's needs neither.
    const bool is_plugin = where == "plugin";
    if (is_plugin) entry.replay_extra = plugin_replay_args(), entry.replay_env = plugin_replay_env();
    if (o.message.rfind("error: ", 0) == 0) return;
    try {
      Case c = case_from_outcome(o, report.budget, "check");
      // A plugin kernel's case names the kernel only; the note keeps where it came from (the library is a path on
      // this machine, so replay never loads it from the file: --plugin says so).
      if (is_plugin) c.note += " [found with " + entry.replay_env + entry.replay_extra.substr(1) + "]";
      entry.finding = write_finding(opt.findings, c);
    } catch (const std::exception& ex) {
      entry.finding_error = ex.what();
      std::lock_guard<std::mutex> lock(mu);
      ++unsaved;
    }
  };
  std::exception_ptr worker_error;  // what no check caught (out of memory): rethrown once every worker has ended
  const auto worker = [&] {
    for (;;) {
      std::size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next == slots.size() || worker_error) return;
        i = next++;
      }
      try {
        run_slot(slots[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!worker_error) worker_error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      slots[i].done = true;
      progress.ended(&slots[i], ++finished);
      print_ready();
    }
  };
  // SIGINT or SIGTERM (Ctrl-C, a CI job's cancel or time limit) ends the run after the checks in progress: their
  // instance loops stop at the next instance (their outcomes are discarded), a failure already found is shrunk no
  // further and saved, and the summary and reports are written, marked interrupted, with the checks not run listed.
  // Before, the signal ended attncheck where it was: no summary, no report. A second signal ends it at once
  // (stop_signals.h).
  StopSignals on_signal(StopSignals::For::kCheck);
  // This thread is one of the workers. A thread that cannot start (a pids or address-space limit) leaves fewer
  // workers, said once; the run goes on with those that started (std::terminate ended it, with no summary or report).
  const std::size_t asked = static_cast<std::size_t>(opt.jobs > 0 ? opt.jobs : default_jobs());
  const std::size_t jobs = std::max<std::size_t>(1, std::min(asked, slots.size()));
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < jobs; ++t) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error& e) {
      std::lock_guard<std::mutex> lock(mu);
      progress.clear();
      std::cerr << "attncheck: -j " << jobs << ": only " << t << " workers could start (" << e.what()
                << "); going on with them\n";
      break;
    }
  }
  report.jobs = static_cast<int>(threads.size() + 1);
  worker();
  for (std::thread& t : threads) t.join();
  progress.stop();
  if (worker_error) std::rethrow_exception(worker_error);
  for (Slot& slot : slots) (slot.ran ? report.entries : report.not_run).push_back(std::move(slot.result));
  std::size_t in_baseline = 0;
  for (const RunEntry& e : report.entries) {
    const std::string name = check_name(e);
    in_baseline += baseline.checks.count(name);
    if (e.outcome.status == Status::kPass && baseline.failed.count(name)) report.now_pass.push_back(name);
  }
  if (opt.baseline_given && in_baseline == 0 && !report.entries.empty())  // every failure is then new
    std::cerr << "attncheck: warning: --baseline " << printable(baseline.path) << " has none of this run's "
              << report.entries.size() << " checks (another suite or kernel, or another attncheck's families?)\n";
  // From here a signal ends attncheck as it would have (the reports then are missing, not old); the second of one
  // request delivered twice (GNU timeout's, to attncheck and its group) does not, even where the run ended between.
  on_signal.end_at_next();
  report.interrupted_by = g_stop_signals > 0 ? static_cast<int>(g_last_stop_signal) : 0;
  progress.clear();
  report.wall_seconds = seconds_since(t0);
  const std::string bias = bias_table(report);
  if (!bias.empty()) std::cout << part() << bias;
  std::cout << part() << summary_table(report);
  // Both reports are attempted: one that cannot be written does not cost the other (the run exits 2 after both).
  // JUnit first, so the JSON report's verdict can say it was not written ("report_unwritten": its summary.exit_status
  // read 0 for a run that exited 2).
  const auto emit = [&](bool given, bool to_stdout, const std::string& path, const std::function<std::string()>& text) {
    if (!given) return std::string();
    try {
      if (to_stdout) {
        terminal.restore();
        std::cout << text() << std::flush;  // a failed write is main()'s "cannot write to standard output"
      } else {
        write_text_file(path, text());
      }
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  report.junit_error = emit(opt.junit_given, junit_stdout, opt.junit_path, [&] { return run_to_junit(report); });
  const std::string json_error = emit(opt.json_given, json_stdout, opt.json_path, [&] {
    return run_to_json(report).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  });
  if (!report.junit_error.empty() && !json_error.empty())
    std::cerr << "attncheck: error: " << printable(report.junit_error) << "\n";
  if (!json_error.empty() || !report.junit_error.empty())
    throw Error(json_error.empty() ? report.junit_error : json_error);
  // The exit status is the reports' summary.verdict (run_verdict): what each verdict but "pass" says is below.
  const RunVerdict verdict = run_verdict(report);
  const std::string said = verdict.name;
  if (said == "findings_unsaved") {  // a finding only on a terminal is lost: not a plain "a property failed"
    std::cerr << "attncheck: error: " << unsaved << " finding(s) could not be saved in " << printable(opt.findings)
              << " (the reports above name them)\n";
    return verdict.exit_status;
  }
  std::size_t cut_short = 0;  // checks that could not run to their end (out of memory): said whatever the verdict
  std::string why_cut;
  for (const RunEntry& e : report.not_run)
    if (!e.not_run_reason.empty()) ++cut_short, why_cut = e.not_run_reason;
  if (cut_short > 0)
    std::cerr << "attncheck: error: " << cut_short << " check(s) could not run to their end: " << why_cut << "\n";
  if (said == "fail" || said == "checks_not_run") return verdict.exit_status;
  if (said == "known_failures") {  // the table's last lines said which; this says why the exit is 0
    std::cerr << "attncheck: every failure (" << report.count(Status::kFail)
              << ") failed in the baseline too: exit 0\n";
    return verdict.exit_status;
  }
  if (said == "interrupted") {  // not a pass, whatever ran: ended by the signal, as a shell expects
    const int sig = report.interrupted_by;
    std::cerr << "attncheck: " << interrupted_message(report) << "\n";
    std::cout.flush();
    std::fflush(stdout);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return verdict.exit_status;  // not reached where the signal's default action ends the process
  }
  if (said == "nothing_tested") {  // every check skipped or discarded: a green run that tested nothing
    // The summary table says only "skip": the reasons (distinct ones, in order, at most 5) are said here.
    std::vector<std::string> why;
    for (const RunEntry& e : report.entries) {
      const std::string& k = e.outcome.kernel;
      const std::string w = e.outcome.message.rfind(k + ":", 0) == 0 ? e.outcome.message : k + ": " + e.outcome.message;
      if (why.size() < 5 && std::find(why.begin(), why.end(), w) == why.end()) why.push_back(w);
    }
    std::cerr << "attncheck: error: nothing was tested: " << report.count(Status::kSkip) << " check(s) skipped, "
              << report.count(Status::kDegenerate) << " discarded as degenerate. Why:\n";
    for (const std::string& w : why) std::cerr << "  " << w << "\n";
    const auto for_head_dim = [](const std::string& w) { return w.find("head_dim") != std::string::npos; };
    const bool shaped = opt.suite == "long" || std::any_of(opt.families.begin(), opt.families.end(), [](const auto& f) {
                          return f.find("head_dim=") != std::string::npos;
                        });
    if (!shaped && std::any_of(why.begin(), why.end(), for_head_dim))
      std::cerr << "  (the default, bias and quick suites' families have head dims of 16 and less: --suite long has 64 "
                   "and 128, and --family 'GENERATOR[head_dim=64]' sets a suite family's head dim)\n";
    return verdict.exit_status;
  }
  return verdict.exit_status;  // "pass"
}

}  // namespace

void add_check(CLI::App& app, Runner& run) {
  auto opt = std::make_shared<CheckOptions>();
  CLI::App* sub = app.add_subcommand("check", "Run a property suite on kernels; save, print and summarise failures");
  sub->add_option("-k,--kernel", opt->kernels,
                  "Kernel to check (repeatable; default: fa2 fa2-fixed paper paper-fixed oracle stochastic, any "
                  "cuda:* kernel and every plugin:* kernel of --plugin). "
                  "Parameters: -k 'paper-fixed[beta=4,tol=0.002]'")
      ->type_name("KERNEL");
  sub->add_option("--suite", opt->suite, "Suite: default, bias, gpu (GPU kernels against their CPU twins), long (lengths past "
                  "several 64- and 128-wide key tiles, d 64 and 128) or quick")
      ->capture_default_str()
      ->type_name("SUITE");
  sub->add_option("--family", opt->families,
                  "Only families of this generator (repeatable); GENERATOR[key=value,...]: the suite's families of it "
                  "with those values, a generator parameter (attncheck list generators) or the shape: batch, heads_q, "
                  "heads_kv, n_q, n_k, head_dim (the scale follows it), causal, scale, tile_q, tile_k. Example: "
                  "--family 'tied_max[ties=3,ties_min=3,head_dim=64,n_k=128]'")
      ->type_name("GENERATOR");
  sub->add_option("--property", opt->properties, "Only this property (repeatable)")->type_name("PROPERTY");
  sub->add_option("--instances", opt->instances, "Instances per check (bias: T, the sample size; default 64)")
      ->type_name("N")
      ->check(number_in(1, 1 << 30));
  sub->add_option("--seconds", opt->seconds,
                  "Time budget per check in seconds (0 = none); shrinking a failure has its own, 20 s by default "
                  "(ATTNCHECK_SHRINK_SECONDS)")
      ->type_name("SECONDS")
      ->check(number_in(0.0, 1e7));
  auto* seed = sub->add_option("--seed", opt->seed_text,
                               "Mixed into every family's seed, 0 to 2^64-1 (default: the suite's own seeds)")
                  ->type_name("N");
  auto* json = sub->add_option("--json", opt->json_path,
                               "Write a JSON report to FILE ('-' or /dev/stdout: standard output, and the terminal "
                               "report goes to standard error)")
                  ->type_name("FILE");
  auto* junit = sub->add_option("--junit", opt->junit_path, "Write a JUnit XML report to FILE ('-': as for --json)")
                   ->type_name("FILE");
  auto* baseline = sub->add_option("--baseline", opt->baseline_path,
                                   "An earlier run's --json report, kept apart (not this run's --json or --junit): a "
                                   "check that failed there too, in the same way (a property's verdict, or the same "
                                   "kernel fault), is a known failure (printed, saved and reported as one) and does "
                                   "not fail the run; only new failures do")
                       ->type_name("FILE");
  sub->add_option("--findings", opt->findings, "Directory for failing cases")->capture_default_str()->type_name("DIR");
  sub->add_flag("--no-shrink", opt->no_shrink, "Report failures unshrunk (faster)");
  sub->add_flag("-q,--quiet", opt->quiet, "No progress line");
  sub->add_option("-j,--jobs", opt->jobs,
                  "Checks run at once (default: the CPUs this process may use, within a cgroup's quota). Outcomes, "
                  "output and reports do not depend on it unless a time budget binds (--seconds; a shrink reaching its "
                  "20 s on a busier machine); CUDA checks run one at a time, a plugin's checks alone")
      ->type_name("N")
      ->check(number_in(1, 1024));
  add_plugin_option(*sub);  // --plugin PATH (harness/plugin/plugin_cli.h)
  sub->footer(
      "Exit status: 0 every check passed (with --baseline: or failed there too), 1 a property failed (with\n"
      "--baseline: a check that did not fail there), 2 usage or input error (or nothing was tested: every check\n"
      "skipped or degenerate; a failure's case or a report could not be written; a check ran out of memory).\n"
      "Interrupted (SIGINT, SIGTERM):\n"
      "the check in progress ends early, the summary and reports are written and marked interrupted, and the exit\n"
      "is 1 if a property failed, else by the signal (130, 143); a second signal stops at once. The JSON report's\n"
      "summary.verdict says which.\n"
      "Another draw of every family: --seed N (RapidCheck's RC_PARAMS is for the ctest tests; attncheck ignores it).");
  sub->callback([&run, opt, seed, json, junit, baseline] {
    opt->seed_given = seed->count() > 0;
    opt->baseline_given = baseline->count() > 0;
    opt->json_given = json->count() > 0, opt->junit_given = junit->count() > 0;
    run = [opt] {
      if (opt->seed_given) opt->seed = parse_u64(opt->seed_text, "--seed");
      return run_check(*opt);
    };
  });
}

}  // namespace attncheck::cli
