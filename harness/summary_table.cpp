// summary_table.cpp — the terminal summary of a check run: one row per kernel, one column per property.
// A cell aggregates every family of that property: FAIL k/n (k of the n families checked failed, with the first
// failure's key number), else pass if any passed, else degen / skip; "-" when the suite has no such pair. An
// interrupted run's cell short of checks reads "k/n run" (k of its n checks ran, none failed), "not run", or
// "FAIL k/n (m not run)"; with --baseline, "known FAIL k/n" where each failed in the baseline too, "FAIL k/n (j known)"
// where some did. Below the table: the baseline's count, then why checks skipped, a line per reason.
// bias_table: the `unbiased` and `unbiased_at_ties` properties family by family (rows) and kernel by kernel
// (columns), because a kernel can pass one tie family and fail another (paper-fixed: tied_max passes, max_zero
// fails), and that is the point of the property. Plain ASCII, fixed width. Tested by report_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "harness/run_report.h"
#include "properties/property_util.h"  // fmt_num
#include "properties/shrink.h"         // fault_signature

namespace attncheck {

namespace {
std::string pad(const std::string& t, std::size_t w) { return t + std::string(w > t.size() ? w - t.size() : 0, ' '); }

// A pass whose deciding tensor could not have failed with a mean below this many ulps (its noise) is marked "ok?":
// the paper's bias in O on the tie families as checked (not shrunk) is 0.161-0.199 ulp (tied_max, seeds 1..100;
// property.h), so a pass blind to 0.15 ulp cannot rule out a bias of that size (props_bias.cpp, detectable_ulp). It
// was 0.2, from the shrunk families' 0.22-0.24, and left unmarked `paper`'s dV on tied_max_flat (detectable 0.164;
// a lean of +0.087 that fails 13 of 25 seeds at T = 256). Only the cell's tensor is judged; every tensor's
// detectable_ulp is in the JSON.
constexpr double kBlindUlp = 0.15;

bool blind_pass(const Outcome& o) {
  return o.status == Status::kPass && o.stats.is_object() && o.stats.value("detectable_ulp", 0.0) > kBlindUlp;
}

// "FAIL O +0.24 z+7.7" / "ok O +0.00 z-0.3" / "ok? dK -2.3e+11 z-1.1" / "degen" / "skip": the deciding tensor's
// mean ulp and z.
std::string bias_cell(const Outcome& o) {
  if (o.status == Status::kSkip) return "skip";
  if (o.status == Status::kDegenerate) return "degen";
  const nlohmann::json& st = o.stats;
  // A failure on NaN or infinite outputs says so: the statistic beside it leaves those outputs out (props_bias.cpp),
  // and "FAIL O +0.00 z+0.1" named a tensor and a mean that were not the reason.
  if (o.status == Status::kFail && st.is_object() && st.contains("not_finite") && st["not_finite"].is_object())
    return "FAIL " + st["not_finite"].value("tensor", std::string("?")) + " non-finite";
  if (!st.is_object() || !st.contains("tensor") || !st.contains("mean_ulp") || !st.contains("z"))
    return status_name(o.status);
  const double mean = st["mean_ulp"].get<double>();
  char buf[80];
  std::snprintf(buf, sizeof buf, std::fabs(mean) < 1000 ? "%s %s %+.2f z%+.1f" : "%s %s %+.1e z%+.1f",
                o.status == Status::kFail ? "FAIL" : blind_pass(o) ? "ok?" : "ok", st["tensor"].get<std::string>().c_str(),
                mean, st["z"].get<double>());
  return buf;
}
}  // namespace

std::string bias_table(const RunReport& r) {
  // A run checks every kernel on the same suite entries in the same order, so the i-th `unbiased` outcome of
  // each kernel belongs to the i-th bias entry of the suite. Rows are those entries, labelled by generator
  // and the suite's label (failures carry the shrunk family, so their shape and tiles are not a stable label).
  std::vector<std::string> kernels, families;
  std::map<std::string, int> seen;  // kernel -> unbiased outcomes so far
  std::map<std::pair<std::string, std::string>, std::string> cells;  // (row label, kernel) -> text
  bool any_blind = false, any_shrunk = false;
  for (const auto& e : r.entries) {
    const Outcome& o = e.outcome;
    if (o.property != "unbiased" && o.property != "unbiased_at_ties") continue;
    if (std::find(kernels.begin(), kernels.end(), o.kernel) == kernels.end()) kernels.push_back(o.kernel);
    const std::size_t row = static_cast<std::size_t>(seen[o.kernel]++);
    if (row == families.size()) {
      const std::string base = (o.property == "unbiased" ? "" : "at ties: ") +
                               family_label(e);
      int same = 0;
      for (const auto& f : families) same += f.rfind(base, 0) == 0;
      families.push_back(base + (same ? " (" + std::to_string(same + 1) + ")" : ""));
    }
    cells[{families[row], o.kernel}] = (e.known_failure ? "known " : "") + bias_cell(o);  // --baseline
    any_blind = any_blind || blind_pass(o);
    any_shrunk = any_shrunk || (o.status == Status::kFail && o.shrink_steps > 0);
  }
  if (kernels.empty()) return "";
  std::size_t fw = 6;
  for (const auto& f : families) fw = std::max(fw, f.size());
  std::vector<std::size_t> kw;
  for (const auto& k : kernels) {
    std::size_t w = k.size();
    for (const auto& f : families) w = std::max(w, cells[{f, k}].size());
    kw.push_back(w);
  }
  std::ostringstream s;
  // "the shrunk family": only where a failure was shrunk (--no-shrink, or a failure no smaller family repeats, keeps the
  // family as checked).
  s << "unbiased (\"at ties:\" unbiased_at_ties), family by family (deciding tensor, mean signed error in ulps, z"
    << (any_shrunk ? "; the shrunk family for failures" : "") << "):\n";
  s << pad("family", fw);
  for (std::size_t i = 0; i < kernels.size(); ++i) s << "  " << pad(kernels[i], kw[i]);
  s << "\n" << std::string(fw, '-');
  for (std::size_t i = 0; i < kernels.size(); ++i) s << "  " << std::string(kw[i], '-');
  s << "\n";
  for (const auto& f : families) {
    s << pad(f, fw);
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const std::string& c = cells[{f, kernels[i]}];
      s << "  " << pad(c.empty() ? "-" : c, kw[i]);
    }
    s << "\n";
  }
  if (any_blind)
    s << "ok? = passes, but the tensor shown is too noisy there to fail below " << kBlindUlp
      << " ulp: its errors spread too widely over the instances (exact values that cancel to near zero, or a few "
         "large errors), so even a mean of several ulps is not significant; the smallest failing mean is in the "
         "check's message and JSON\n";
  return s.str();
}

