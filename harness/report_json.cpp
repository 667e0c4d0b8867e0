// report_json.cpp — the versioned JSON report of a check run (run_report.h), plus shared report helpers.
// Field by field for its readers: harness/REPORT.md (ReportJson.EveryFieldIsDocumented keeps it complete).
// Layout: {"format":"attncheck-run","version":1,
//          "run":{"attncheck":"<commit>"|null (set_tool_version),"kernels":[...],"suite":"default",
//                 "seed":N|"0x<16 hex>"|null (seed_to_json),"budget":{...},
//                 "jobs":n (the workers that ran the checks),"started_at":"...","wall_seconds":x},
//          "summary":{"verdict":"pass"|"known_failures"|"fail"|"interrupted"|"nothing_tested"|"findings_unsaved"|
//                     "report_unwritten" (run_verdict),
//                     "exit_status":n (check's, by the verdict),"pass":n,"fail":n,"skip":n,"degenerate":n,"not_run":n},
//          "outcomes":[{"check" (check_name: the same in every --seed's run),"kernel","property","family",
//                       "family_label","family_description","family_checked","status","message","stats",
//                       "message_checked","stats_checked" (a shrunk failure's verdict on the family as checked; null
//                       otherwise),"instance_index","literal","instances_run","seconds","shrink_seconds",
//                       "shrink_steps","finding","replay","finding_error","recheck" (RunEntry::recheck, or null),
//                       "known_failure" (a failure of a check that failed in --baseline's report too)}],
//          "baseline":null (no --baseline) | {"path","known_fail":n (failures known from it),"now_pass":[check
//                      names that failed there and pass here]}}
// family and family_description are the outcome's family (a failure's: shrunk); family_checked describes the
// suite's family as checked, before any shrinking (two suite entries of one generator differ there). instance_index
// is the failing instance, or for `unbiased` the exemplar (an instance erring in the direction of the mean).
// finding/replay are null when no case was written; finding_error says why a failure's case could not be written
// (else null).
// A run stopped by a signal (run_report.h): run.interrupted names it ("SIGINT"; null for a run that went to the
// end), summary.not_run counts the checks it never ran and "not_run" lists them as [{"check","kernel","property",
// "family_label","family_checked"}] (empty for a complete run). A reader that gates on summary.fail alone would take an
// interrupted run for a pass: gate on summary.exit_status == 0 (verdict "pass", or "known_failures" with --baseline),
// check's own exit status.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "harness/corpus.h"  // read_bounded_file, parse_json_strictly
#include "harness/run_report.h"
#include "harness/signal_util.h"
#include "properties/shrink.h"  // fault_kind

