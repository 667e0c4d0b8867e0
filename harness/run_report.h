// run_report.h — what one `attncheck check` run produced, and its three renderings: the JSON report
// (report_json.cpp), the JUnit XML report (report_junit.cpp) and the terminal summary table (summary_table.cpp).
//
// JSON: {"format": "attncheck-run", "version": 1, "run": {...}, "summary": {...}, "outcomes": [...], "not_run": [...]},
// one outcome per (kernel, property, family) checked. JUnit: one <testsuite> per kernel, one <testcase> per
// (property, family), <failure> carrying the message, the report and the replay command, <skipped/> for skips,
// degenerate families and failures known from --baseline. Everything is escaped. Tests: report_test.cpp parses both back.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/property.h"

namespace attncheck {

constexpr int kRunReportVersion = 1;
constexpr const char* kRunReportTag = "attncheck-run";  // its "format" (load_case tells it from a case)

struct RunEntry {
  Outcome outcome;
  std::string label;    // the suite entry's family label (SuiteEntry::label)
  std::string checked;  // the suite's family as checked, before any shrinking (Family::describe): the JUnit
                        // testcase name, the same whether the check passes or fails ("" = the outcome's family)
  std::string finding;  // path of the saved case ("" when none was written)
  std::string finding_error;  // why a failure's case could not be written ("" when it was, or none was due):
                              // the run then exits 2, and every report says so
  std::string replay_extra;  // what its replay needs besides the file, as shell words (" --plugin P"), or ""
  std::string replay_env;    // environment it needs, as shell words before the program ("ATTNCHECK_PLUGIN_PAD=3 "), or ""
  // The `check` command that runs this check again (attncheck_command: program, kernel, suite, property, --family,
  // seed and budget as given), to re-check a failure with more instances or another seed; it runs the suite's other
  // families of the generator for the property too where there are (recheck_siblings counts them, this one included).
  // Terminal (`re-check:` under a FAIL) and JSON ("recheck"); "" where not filled.
  std::string recheck;
  int recheck_siblings = 1;
  // A failure of a check that failed in the baseline too (`check --baseline FILE`): still a failure, printed, saved
  // and reported, but it does not fail the run (RunVerdict "known_failures").
  bool known_failure = false;
  // Why a check in RunReport::not_run did not run to its end: "" = the run was interrupted (a stop signal); else the
  // cause, said as it is ("out of memory (std::bad_alloc) ..."): the run exits 2 (RunVerdict "checks_not_run").
  std::string not_run_reason;
};

// An earlier `check --json` report given to `check --baseline`: the checks it ran and those that failed, by
// check_name (a report from before outcomes[].check: built from kernel, property and family_checked the same way),
// each failure with its baseline_kind.
struct Baseline {
  std::string path;
  std::set<std::string> checks;
  std::map<std::string, std::string> failed;  // check_name -> baseline_kind
  std::string interrupted;                    // its run.interrupted ("SIGTERM"), "" for a complete run
  std::size_t not_run = 0;                    // the checks that run never ran
};
// Error naming the file and the field where it is not a readable attncheck-run report.
Baseline load_baseline(const std::string& path);
// What kind of failure a message is: "" for a property's verdict, a kernel fault's kind (fault_kind: "crash: killed by
// SIGSEGV"), or "error" for a check that threw. A failure is known from a baseline only as the same kind: a check that
// failed on accuracy there and crashes the kernel now is a new failure.
std::string baseline_kind(const std::string& message);
// Whether `e` is a failure the baseline has: the same check, failed there with the same baseline_kind.
bool known_in(const Baseline& b, const RunEntry& e);

struct RunReport {
  std::vector<std::string> kernels;
  std::string suite;
  std::uint64_t seed = 0;
  bool seed_given = false;  // --seed given (JSON: seed is null otherwise: the suite's own family seeds)
  Budget budget;
  std::string started_at;  // ISO-8601 UTC
  double wall_seconds = 0;
  // The workers that ran the checks (`check -j`: the number asked for, or fewer where threads could not start or
  // there were fewer checks). JSON run.jobs. Outcomes depend on it only where a time budget binds (--seconds, a
  // shrink reaching its limit), so a report says what ran it.
  int jobs = 1;
  std::vector<RunEntry> entries;
  // A run stopped by SIGINT or SIGTERM (`check` ends after the check in progress, whose outcome is discarded):
  // the signal's number, 0 when the run went to the end; and the checks it never ran, or could not run to their end
  // (RunEntry::not_run_reason) (outcome.kernel and
  // outcome.property, label and checked filled; no verdict). JSON: run.interrupted ("SIGINT"/"SIGTERM" or null),
  // summary.not_run and a "not_run" list; JUnit: each one a <testcase> with an <error>; the summary table marks
  // the cells they leave incomplete.
  int interrupted_by = 0;
  std::vector<RunEntry> not_run;
  // `check --baseline FILE`: its path ("" when none was given), and the checks that failed there and passed in this
  // run (check_name, in suite order): JSON "baseline", the summary's last lines.
  std::string baseline;
  std::vector<std::string> now_pass;
  // Why the JUnit report could not be written ("" when it was, or none was asked for): check exits 2 (RunVerdict).
  std::string junit_error;