namespace {
// "a, b, c, and 2 more": at most `most` of v.
std::string join_some(const std::vector<std::string>& v, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < most; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > most) out += ", and " + std::to_string(v.size() - most) + " more";
  return out;
}

// Why checks skipped, one line per reason (a "skip" cell said nothing, and a run with some skips printed no reason:
// only one where every check skipped did; a UX review, session 33): the checks it skipped, their kernels, the
// reason. At most kMaxReasons lines; the JSON and JUnit reports have every check's.
std::string skip_reasons(const RunReport& r) {
  constexpr std::size_t kMaxReasons = 8;
  struct Reason {
    std::vector<std::pair<std::string, std::vector<std::string>>> checks;  // property, its families' labels
    std::vector<std::string> kernels;
  };
  std::vector<std::pair<std::string, Reason>> reasons;  // in the order first met
  const auto add = [](std::vector<std::string>& to, const std::string& x) {
    if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
  };
  int skipped = 0;
  for (const RunEntry& e : r.entries) {
    if (e.outcome.status != Status::kSkip) continue;
    ++skipped;
    const std::string& k = e.outcome.kernel;
    // A kernel's own reason names it ("plugin:x: declines ..."): the kernels are listed apart.
    const std::string why = e.outcome.message.rfind(k + ": ", 0) == 0 ? e.outcome.message.substr(k.size() + 2)
                                                                       : e.outcome.message;
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == why; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), {why, Reason{}});
    auto& checks = it->second.checks;
    auto p = std::find_if(checks.begin(), checks.end(), [&](const auto& c) { return c.first == e.outcome.property; });
    if (p == checks.end()) p = checks.insert(checks.end(), {e.outcome.property, {}});
    add(p->second, family_label(e));
    add(it->second.kernels, k);
  }
  // A complete run where nothing passed or failed ends with its own error that says why (cmd_check.cpp): said once.
  if (skipped == 0 || (r.count(Status::kPass) == 0 && r.count(Status::kFail) == 0 && !r.interrupted_by)) return "";
  std::ostringstream s;
  s << "skipped (" << skipped << "):\n";
  for (std::size_t i = 0; i < reasons.size() && i < kMaxReasons; ++i) {
    std::vector<std::string> checks;  // "unbiased on normal, tied_max"
    for (const auto& [property, labels] : reasons[i].second.checks)
      checks.push_back(property + " on " + join_some(labels, 4));
    s << "  " << join_some(checks, 3) << " (" << join_some(reasons[i].second.kernels, 6) << "): " << reasons[i].first
      << "\n";
  }
  if (reasons.size() > kMaxReasons)
    s << "  and " << reasons.size() - kMaxReasons << " more reasons (the JSON report has every check's)\n";
  return s.str();
}