namespace attncheck {

using nlohmann::json;

int RunReport::count(Status s) const {
  int n = 0;
  for (const auto& e : entries) n += e.outcome.status == s;
  return n;
}

int RunReport::known_failures() const {
  int n = 0;
  for (const auto& e : entries) n += e.outcome.status == Status::kFail && e.known_failure;
  return n;
}

RunVerdict run_verdict(const RunReport& r) {
  // The order of cmd_check.cpp's exits: a lost finding outranks the failure it records, any failure outranks an
  // interruption (what ran found one), and a run that tested nothing is not a pass.
  const bool unsaved = std::any_of(r.entries.begin(), r.entries.end(), [](const RunEntry& e) {
    return !e.finding_error.empty();
  });
  if (unsaved) return {"findings_unsaved", 2};
  if (!r.junit_error.empty()) return {"report_unwritten", 2};
  if (r.count(Status::kFail) > r.known_failures()) return {"fail", 1};
  if (r.interrupted_by) return {"interrupted", 128 + r.interrupted_by};
  if (std::any_of(r.not_run.begin(), r.not_run.end(), [](const RunEntry& e) { return !e.not_run_reason.empty(); }))
    return {"checks_not_run", 2};
  if (r.count(Status::kPass) == 0 && r.count(Status::kFail) == 0) return {"nothing_tested", 2};
  if (r.count(Status::kFail)) return {"known_failures", 0};
  return {"pass", 0};
}

std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_./:=,+-@%", c) != nullptr;
  });
  if (plain) return s;
  // Bytes a terminal should not get (controls, a newline, bytes that are not UTF-8: what printable escapes) are written
  // in ANSI-C quotes, $'...' with three-digit octal \NNN (bash, zsh, ksh; POSIX.1-2024, where \x takes any number of
  // hex digits, so a digit after it would join): printable then leaves the word as it is, and it runs as pasted. In
  // plain quotes they read \xNN there too, and named a file that does not exist. (dash has no $'...'.) A tab too,
  // which printable keeps: a terminal's copy of the line gives spaces for it, and an unbracketed paste completes.
  if (printable(s) != s || s.find('\t') != std::string::npos) {
    std::string q = "$'";
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '\\' || c == '\'') q += '\\', q += ch;
      else if (c >= 0x20 && c < 0x7f) q += ch;
      else q += {'\\', char('0' + (c >> 6)), char('0' + ((c >> 3) & 7)), char('0' + (c & 7))};
    }
    return q + "'";
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {
std::string& replay_program() {
  static std::string program = "attncheck";
  return program;
}
std::string& tool_version() {
  static std::string version;
  return version;
}
}  // namespace

void set_tool_version(const std::string& version) { tool_version() = version; }

void set_replay_program(const std::string& argv0) {
  replay_program() = argv0.find('/') != std::string::npos ? shell_word(argv0) : std::string("attncheck");
}

std::string attncheck_command(const std::string& args, const std::string& env) {
  return env + replay_program() + " " + args;
}

std::string replay_command(const std::string& finding_path, const std::string& extra, const std::string& env) {
  return attncheck_command("replay " + shell_word(finding_path) + extra, env);
}

namespace {
std::string check_name_of(const std::string& kernel, const std::string& property, const std::string& family) {
  const std::size_t seed = family.rfind(" seed=");
  return kernel + " / " + property + " / " + (seed == std::string::npos ? family : family.substr(0, seed));
}
}  // namespace

// The family's seed left out: `check --seed N` (a nightly run's new draw) renamed every JUnit testcase, and a
// dashboard's history broke every night (a UX review, session 33). The seed is in the JSON's family and the JUnit
// failure text; no suite holds two entries that differ only by seed (report_test).
std::string check_name(const RunEntry& e) {
  const std::string& family = e.checked.empty() ? e.outcome.family.describe() : e.checked;
  return check_name_of(e.outcome.kernel, e.outcome.property, family);
}

std::string baseline_kind(const std::string& message) {
  return message.rfind("error: ", 0) == 0 ? "error" : fault_kind(message);
}

bool known_in(const Baseline& b, const RunEntry& e) {
  if (e.outcome.status != Status::kFail) return false;
  const auto it = b.failed.find(check_name(e));
  return it != b.failed.end() && it->second == baseline_kind(e.outcome.message);
}