  int count(Status s) const;
  int known_failures() const;  // failures with known_failure set
};

// What a check run comes to, in one word, and the exit status `attncheck check` gives it: "findings_unsaved" (2: a
// failure's case could not be written), else "report_unwritten" (2: the JUnit report could not be written; the JSON
// one is written after it, so it can say so), else "fail" (1: a failure not known from --baseline), else "interrupted"
// (128 + the signal, no new failure found), else "checks_not_run" (2: a check could not run to its end, out of
// memory: RunEntry::not_run_reason), else "nothing_tested" (2: every check skipped or discarded), else
// "known_failures" (0: every failure failed in the baseline too), else "pass" (0). The JSON report's
// summary.verdict and summary.exit_status; cmd_check.cpp exits by it, so a reader of the report and a shell see the same. (A JSON report
// that could not be written also makes check exit 2: it does not exist to say so.)
struct RunVerdict {
  const char* name;
  int exit_status;
};
RunVerdict run_verdict(const RunReport& r);

// s as one word of a POSIX shell: unchanged when it holds only characters no shell treats specially, else in
// single quotes (a ' as '\''), so a printed command can be pasted as it is (a findings path with a space broke it).
std::string shell_word(const std::string& s);
// The replay command of a saved case (terminal, JSON and JUnit say the same): the program, the path as a shell
// word, then `extra` (RunEntry::replay_extra), all after `env` (RunEntry::replay_env). The program is "attncheck"
// unless set_replay_program named another.
std::string replay_command(const std::string& finding_path, const std::string& extra = "", const std::string& env = "");
// `env` + the program (as replay_command names it) + " " + `args`: an attncheck command line to print.
std::string attncheck_command(const std::string& args, const std::string& env = "");
// The program as it was invoked (main's argv[0]) when that is a path (build/harness/attncheck): the printed line
// then runs as pasted from the same directory; a bare name (found on PATH) stays "attncheck".
void set_replay_program(const std::string& argv0);
// What attncheck this is (`attncheck --version`: the commit it was built from), written as the JSON report's
// run.attncheck; null in the report until it is set (a test program that is not the attncheck executable).
void set_tool_version(const std::string& version);
// "kernel / property / family as checked" without the family's seed: one check's name in every run, whatever --seed
// drew (JSON outcomes[].check; JUnit's testcase is named by what follows "kernel / ", its classname
// "attncheck.kernel").
std::string check_name(const RunEntry& e);
// How the reports name an entry's family: the suite entry's label, else the generator.
std::string family_label(const RunEntry& e);
// The statistic that best summarises an outcome in one short cell ("z=9.1", "err/bound=3.2", ...), or "".
std::string key_number(const Outcome& o);
// key_number of a statistic (an outcome's, or its stats_checked) and its size (|z|, err/bound, ...; a non-finite count
// above any), to pick the worst of several; -1 for none.
std::pair<std::string, double> key_number_and_size(const nlohmann::json& stats);

// An interrupted run with no new failure, in one line: "interrupted by SIGTERM after 45 of 49 checks, with no failure
// found" (or "no new failure found (16 known from the baseline)": it said "no failure" where --baseline knew 16).
std::string interrupted_message(const RunReport& r);
// "SIGINT", "SIGTERM", ... ("signal N" for a number glibc has no name for): how the reports name RunReport::interrupted_by.
std::string signal_name(int sig);

nlohmann::json run_to_json(const RunReport& r);
std::string run_to_junit(const RunReport& r);
std::string xml_escape(const std::string& s);
// Kernel × property table: pass / FAIL / skip / degen, with the key number of a failing cell.
std::string summary_table(const RunReport& r);
// The `unbiased` outcomes as a family × kernel table ("" when the run checked no bias).
std::string bias_table(const RunReport& r);


}  // namespace attncheck