// Passes a time budget cut short (`--seconds`: a check stops drawing instances once it is spent, and one instance
// always runs): such a pass has seen fewer instances than the run asked for (one, at a tiny budget), and the table's
// "pass" alone read as a full one (a CLI review, session 39). Said below the table, with the fewest run.
std::string budget_cut_passes(const RunReport& r) {
  if (r.budget.seconds <= 0) return "";
  int cut = 0, fewest = r.budget.instances;
  std::vector<std::string> checks;  // "accurate on normal (fa2)", the fewest first met
  for (const RunEntry& e : r.entries) {
    const Outcome& o = e.outcome;
    // instances_run 0: a property that does not count instances (it draws none, or a fixed set).
    if (o.status != Status::kPass || o.instances_run <= 0 || o.instances_run >= r.budget.instances) continue;
    ++cut;
    if (o.instances_run < fewest) fewest = o.instances_run, checks.clear();
    if (o.instances_run == fewest) checks.push_back(o.property + " on " + family_label(e) + " (" + o.kernel + ")");
  }
  if (cut == 0) return "";
  std::ostringstream s;
  s << "cut short by --seconds " << fmt_num(r.budget.seconds) << ": " << cut << (cut == 1 ? " pass" : " passes")
    << " ran fewer than the " << r.budget.instances << " instances asked (fewest " << fewest << ": "
    << join_some(checks, 3) << "); the JSON report's instances_run has each check's\n";
  return s.str();
}