Baseline load_baseline(const std::string& path) {
  // A report is under a megabyte (the default suite on six kernels: ~0.5 MB).
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t(256) << 20;
  const std::string at = "--baseline " + path;
  if (path.empty()) throw Error("--baseline: an empty path");
  const std::string text = read_bounded_file(path, kMaxBytes, at, "a run report");
  json j;
  try {  // as strictly as a case file: a key twice (the last one read) could turn a failure into a known one
    j = parse_json_strictly(text, at);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (give the file `check --json FILE` wrote)");
  }
  const json format = j.is_object() ? j.value("format", json()) : json();
  if (format != kRunReportTag)
    throw Error(at + ": " +
                (format == "attncheck-case" ? "a saved case" : "its \"format\" is not \"attncheck-run\"") +
                ": not a run report: give the file `check --json FILE` wrote");
  const json version = j.value("version", json());
  const auto number = version.is_number_unsigned() ? version.get<std::uint64_t>() : 0;
  if (number < 1 || number > static_cast<std::uint64_t>(kRunReportVersion))
    throw Error(at + ": version " + (version.is_null() ? std::string("missing") : version.dump()) +
                " (this attncheck reads version " + std::to_string(kRunReportVersion) + ")");
  if (!j.contains("outcomes") || !j["outcomes"].is_array()) throw Error(at + ": no \"outcomes\" list");
  Baseline b;
  b.path = path;
  for (std::size_t i = 0; i < j["outcomes"].size(); ++i) {
    const json& o = j["outcomes"][i];
    if (!o.is_object()) throw Error(at + ": outcomes[" + std::to_string(i) + "]: not an object");
    const auto text_at = [&](const char* key) {
      if (!o.contains(key) || !o[key].is_string())
        throw Error(at + ": outcomes[" + std::to_string(i) + "]." + key + ": missing or not a string");
      return o[key].get<std::string>();
    };
    std::string name;
    if (o.contains("check")) {
      name = text_at("check");
    } else {
      const std::string kernel = text_at("kernel"), property = text_at("property");  // in this order, for the error
      name = check_name_of(kernel, property, text_at("family_checked"));
    }
    b.checks.insert(name);
    // A status the report never writes read as "not failed": a hand-edited or foreign file gated nothing.
    const std::string status = text_at("status");
    if (!status_from_name(status))
      throw Error(at + ": outcomes[" + std::to_string(i) + "].status '" + status +
                  "' is none of pass, fail, skip, degenerate");
    if (status == "fail") b.failed[name] = baseline_kind(text_at("message"));
  }
  // An interrupted baseline lacks the checks it never ran: their failures here read as new (check warns). The
  // report writes run.interrupted as the signal's name or null; anything else is not a report of this format.
  if (!j.contains("run") || !j["run"].is_object()) throw Error(at + ": no \"run\" object");
  const json interrupted = j["run"].value("interrupted", json());
  if (!interrupted.is_null() && !interrupted.is_string())
    throw Error(at + ": run.interrupted is " + interrupted.dump() + ", not a signal's name or null");
  if (interrupted.is_string()) b.interrupted = interrupted.get<std::string>();
  if (j.contains("not_run") && j["not_run"].is_array()) b.not_run = j["not_run"].size();
  return b;
}

std::string family_label(const RunEntry& e) { return e.label.empty() ? e.outcome.family.generator : e.label; }

std::pair<std::string, double> key_number_and_size(const json& stats) {
  if (!stats.is_object()) return {"", -1};
  // NaN or infinite outputs first: a statistic beside them leaves them out (`unbiased`), so it is not the reason.
  if (auto nf = stats.find("not_finite"); nf != stats.end() && nf->is_object() && nf->contains("count")) {
    char buf[64];
    const double count = nf->value("count", 0.0);
    std::snprintf(buf, sizeof buf, "non-finite=%lld %s", static_cast<long long>(count),
                  nf->value("tensor", std::string("?")).c_str());
    return {buf, 1e300 + count};  // above any statistic
  }
  // Preferred statistics, most telling first; names as the properties report them.
  static const std::pair<const char*, const char*> kKeys[] = {
      {"z", "z"}, {"ratio", "err/bound"}, {"error_ratio", "err/bound"}, {"mean_ulp", "mean"},
      {"max_error", "err"}, {"max_ulp", "ulp"}};
  for (const auto& [key, label] : kKeys) {
    auto it = stats.find(key);
    if (it != stats.end() && it->is_number()) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s=%.3g", label, it->get<double>());
      return {buf, std::fabs(it->get<double>())};
    }
  }
  return {"", -1};
}

std::string key_number(const Outcome& o) { return key_number_and_size(o.stats).first; }