// Passes that compared some O elements on an envelope as wide as the attended V's range (stats "range_only",
// property_util.h: the generic envelope of a kernel that declares no numerics, on long rows; or a huge score error
// bound σ): said, so that a pass there is not read as a tight one (it bounds only what within_v_range bounds there).
std::string range_only_passes(const RunReport& r) {
  int passes = 0;
  std::vector<std::string> checks;  // "key_permutation on long_rows (cuda:cudnn)", the most elements first met
  double most = 0;
  for (const RunEntry& e : r.entries) {
    const Outcome& o = e.outcome;
    const double n = o.stats.is_object() ? o.stats.value("range_only", 0.0) : 0.0;
    if (o.status != Status::kPass || !(n > 0)) continue;
    ++passes;
    if (n > most) most = n, checks.clear();
    if (n == most) checks.push_back(o.property + " on " + family_label(e) + " (" + o.kernel + ")");
  }
  if (passes == 0) return "";
  std::ostringstream s;
  s << passes << (passes == 1 ? " pass" : " passes") << " compared O elements on an envelope as wide as the attended "
    << "V's range, where they bound only what within_v_range bounds (most: " << fmt_num(most) << " elements, "
    << join_some(checks, 3) << "): a kernel that declares no numerics is held to the generic envelope, which passes "
    << "V's range from ~593 keys in 16-key tiles; the JSON report's stats.range_only has each check's count\n";
  return s.str();
}

// One kernel fault met by several checks (a plugin that crashes on every call fails each property's first one) said
// once below the table, with the checks that met it: four FAIL blocks read as four bugs (a UX review, session 33).
std::string shared_faults(const RunReport& r) {
  std::vector<std::pair<std::string, std::vector<std::string>>> faults;  // fault_signature, checks, first met first
  for (const RunEntry& e : r.entries) {
    const std::string fault = e.outcome.status == Status::kFail ? fault_signature(e.outcome.message) : "";
    if (fault.empty()) continue;
    auto it = std::find_if(faults.begin(), faults.end(), [&](const auto& f) { return f.first == fault; });
    if (it == faults.end()) it = faults.insert(faults.end(), {fault, {}});
    it->second.push_back(e.outcome.property + " on " + family_label(e));
  }
  std::ostringstream s;
  for (const auto& [fault, checks] : faults) {
    if (checks.size() >= 2)
      s << "one kernel fault in " << checks.size() << " checks: " << fault << " (" << join_some(checks, 3) << ")\n";
  }
  return s.str();
}
}  // namespace