std::string interrupted_message(const RunReport& r) {
  const int known = r.known_failures();
  return "interrupted by " + signal_name(r.interrupted_by) + " after " + std::to_string(r.entries.size()) + " of " +
         std::to_string(r.entries.size() + r.not_run.size()) + " checks, with " +
         (known ? "no new failure found (" + std::to_string(known) + " known from the baseline)" : "no failure found");
}

std::string signal_name(int sig) {
  const std::string abbrev = signal_abbrev(sig);
  return abbrev.empty() ? "signal " + std::to_string(sig) : abbrev;
}

json run_to_json(const RunReport& r) {
  json outcomes = json::array();
  for (const auto& e : r.entries) {
    const Outcome& o = e.outcome;
    outcomes.push_back({{"check", check_name(e)},
                        {"kernel", o.kernel},
                        {"property", o.property},
                        {"family", family_to_json(o.family)},
                        {"family_label", family_label(e)},
                        {"family_description", o.family.describe()},
                        {"family_checked", e.checked.empty() ? o.family.describe() : e.checked},
                        {"status", status_name(o.status)},
                        {"message", o.message},
                        {"stats", o.stats.is_null() ? json::object() : o.stats},
                        {"message_checked", o.message_checked.empty() ? json(nullptr) : json(o.message_checked)},
                        {"stats_checked", o.stats_checked.is_null() ? json(nullptr) : o.stats_checked},
                        {"instance_index", o.instance_index},
                        {"literal", o.literal ? json(o.literal->problem.describe()) : json(nullptr)},
                        {"instances_run", o.instances_run},
                        {"seconds", o.seconds},
                        {"shrink_seconds", o.shrink_seconds},
                        {"shrink_steps", o.shrink_steps},
                        {"finding", e.finding.empty() ? json(nullptr) : json(e.finding)},
                        {"replay", e.finding.empty() ? json(nullptr) : json(replay_command(e.finding, e.replay_extra, e.replay_env))},
                        {"finding_error", e.finding_error.empty() ? json(nullptr) : json(e.finding_error)},
                        {"recheck", e.recheck.empty() ? json(nullptr) : json(e.recheck)},
                        {"known_failure", e.known_failure}});
  }
  const RunVerdict verdict = run_verdict(r);
  json not_run = json::array();
  for (const auto& e : r.not_run)
    not_run.push_back({{"check", check_name(e)},
                       {"kernel", e.outcome.kernel},
                       {"property", e.outcome.property},
                       {"family_label", e.label},
                       {"family_checked", e.checked},
                       {"reason", e.not_run_reason.empty() ? "interrupted" : e.not_run_reason}});
  return {{"format", kRunReportTag},
          {"version", kRunReportVersion},
          {"run",
           {{"attncheck", tool_version().empty() ? json(nullptr) : json(tool_version())},
            {"kernels", r.kernels},
            {"suite", r.suite},
            {"seed", r.seed_given ? seed_to_json(r.seed) : json(nullptr)},
            {"budget",
             {{"instances", r.budget.instances},
              {"seconds", r.budget.seconds},
              {"epsilon_ulp", r.budget.epsilon_ulp},
              {"z_crit", r.budget.z_crit}}},
            {"jobs", r.jobs},
            {"started_at", r.started_at},
            {"wall_seconds", r.wall_seconds},
            {"interrupted", r.interrupted_by ? json(signal_name(r.interrupted_by)) : json(nullptr)}}},
          {"summary",
           {{"verdict", verdict.name},
            {"exit_status", verdict.exit_status},
            {"pass", r.count(Status::kPass)},
            {"fail", r.count(Status::kFail)},
            {"skip", r.count(Status::kSkip)},
            {"degenerate", r.count(Status::kDegenerate)},
            {"not_run", r.not_run.size()}}},
          {"baseline", r.baseline.empty() ? json(nullptr)
                                          : json{{"path", r.baseline},
                                                 {"known_fail", r.known_failures()},
                                                 {"now_pass", r.now_pass}}},
          {"outcomes", outcomes},
          {"not_run", not_run}};
}

}  // namespace attncheck