std::string summary_table(const RunReport& r) {
  std::vector<std::string> kernels = r.kernels, props;
  for (const auto& e : r.entries) {
    if (std::find(kernels.begin(), kernels.end(), e.outcome.kernel) == kernels.end()) kernels.push_back(e.outcome.kernel);
    if (std::find(props.begin(), props.end(), e.outcome.property) == props.end()) props.push_back(e.outcome.property);
  }
  struct Cell {
    int pass = 0, fail = 0, known = 0, skip = 0, degen = 0, not_run = 0;
    std::string key;  // the worst failure's key_number, as checked
    double key_size = -1;
  };
  std::map<std::pair<std::string, std::string>, Cell> cells;
  for (const auto& e : r.not_run) {  // an interrupted run: a cell short of checks says so, never a plain "pass"
    if (std::find(kernels.begin(), kernels.end(), e.outcome.kernel) == kernels.end()) kernels.push_back(e.outcome.kernel);
    if (std::find(props.begin(), props.end(), e.outcome.property) == props.end()) props.push_back(e.outcome.property);
    ++cells[{e.outcome.kernel, e.outcome.property}].not_run;
  }
  for (const auto& e : r.entries) {
    Cell& c = cells[{e.outcome.kernel, e.outcome.property}];
    switch (e.outcome.status) {
      case Status::kPass: ++c.pass; break;
      case Status::kFail: {
        // The worst of the cell's failures, on the suite's family as checked: the first failure's shrunk statistic
        // read 1.07e+04 for fa2-fixed's accurate (1.41 at worst as checked) and z=-19 for a z -6.64 check.
        ++c.fail;
        c.known += e.known_failure;
        const Outcome& o = e.outcome;
        auto [key, size] = key_number_and_size(o.stats_checked.is_null() ? o.stats : o.stats_checked);
        if (c.key.empty() || size > c.key_size) c.key = std::move(key), c.key_size = size;
        break;
      }
      case Status::kSkip: ++c.skip; break;
      case Status::kDegenerate: ++c.degen; break;
    }
  }
  auto text = [&](const std::string& k, const std::string& p) -> std::string {
    auto it = cells.find({k, p});
    if (it == cells.end()) return "-";
    const Cell& c = it->second;
    if (c.fail) {  // "FAIL 2/7 (3 not run)": 2 of the 7 checks that ran failed, 3 did not run (an interrupted run)
      // --baseline: "known FAIL 2/7" where both failed there too, "FAIL 2/7 (1 known)" where one did.
      const int n = c.pass + c.fail + c.degen;
      const std::string known = c.known == c.fail ? "known " : "";
      std::string notes;
      if (c.known && c.known < c.fail) notes += std::to_string(c.known) + " known";
      if (c.not_run) notes += (notes.empty() ? "" : ", ") + std::to_string(c.not_run) + " not run";
      return known + "FAIL " + std::to_string(c.fail) + "/" + std::to_string(n) +
             (notes.empty() ? "" : " (" + notes + ")") + (c.key.empty() ? "" : " " + c.key);
    }
    if (c.not_run) {  // "3/10 run": 3 checks ran (none failed), 7 did not
      const int ran = c.pass + c.skip + c.degen;
      return ran ? std::to_string(ran) + "/" + std::to_string(ran + c.not_run) + " run" : "not run";
    }
    if (c.pass) return "pass";
    if (c.degen) return "degen";
    return "skip";
  };
  std::size_t kw = 6;
  for (const auto& k : kernels) kw = std::max(kw, k.size());
  std::vector<std::size_t> pw;
  for (const auto& p : props) {
    std::size_t w = p.size();
    for (const auto& k : kernels) w = std::max(w, text(k, p).size());
    pw.push_back(w);
  }
  std::ostringstream s;
  s << pad("kernel", kw);
  for (std::size_t i = 0; i < props.size(); ++i) s << "  " << pad(props[i], pw[i]);
  s << "\n" << std::string(kw, '-');
  for (std::size_t i = 0; i < props.size(); ++i) s << "  " << std::string(pw[i], '-');
  s << "\n";
  for (const auto& k : kernels) {
    s << pad(k, kw);
    for (std::size_t i = 0; i < props.size(); ++i) s << "  " << pad(text(k, props[i]), pw[i]);
    s << "\n";
  }
  s << r.entries.size() << (r.entries.size() == 1 ? " check: " : " checks: ") << r.count(Status::kPass) << " pass, "
    << r.count(Status::kFail) << " FAIL"
    << (r.baseline.empty() ? std::string() : " (" + std::to_string(r.known_failures()) + " known)") << ", "
    << r.count(Status::kSkip) << " skip, " << r.count(Status::kDegenerate) << " degenerate (discarded) in "
    << static_cast<int>(r.wall_seconds * 10) / 10.0 << " s\n";
  if (r.interrupted_by)
    s << "INTERRUPTED by " << signal_name(r.interrupted_by) << ": " << r.not_run.size() << " of "
      << r.entries.size() + r.not_run.size() << " checks not run; this is not a complete run\n";
  if (!r.baseline.empty()) {
    const int fails = r.count(Status::kFail), known = r.known_failures();
    s << "baseline " << printable(r.baseline) << ": "
      << (fails ? std::to_string(known) + " of the " + std::to_string(fails) + " failures failed there too"
                : "no failure");
    s << (fails > known ? "; " + std::to_string(fails - known) + " NEW (the run fails)" : "") << "\n";
    if (!r.now_pass.empty())
      s << "  failed in the baseline, pass now (" << r.now_pass.size() << "; a new baseline would drop them): "
        << printable(join_some(r.now_pass, 5)) << "\n";
  }
  s << shared_faults(r) << skip_reasons(r) << budget_cut_passes(r) << range_only_passes(r);
  return s.str();
}

}  // namespace attncheck
