// fuzz_command.cpp — `attncheck fuzz`: a fuzzing campaign on one kernel with the libFuzzer kernel target
// (harness/fuzz/), then minimisation of every finding into the findings directory with a summary report.
//
//   attncheck fuzz --kernel paper --time 120 [--workers N] [--corpus DIR] [--findings DIR] [--fuzzer PATH]
//
// 1. Runs the fuzz binary (a clang/libFuzzer build: ci/fuzz_smoke.sh --build-only makes
//    build-fuzz/harness/fuzz/attncheck_fuzz_kernel) in keep-going mode (ATTNCHECK_FUZZ_CONTINUE=1: the
//    first finding per (property, generator) is written, fuzzing goes on); with --workers N > 1 in fork
//    mode (-fork=N -ignore_crashes=1), so even a crash does not end the campaign. The working corpus (default build-fuzz/corpus/<kernel>) grows;
//    corpus/seeds/kernel is read only. Raw findings go to <findings>/raw-<kernel>/, libFuzzer artifacts
//    next to them. Progress (elapsed, executions, exec/s, raw findings) goes to stderr every 5 s.
// 2. On exit, groups the raw findings by (property, generator), keeps the first seen of each group, shrinks
//    it with the property shrinker (check_and_shrink), checks that the minimal case replays with the same
//    verdict, and writes it with write_finding into <findings>.
// 3. Writes <findings>/fuzz-<kernel>-summary.md and .json: what failed, the minimal case, the replay
//    command, first-seen time (seconds into the campaign), executions and exec/s, how minimising ended. An earlier
//    campaign's summary there is kept as fuzz-<kernel>-<its start>-summary.md and .json.
// Exit: 0 no finding, 1 findings (minimised and saved), 2 usage error (no libFuzzer build, bad option), a fuzzer that
// ended or overran without a finding, a raw finding that could not be read, a group none of whose cases could be
// saved or a summary file that could not be written; 128 + N when signal N (SIGINT, SIGTERM) stopped a campaign that
// found nothing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "harness/bias_confirmation.h"
#include "harness/cli/commands.h"
#include "harness/cli/stop_signals.h"
#include "harness/corpus.h"
#include "harness/plugin/plugin_cli.h"
#include "harness/run_report.h"
#include "harness/signal_util.h"
#include "properties/property_util.h"
#include "properties/shrink.h"

namespace attncheck::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// No new shrink starts after max(kMinimiseSeconds, kMinimiseShare × campaign) of shrinking. A per-instance shrink
// takes milliseconds, a bias shrink (T instances per step) up to seconds: the 125 groups of a 120 s paper-fixed
// campaign took 9 s, paper's 102 took 4 s. Groups left over keep their raw case (the summary says "not minimised").
constexpr double kMinimiseSeconds = 120;
constexpr double kMinimiseShare = 0.05;

struct FuzzOptions {
  std::string kernel = "paper";
  double seconds = 60;
  int workers = 1;
  std::string corpus, findings = "corpus/findings", fuzzer, seeds = "corpus/seeds/kernel";
  bool seeds_given = false, corpus_given = false, fuzzer_given = false;
  std::uint64_t seed = 1;
  int bias_t = 32;
  bool no_feedback = false;
  double grace = 120;  // --grace: seconds past --time before the fuzzer is stopped
  std::vector<std::string> properties;  // --property: the target's ATTNCHECK_FUZZ_PROPERTIES (empty: its default)
};

std::string self_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout+stderr
};

Child spawn(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error("fuzz: cannot create a pipe");
  Child c;
  // SIGINT and SIGTERM wait until the child has its own dispositions: one arriving between fork and execv ran the
  // parent's counting handler in the child, was counted there and lost (the fuzzer then ran its full --time).
  StopSignalsBlocked blocked;
  c.pid = ::fork();
  if (c.pid < 0) {
    blocked.restore();
    throw Error("fuzz: cannot fork");
  }
  if (c.pid == 0) {
    for (int sig : {SIGINT, SIGTERM}) {  // the counting handler is attncheck's, not the fuzzer's
      struct sigaction now {};
      if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == count_stop_signal) ::signal(sig, SIG_DFL);
    }
    blocked.restore();
    ::setpgid(0, 0);  // its own process group: the forked libFuzzer workers are stopped with it
    ::signal(SIGPIPE, SIG_DFL);  // attncheck ignores it (main.cpp); an ignored signal would pass through execv
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::perror("execv");
    ::_exit(127);
  }
  // The parent sets the group too (the usual idiom): a stop signal that arrives before the child has run its own
  // setpgid must still reach it through kill(-pid) (it found no such group, and the fuzzer ran its full --time).
  ::setpgid(c.pid, c.pid);
  blocked.restore();
  ::close(fds[1]);
  c.out = fds[0];
  return c;
}

// Whether `path` is a libFuzzer build: a replay build (gcc) ignores flags; only a libFuzzer build answers -help=1
// with its usage text. Run by fork/exec, never through a shell (a path with quotes in it ran as a command).
// The target checks its ATTNCHECK_FUZZ_* settings before it answers: a bad one is an Error with the target's own
// line ("attncheck-fuzz: error: ..."), not "not a libFuzzer build".
// `env` holds what the campaign will pass that the target checks at its start (its plugin libraries).
bool is_libfuzzer_build(const std::string& path, const std::vector<std::string>& env) {
  Child c = spawn({path, "-help=1"}, env);
  std::string out;
  const auto start = Clock::now();
  while (seconds_since(start) < 30) {
    pollfd p{c.out, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(c.out, buf, sizeof buf);
    if (n <= 0) break;
    if (out.size() < (1u << 20)) out.append(buf, static_cast<std::size_t>(n));
  }
  ::kill(-c.pid, SIGKILL);  // it has exited already, or it is stuck: either way it is done
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  ::close(c.out);
  const std::string their_error = "attncheck-fuzz: error: ";
  if (const std::size_t at = out.find(their_error); at != std::string::npos) {  // said once: "attncheck: error: ..."
    const std::size_t from = at + their_error.size();
    throw Error("the fuzz target " + path + " refuses its settings: " + out.substr(from, out.find('\n', from) - from));
  }
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return out.find("libfuzzer") != std::string::npos;
}

// The checkout's libFuzzer build beside this attncheck's build folder (build/harness/attncheck: build-fuzz/), for a
// run from another directory (a UX review, session 33: only the current directory's build-fuzz/ was looked in).
// `rel` in the checkout whose build folder holds this attncheck (build/harness/attncheck: the checkout is two up).
fs::path in_checkout(const std::string& rel) { return (fs::path(self_dir()) / "../.." / rel).lexically_normal(); }
std::string beside_fuzzer() { return in_checkout("build-fuzz/harness/fuzz/attncheck_fuzz_kernel").string(); }

std::string find_fuzzer(const FuzzOptions& o, const std::vector<std::string>& env) {
  std::vector<std::string> tries;
  if (o.fuzzer_given && o.fuzzer.empty()) throw Error("--fuzzer: an empty path");  // it searched for one
  if (!o.fuzzer.empty()) {  // named: it or nothing
    std::error_code ec;  // (a link loop, a name too long: access() below says "no such file")
    if (fs::is_directory(o.fuzzer, ec))  // it was "not a libFuzzer build" (a directory is X_OK)
      throw Error("--fuzzer " + o.fuzzer + ": a directory; name the fuzz binary in it "
                  "(build-fuzz/harness/fuzz/attncheck_fuzz_kernel)");
    if (::access(o.fuzzer.c_str(), X_OK) != 0)
      throw Error("--fuzzer " + o.fuzzer + ": " + (::access(o.fuzzer.c_str(), F_OK) == 0 ? "not executable" : "no such file"));
    tries.push_back(o.fuzzer);
  }
  const char* from_env = std::getenv("ATTNCHECK_FUZZER");
  if (from_env && *from_env) tries.push_back(from_env);
  tries.push_back("build-fuzz/harness/fuzz/attncheck_fuzz_kernel");
  tries.push_back(self_dir() + "/fuzz/attncheck_fuzz_kernel");
  tries.push_back(beside_fuzzer());
  std::string rejected;
  for (const std::string& t : tries) {
    if (::access(t.c_str(), X_OK) != 0) continue;
    if (is_libfuzzer_build(t, env)) return t;
    if (!o.fuzzer.empty()) throw Error("--fuzzer " + t + " is not a libFuzzer build (build it with clang: ci/fuzz_smoke.sh --build-only)");
    rejected += " " + t;
  }
  throw Error(std::string("no libFuzzer build of attncheck_fuzz_kernel found (tried ") +
              (from_env && *from_env ? "ATTNCHECK_FUZZER=" + std::string(from_env) + ", " : std::string()) +
              "build-fuzz/harness/fuzz/ here and beside attncheck's build folder, and next to attncheck" +
              (rejected.empty() ? "" : "; not libFuzzer builds:" + rejected) +
              "); build it with clang: ci/fuzz_smoke.sh --build-only, or pass --fuzzer PATH");
}

// SIGINT and SIGTERM during a campaign (StopSignals::For::kFuzz, stop_signals.h): counted, acted on by run_fuzz's
// loop. The first stops the fuzzer (its process group is sent SIGTERM, which libFuzzer handles as SIGINT: it prints
// its statistics and exits; SIGINT itself did not stop a --workers campaign, whose fork-mode parent waits on its
// jobs in system() with SIGINT ignored: the jobs died, counted as crashes, and were replaced until --time), and
// the campaign then minimises and writes its summary as when its time is up; a second stops the fuzzer at once
// (SIGKILL) and minimising too (the groups not yet minimised keep their raw cases). Before, the signal ended
// attncheck at once: no minimisation, no summary, and the fuzzer, in a process group of its own, ran on without a
// parent. The SIGTERM is sent again each second while the group lives: a fork-mode job that its parent's system()
// was starting as the first one went out (its sh, not yet the job, got it) missed it, ran its whole job (~8 s) and
// held the output open (a stop at 10 s ended at 18-19 s, 3 stops in 5 here).

// A raw bias group is confirmed on a fresh sample before it is minimised (confirm_on_a_fresh_sample; why, and what it
// costs an unbiased kernel, in harness/bias_confirmation.h). The target is told not to confirm it first
// (ATTNCHECK_FUZZ_CONFIRM_BIAS=0), so that an unconfirmed group reaches this summary, listed "not confirmed".

// A file's identity for "did this campaign write it": its inode and modification time. A raw case is written by a
// rename of a fresh file (a new inode), libFuzzer's artifact by a rewrite (a new time, to the nanosecond where the
// filesystem keeps them), so one this campaign wrote again under an earlier campaign's name is told apart.
using FileId = std::tuple<ino_t, time_t, long>;
std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}
using Snapshot = std::map<std::string, FileId>;
Snapshot snapshot(const fs::path& dir) {
  Snapshot s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (const auto id = file_id(e.path().string())) s[e.path().string()] = *id;
  return s;
}

// Whether a file name in the raw folder is one of libFuzzer's artifacts: the input of a crash, timeout,
// out-of-memory or leak in the kernel under test.
bool is_artifact_name(const std::string& name) {
  for (const char* kind : {"crash-", "timeout-", "oom-", "leak-"})
    if (name.rfind(kind, 0) == 0) return true;
  return false;
}

struct Group {
  Case first;
  std::string raw_path;
  double first_seen = 0;  // seconds into the campaign
  int raw_count = 0;
};

// An earlier campaign's summary in `dir`, <stem>-summary.md and .json (a second campaign on one --findings folder;
// stem: fuzz-<kernel>), is kept: renamed to <stem>-<its start, from its .json's started_at, else the file's
// time>-summary.md and .json (a name that `replay DIR` passes over, as it does the summary), and said on stderr.
// Regular files only: a link (to /dev/stdout, to a shared report) is written through, as before.
void keep_earlier_summary(const fs::path& dir, const std::string& stem) {
  const fs::path md = dir / (stem + "-summary.md"), js = dir / (stem + "-summary.json");
  std::error_code ec;
  const auto earlier = [&](const fs::path& p) { return fs::is_regular_file(fs::symlink_status(p, ec)); };
  if (!earlier(md) && !earlier(js)) return;
  std::string when;
  if (std::ifstream in(js); earlier(js) && in) {
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("started_at") && j["started_at"].is_string()) when = j["started_at"];
  }
  struct stat st {};
  if (when.empty() && (::stat(md.c_str(), &st) == 0 || ::stat(js.c_str(), &st) == 0)) {
    std::tm tm{};
    char buf[32];
    if (::gmtime_r(&st.st_mtime, &tm) && std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) when = buf;
  }
  std::string stamp;  // 2026-12-06T11:02:03Z -> 2026-12-06T110203Z: a file name's characters only
  for (char ch : when)
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-') stamp += ch;
  if (stamp.empty()) stamp = "earlier";
  const std::string kept = stem + "-" + stamp;  // fuzz-<kernel>-<stamp>
  std::string name = kept + "-summary";
  const auto taken = [&](const std::string& n) {
    return fs::exists(dir / (n + ".md"), ec) || fs::exists(dir / (n + ".json"), ec);
  };
  for (int n = 2; taken(name);) name = kept + "-" + std::to_string(n++) + "-summary";
  for (const fs::path& from : {md, js}) {
    if (!earlier(from)) continue;
    const fs::path to = dir / (name + from.extension().string());
    fs::rename(from, to, ec);
    if (ec)
      std::cerr << "attncheck fuzz: warning: the earlier campaign's " << printable(from.string()) << " could not be "
                << "kept as " << printable(to.string()) << " (" << ec.message() << "); it may be replaced\n";
    else
      std::cerr << "attncheck fuzz: the earlier campaign's summary is kept as " << printable(to.string()) << "\n";
  }
}

int run_fuzz(const FuzzOptions& o) {
  if (o.seconds <= 0) throw Error("--time must be positive");
  if (o.seconds != std::floor(o.seconds))  // it was cut to whole seconds silently: 1.9 ran for 1
    throw Error("--time " + fmt_num(o.seconds) + ": whole seconds (libFuzzer's -max_total_time counts in seconds)");
  if (o.workers < 1) throw Error("--workers must be >= 1");
  if (o.corpus_given && o.corpus.empty()) throw Error("--corpus: an empty path");  // it fell back to the default
  (void)default_shrink_options();  // a bad ATTNCHECK_SHRINK_SECONDS is exit 2 now, not after the campaign
  Registry& reg = default_registry();
  const Kernel& kernel = reg.get(o.kernel);  // an unknown kernel is a usage error before any fuzzing
  // --plugin: the target loads the same libraries (one per line), so plugin:<name> kernels are fuzzed too. The
  // ATTNCHECK_PLUGIN_* settings reach it through the inherited environment, as they reach `check`. The fuzzer's
  // -help=1 probe loads them too: a library that fails only inside the target says so before the campaign.
  const bool plugin_kernel = o.kernel.rfind("plugin:", 0) == 0;
  std::vector<std::string> target_env;
  if (plugin_kernel && !loaded_plugins().empty()) {  // a built-in kernel's jobs need not load them
    std::string list;
    for (const std::string& p : loaded_plugins()) list += (list.empty() ? "" : "\n") + p;
    target_env.push_back("ATTNCHECK_FUZZ_PLUGINS=" + list);
  }
  // --property: the properties the target runs (ATTNCHECK_FUZZ_PROPERTIES; unbiased_at_ties only when named). A name
  // attncheck does not know is an error listing the known ones; the -help=1 probe has the target refuse one it cannot run.
  // `none` (alone): no property, only what the sanitizers and the fuzzer see (crashes, faults, timeouts), faster.
  if (!o.properties.empty()) {
    std::vector<std::string> names;  // each once, in the order given
    for (const std::string& p : o.properties) {
      if (p != "none") (void)get_property(p);  // an Error listing the known properties
      if (std::find(names.begin(), names.end(), p) == names.end()) names.push_back(p);
    }
    if (names.size() > 1 && std::find(names.begin(), names.end(), "none") != names.end())
      throw Error("--property none means no property: it cannot be given with others");
    // gpu_matches_cpu_model alone on a kernel with no CPU twin skips every input: the campaign ran at the speed of
    // `none` and said "no finding", exit 0 (check says "nothing was tested", exit 2).
    if (names == std::vector<std::string>{"gpu_matches_cpu_model"} && !kernel.cpu_twin().kernel)
      throw Error("--property gpu_matches_cpu_model on " + o.kernel + " would test nothing: it has no CPU twin (CPU " +
                  "kernels are their own models); fuzz a cuda: kernel with it, or another property here");
    std::string list;
    for (const std::string& p : names) list += (list.empty() ? "" : ",") + p;
    target_env.push_back("ATTNCHECK_FUZZ_PROPERTIES=" + list);
  }
  // The -help=1 probe runs with the kernel too: a fuzz build without it (a twin in the CPU-only build-fuzz/) refuses
  // it there, in one line, not after the campaign ("the fuzzer ended with exit 2 ... see fuzz.log").
  std::vector<std::string> probe_env = target_env;
  probe_env.push_back("ATTNCHECK_FUZZ_KERNEL=" + o.kernel);
  const std::string fuzzer = find_fuzzer(o, probe_env);
  // The seeds named, the corpus and where the findings go are checked before the campaign, not after it; the
  // findings last, since their check makes the folder (a missing --seeds left an empty one behind: a UX review).
  // The defaults are the checkout's, found from here or, as the fuzzer is, beside attncheck's build folder (a run
  // from another directory fuzzed without seeds and made ./build-fuzz/corpus there; a UX review, session 33).
  std::string seeds = o.seeds;
  if (!o.seeds_given && !fs::is_directory(seeds) && fs::is_directory(in_checkout(o.seeds)))
    seeds = in_checkout(o.seeds).string();
  if (!fs::is_directory(seeds)) {
    if (o.seeds_given) throw Error("--seeds " + seeds + ": not a directory");
    std::cerr << "attncheck fuzz: no seed corpus at " << seeds << " (run from the repository root, or pass --seeds)\n";
  }
  const std::string safe = file_name_part(o.kernel);  // as the findings spell the kernel
  // The working corpus: build-fuzz/corpus/<kernel> here, or the checkout's where its fuzzer was found beside
  // attncheck's build folder (a run from another directory made ./build-fuzz/corpus there). A named fuzzer (--fuzzer,
  // ATTNCHECK_FUZZER, a bundle's) keeps the corpus here, as before.
  const bool beside = fuzzer == beside_fuzzer();
  const fs::path corpus = !o.corpus.empty() ? fs::path(o.corpus)
                          : beside ? in_checkout("build-fuzz/corpus") / safe
                                   : fs::path("build-fuzz/corpus") / safe;
  const fs::path raw = fs::path(o.findings) / ("raw-" + safe);
  require_writable_dir(corpus.string(), "--corpus");  // a clear error, not filesystem_error's "internal error"
  require_writable_dir(o.findings, "--findings");  // (after the others: a folder made for a campaign refused is left)
  require_writable_dir(raw.string(), "--findings");
  const fs::path log = raw / "fuzz.log";
  // Past --time by --grace s, the fuzzer is stopped (SIGTERM, then SIGKILL grace_kill s later): libFuzzer checks its
  // -max_total_time between inputs, and one input (a large --bias-t batch) can run long.
  const double grace = o.grace, grace_kill = std::min(30.0, grace);

  std::vector<std::string> args{fuzzer, corpus.string()};
  if (fs::is_directory(seeds)) args.push_back(seeds);
  args.push_back("-max_total_time=" + std::to_string(static_cast<long>(o.seconds)));
  args.push_back("-seed=" + std::to_string(o.seed));
  if (o.workers > 1) {  // fork mode: N worker processes; a crashing worker is replaced, the campaign goes on
    args.push_back("-fork=" + std::to_string(o.workers));
    args.push_back("-ignore_crashes=1");
  }
  args.push_back("-print_final_stats=1");
  args.push_back("-artifact_prefix=" + (raw / "").string());
  std::vector<std::string> env{"ATTNCHECK_FUZZ_KERNEL=" + o.kernel, "ATTNCHECK_FUZZ_FINDINGS=" + raw.string(),
                               "ATTNCHECK_FUZZ_QUIET=1", "ATTNCHECK_FUZZ_CONTINUE=1", "ATTNCHECK_FUZZ_BIAS_T=" + std::to_string(o.bias_t),
                               std::string("ATTNCHECK_FUZZ_FEEDBACK=") + (o.no_feedback ? "0" : "1")};
  env.insert(env.end(), target_env.begin(), target_env.end());
  // An artifact's replay runs the target as the campaign ran it: without the settings above, a timeout found with a
  // large --bias-t replayed as an abort on the first ordinary finding (and wrote it into ./corpus/findings).
  std::string env_words = plugin_kernel ? plugin_replay_env() : "";
  for (const std::string& e : env) env_words += e.substr(0, e.find('=') + 1) + shell_word(e.substr(e.find('=') + 1)) + " ";
  std::cerr << "attncheck fuzz: " << o.kernel << " for " << o.seconds << " s, " << o.workers << " worker(s), corpus "
            << corpus.string() << ", raw findings " << raw.string() << "\n";
  // Only what this campaign writes counts: files already in the raw folder with the time they had then (an earlier
  // campaign's) are left out. By name alone, a finding this campaign made again (the same case, the same artifact
  // input: the same name) was left out too: a second campaign on one findings folder reported "no finding", exit 0,
  // and replaced the first campaign's summary with an empty one.
  const Snapshot before = snapshot(raw);
  const std::string started_at = utc_now_iso8601();
  const auto start = Clock::now();
  std::map<std::string, double> first_seen;  // raw case file -> seconds into the campaign
  std::map<std::string, double> artifacts;   // libFuzzer's crash-/timeout-/oom-/leak- inputs -> seconds
  auto scan = [&] {
    const double t = seconds_since(start);
    const auto scanned = fs::file_time_type::clock::now();  // beside t: a file's age is taken at the scan's time
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(raw, ec)) {
      const std::string path = e.path().string(), name = e.path().filename().string();
      if (const auto was = before.find(path); was != before.end()) {
        const auto now = file_id(path);
        if (!now || *now == was->second) continue;  // as an earlier campaign left it (or gone)
      }
      // When it was written, not when this once-a-second scan saw it: two raw cases of one group written within a
      // second were both "seen" at the scan's time, and the group kept the first by name, not by time.
      const auto written = [&] {
        std::error_code wec;
        const auto w = fs::last_write_time(path, wec);
        const double age = wec ? 0 : std::chrono::duration<double>(scanned - w).count();
        return std::clamp(t - age, 0.0, t);
      };
      if (e.path().extension() == ".json" && !first_seen.count(path)) first_seen[path] = written();
      if (is_artifact_name(name) && !artifacts.count(path)) artifacts.emplace(path, written());  // the first stays
    }
  };
  // The error channel: a pipe whose write end the fuzzer and every fork-mode job inherit (ATTNCHECK_FUZZ_ERROR_FD).
  // A job's own output goes to libFuzzer's temporary job log, which attncheck never sees, so a save that failed
  // there (a full disk) was invisible; the line on this pipe is not (one write of under PIPE_BUF bytes each).
  int err_pipe[2];
  if (::pipe(err_pipe) != 0) throw Error("fuzz: cannot create a pipe");
  ::fcntl(err_pipe[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  const int err_read = err_pipe[0];
  std::vector<std::string> spawn_env = env;
  spawn_env.push_back("ATTNCHECK_FUZZ_ERROR_FD=" + std::to_string(err_pipe[1]));
  // Raw bias failures come here unconfirmed: the groups are confirmed below, each once, and an unconfirmed one is
  // listed as such. (Not in env: an artifact's replay line is about its crash, and stays as it was.)
  spawn_env.push_back("ATTNCHECK_FUZZ_CONFIRM_BIAS=0");
  StopSignals on_signal(StopSignals::For::kFuzz);  // from here until the fuzzer has ended and minimising is stopped or done
  Child child = spawn(args, spawn_env);
  ::close(err_pipe[1]);  // the fuzzer's copies are the only writers
  std::ofstream logf(log);
  std::string pending, last_stat;
  long long execs = 0;
  double rate = 0;
  int unsaved = 0;  // the target's "cannot save a finding" lines (a full disk); it tries again on the next input
  std::set<std::pair<std::string, std::string>> unsaved_groups;  // their (property, generator)
  const std::regex unsaved_re(R"(cannot save a finding \(.* fails '([^']*)' on ([^)]*)\))");
  std::string err_pending;
  // The error channel's lines (ATTNCHECK_FUZZ_ERROR_FD): whole lines only, each one a failed save.
  const auto read_errors = [&](bool until_empty) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(err_read, buf, sizeof buf);
      if (n <= 0) return;  // EOF, EAGAIN (non-blocking: nothing more now) or an error
      err_pending.append(buf, static_cast<std::size_t>(n));
      for (std::size_t nl; (nl = err_pending.find('\n')) != std::string::npos;) {
        const std::string line = err_pending.substr(0, nl);
        err_pending.erase(0, nl + 1);
        std::smatch m;
        if (!std::regex_search(line, m, unsaved_re)) continue;
        unsaved_groups.insert({m[1].str(), m[2].str()});
        // Said now (the disk may still be full), the first few: every input failing that way says it again.
        if (++unsaved <= 3) std::cerr << printable(line) << (unsaved == 3 ? " (more may follow)" : "") << "\n";
      }
      if (!until_empty) return;
    }
  };
  int stops_acted = 0;
  bool overran = false;
  const std::regex exec_re(R"(#(\d+).*exec/s:? (\d+))");  // plain and -fork status lines
  auto last_progress = Clock::now();
  // The loop ends when the fuzzer has exited and its output has ended: a fuzzer that closed its output and ran on was
  // waited on forever (waitpid came after the output's end, past --time and past the signals below). Processes of
  // its group that outlive it (fork-mode jobs whose parent died) are waited on, and stopped by the deadlines below,
  // as the fuzzer is. Two limits more: output held open kLeftOpen s after the last byte read, past the fuzzer's exit,
  // by no process of its group (one it left in a session of its own, out of the group's signals' reach) is not
  // waited on; and a fuzzer that SIGKILL has not ended kStuck s later (in the kernel: a driver hang) is given up.
  constexpr double kLeftOpen = 5, kStuck = 30;
  bool eof = false, reaped = false;
  std::string status_unknown;  // why the fuzzer's exit status is not known ("" when it is)
  int status = 0;
  double reaped_at = 0, read_at = 0, killed_at = -1, scanned_at = -1, termed_at = -1;
  // Whether the fuzzer or a process of its group still runs: its group then exists (a group's ID is not given to
  // another process while it has members), and the stop signals and deadlines below are for it.
  const auto group_alive = [&] { return !reaped || ::kill(-child.pid, 0) == 0; };
  std::string given_up;  // why the loop ended without the output's end or the fuzzer's status
  bool err_open = true;  // until every writer of the error channel has closed it (then it would poll at once, always)
  while (!(eof && reaped) && given_up.empty()) {
    pollfd p[2] = {{eof ? -1 : child.out, POLLIN, 0}, {err_open ? err_read : -1, POLLIN, 0}};  // -1: not polled
    if (::poll(p, 2, eof || reaped ? 50 : 1000) > 0 && (p[1].revents & POLLIN)) read_errors(false);
    if ((p[1].revents & POLLHUP) && !(p[1].revents & POLLIN)) err_open = false;
    if (!reaped) {
      // -1 (not EINTR) is a child reaped elsewhere: SIGCHLD ignored by whoever started attncheck (reset in main();
      // the loop ran forever on it, deaf to signals)
      const pid_t r = ::waitpid(child.pid, &status, WNOHANG);
      if (r == child.pid || (r < 0 && errno != EINTR)) {
        reaped = true;
        if (r != child.pid) status_unknown = "reaped elsewhere";
        reaped_at = seconds_since(start);
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      char buf[4096];
      const ssize_t n = ::read(child.out, buf, sizeof buf);
      if (n < 0 && errno == EINTR) {
        // a signal (SA_RESTART makes this rare): acted on below, and the next poll reads on
      } else if (n <= 0) {
        eof = true;
      } else {
        read_at = seconds_since(start);
        logf.write(buf, n);
        pending.append(buf, static_cast<std::size_t>(n));
        std::size_t nl;
        while ((nl = pending.find('\n')) != std::string::npos) {
          const std::string line = pending.substr(0, nl);
          pending.erase(0, nl + 1);
          std::smatch m;
          // strtoll/strtod, not stoll/stod: a number too large for its type is the last value, not an exception
          // that ends the campaign's report.
          if (std::regex_search(line, m, exec_re)) {
            execs = std::strtoll(m[1].str().c_str(), nullptr, 10);
            rate = std::strtod(m[2].str().c_str(), nullptr);
          }
          // The final stat:: lines, where they count more: a fork-mode parent stopped by a signal says 0 for itself
          // (it runs no input), which replaced its jobs' count ("0 executions (0 exec/s)").
          if (line.find("stat::number_of_executed_units") != std::string::npos)
            execs = std::max(execs, std::strtoll(line.c_str() + line.rfind(':') + 1, nullptr, 10));
          if (line.find("stat::average_exec_per_sec") != std::string::npos)
            if (const double r = std::strtod(line.c_str() + line.rfind(':') + 1, nullptr); r > 0) rate = r;
          // libFuzzer names each artifact it writes: this campaign's even where a rewrite kept the old time
          if (const std::size_t w = line.find("Test unit written to "); w != std::string::npos) {
            const fs::path a = line.substr(w + 21);
            if (a.parent_path() == raw && is_artifact_name(a.filename().string()))
              artifacts.emplace(a.string(), seconds_since(start));
          }
        }
      }
    }
    const double el = seconds_since(start);
    if (el - scanned_at >= 1) {  // once a second: a scan of a large raw folder took longer than the reads it slowed
      scan();
      scanned_at = el;
    }
    if (seconds_since(last_progress) >= kProgressEvery) {
      std::cerr << "attncheck fuzz: " << static_cast<long>(el) << " s, " << execs << " executions, "
                << (o.workers > 1 ? "~" + fmt_num(std::round(execs / el)) : fmt_num(rate))  // (fork mode: as below)
                << " exec/s, " << first_seen.size() << " raw finding(s)\n";
      last_progress = Clock::now();
    }
    const bool alive = group_alive();
    const auto signal_group = [&](int sig) {  // SIGKILL starts kStuck's count; SIGTERM, its resending (below)
      if (!alive) return;
      ::kill(-child.pid, sig);
      if (sig == SIGKILL && killed_at < 0) killed_at = el;
      if (sig == SIGTERM) termed_at = el;
    };
    // A SIGTERM sent goes out again each second until the group has ended or SIGKILL went out: a process that joined
    // the group after it (a fork-mode job being started) missed it (the comment above run_fuzz's signals).
    if (termed_at >= 0 && killed_at < 0 && el - termed_at >= 1) signal_group(SIGTERM);
    if (g_stop_signals > stops_acted) {  // SIGINT or SIGTERM: stop the fuzzer, then minimise (a second: kill it)
      stops_acted = g_stop_signals;
      std::cerr << "attncheck fuzz: " << (stops_acted == 1 ? "stopping the fuzzer" : "killing the fuzzer")
                << " (signal " << g_last_stop_signal << ")"
                << (stops_acted == 1 ? "; the findings so far are minimised and summarised (again to skip that)" : "")
                << "\n";
      signal_group(stops_acted == 1 ? SIGTERM : SIGKILL);
    }
    if (el > o.seconds + grace && !overran && alive) {  // libFuzzer stops itself between inputs; a safety net
      overran = true;
      std::cerr << "attncheck fuzz: the fuzzer overran --time by " << grace << " s (one input runs long: a large "
                << "--bias-t?); stopping it\n";
      signal_group(SIGTERM);
    }
    if (el > o.seconds + grace + grace_kill) signal_group(SIGKILL);
    if (reaped && !eof && !alive && el - std::max(reaped_at, read_at) >= kLeftOpen)
      given_up = "the fuzzer exited, but its output was held open " + fmt_num(kLeftOpen) + " s after its last "
                 "line by a process outside its group (one it left in a session of its own); not waited on";
    if (!reaped && killed_at >= 0 && el - killed_at >= kStuck) {
      given_up = "the fuzzer had not ended " + fmt_num(kStuck) + " s after SIGKILL (stuck in the kernel?); not "
                 "waited on";
      status_unknown = "still running after SIGKILL";
    }
  }
  if (!given_up.empty()) std::cerr << "attncheck fuzz: " << given_up << "\n";
  ::close(child.out);
  read_errors(true);  // what the fuzzer and its jobs said last
  ::close(err_read);
  const bool log_complete = static_cast<bool>(logf);  // a failed write (a full disk) leaves the stream failed
  logf.close();
  scan();
  const int signals_fuzzing = g_stop_signals;  // those that came while the fuzzer ran
  const bool interrupted = signals_fuzzing > 0;
  const int stop_signal = g_last_stop_signal;
  // Two signals while fuzzing (^C^C) skip minimising; from then on a signal ends attncheck as before. Otherwise
  // the next signal stops minimising, and the one after it ends attncheck, even inside a long shrink.
  if (g_stop_signals >= 2) on_signal.restore();
  else on_signal.one_more();
  const double total = seconds_since(start);
  // The campaign's own average where the fuzzer's last figure is not it, said as such: a fork-mode parent's status
  // lines give its last job's rate ("#859 ... exec/s 86 ... time: 3s": 859 executions in 3 s read "(86 exec/s)", a
  // UX review, session 48), and stopped by a signal it reports 0 for itself ("3816 executions (0 exec/s)"). Its time
  // includes the start and the stop, so it reads low, never high.
  const bool rate_derived = (rate <= 0 || o.workers > 1) && execs > 0 && total > 0;
  const std::string rate_note = !rate_derived ? ""
                                : rate <= 0   ? ", the campaign's average: the fuzzer's last report said 0"
                                              : ", the campaign's average: the fork-mode fuzzer reports its last job's";
  if (rate_derived) rate = std::round(10 * double(execs) / total) / 10;
  // libFuzzer exits 0 when its time is up. Anything else is a crash, timeout, out-of-memory or leak in the kernel
  // under test (its input is an artifact in the raw folder: a finding), or the target could not start.
  const bool fuzzer_ok = status_unknown.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const std::string fuzzer_status = !status_unknown.empty() ? "an unknown status (" + status_unknown + ")"
                                    : WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                    : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                          : "status " + std::to_string(status);

  // Group the raw findings and minimise the first of each group.
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::vector<std::string> unreadable;  // raw findings that could not be read: the run then exits 2, naming them
  for (const auto& [path, t] : first_seen) {
    Case c;
    try {
      c = load_case(path);
    } catch (const Error& e) {
      std::cerr << "attncheck fuzz: error: cannot read the raw finding " << printable(e.what()) << "\n";
      unreadable.push_back(path);
      continue;
    }
    if (c.expected != Status::kFail) {  // the target writes failures only: anything else is not a finding
      std::cerr << "attncheck fuzz: skipping " << path << ": its verdict is " << status_name(c.expected)
                << ", not a failure\n";
      continue;
    }
    if (c.kernel != o.kernel) {
      std::cerr << "attncheck fuzz: skipping " << path << ": a finding on " << c.kernel << ", not " << o.kernel << "\n";
      continue;
    }
    auto key = std::make_pair(c.property, c.family.generator);
    auto it = groups.find(key);
    if (it == groups.end()) {
      groups[key] = Group{c, path, t, 1};
    } else {
      ++it->second.raw_count;
      if (t < it->second.first_seen) {
        it->second.first = c;
        it->second.raw_path = path;
        it->second.first_seen = t;
      }
    }
  }
  // A group whose save failed is lost unless a later input of the same group was saved (the target retries).
  std::vector<std::string> lost;
  for (const auto& key : unsaved_groups)
    if (!groups.count(key)) lost.push_back(key.first + " / " + key.second);
  nlohmann::json report{{"kernel", o.kernel}, {"seconds", total}, {"workers", o.workers}, {"executions", execs},
                        {"exec_per_s", rate}, {"exec_per_s_is_campaign_average", rate_derived},
                        {"raw_findings", first_seen.size()}, {"fuzzer", fuzzer},
                        {"fuzzer_status", fuzzer_status}, {"started_at", started_at},
                        {"overran", overran}, {"failed_saves", unsaved},
                        {"lost_groups", lost},
                        {"findings", nlohmann::json::array()}, {"artifacts", nlohmann::json::array()}};
  std::ostringstream md;  // the summary's body; its head (below) says how minimising ended, known at the end
  if (!lost.empty()) {
    md << "**Lost: " << lost.size() << " group(s) failed, but no case of theirs could be saved** (a full disk?):";
    for (const std::string& g : lost) md << " " << g << ";";
    md << " run the campaign again.\n\n";
  } else if (unsaved > 0) {
    md << unsaved << " attempt(s) to save a finding failed (a full disk?); each group was saved by a later input.\n\n";
  }
  // A crash, timeout, OOM or leak stops libFuzzer (or, with workers, is written and skipped): its input is the
  // finding, replayed by running the fuzzer on it.
  for (const auto& [path, t] : artifacts) {
    const std::string name = fs::path(path).filename().string(), kind = name.substr(0, name.find('-'));
    const std::string replay = env_words + shell_word(fuzzer) + " " + shell_word(path);
    report["artifacts"].push_back({{"kind", kind}, {"input", path}, {"first_seen_s", t}, {"replay", replay}});
    md << "## " << kind << " in the kernel under test\n\n- input: `" << path << "` (first seen " << t
       << " s into the campaign)\n- replay: `" << replay << "`\n- log: `" << log.string() << "`\n\n";
  }
  // Minimisation order: the first-seen group of each property (so every kind of failure gets a minimal case
  // even when the shrinking budget runs out), then the rest by first-seen time.
  std::vector<std::pair<std::string, std::string>> order;
  {
    std::vector<std::pair<double, std::pair<std::string, std::string>>> by_time;
    for (const auto& [key, g] : groups) by_time.push_back({g.first_seen, key});
    std::sort(by_time.begin(), by_time.end());
    std::set<std::string> props;
    for (const auto& [t, key] : by_time)
      if (props.insert(key.first).second) order.push_back(key);
    for (const auto& [t, key] : by_time)
      if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
  }
  const double shrink_budget = std::max(kMinimiseSeconds, kMinimiseShare * o.seconds);
  bool minimise_stopped = false;
  std::size_t not_minimised = 0;  // groups left raw by a signal or the spent budget
  std::size_t unconfirmed_groups = 0;  // bias groups a fresh sample did not confirm: not findings (exit status)
  for (const auto& key : order) {
    Group& g = groups[key];
    nlohmann::json f{{"property", key.first}, {"generator", key.second}, {"first_seen_s", g.first_seen},
                     {"raw_count", g.raw_count}, {"raw_case", g.raw_path}, {"found_at", g.first.found_at}};
    try {
      Case best = g.first;
      std::string message, report_text;
      bool was_minimised = false;
      const double shrinking = seconds_since(start) - total;
      // A second signal in all (or a first one after the fuzzer ended) stops minimising; the groups left keep their
      // raw cases and the summary is still written. The old dispositions come back, so one more signal ends
      // attncheck even in the middle of a long shrink.
      if ((g_stop_signals >= 2 || g_stop_signals > stops_acted) && !minimise_stopped) {
        minimise_stopped = true;
        on_signal.restore();
        std::cerr << "attncheck fuzz: minimising stopped by a signal; the groups left keep their raw cases\n";
      }
      // A kernel fault (the target's note starts with it) is not shrunk here (`check` shrinks a crash, an error or a
      // stray write since session 33; a campaign's groups keep their raw cases), nor run again to replay it: each
      // group's run met the fault again (a hang cost its time limit per group). Its replay line runs it.
      const bool fault = is_kernel_fault_message(g.first.note);
      const Budget& b = g.first.budget;
      std::optional<Outcome> shrunk;
      bool unconfirmed = false;
      if (fault) {
        message = g.first.note.substr(0, g.first.note.find(" | ")) + " (a fault is not shrunk)";
      } else if (minimise_stopped) {  // said apart from a spent budget (both read "(not minimised)")
        message = "(not minimised: minimising was stopped by a signal)";
        ++not_minimised;
      } else if (shrinking >= shrink_budget) {
        message = "(not minimised: the minimising budget of " + fmt_num(shrink_budget) + " s was spent)";
        ++not_minimised;
      } else {
        const Property& prop = get_property(g.first.property);
        // A bias: seen again on a fresh sample? Not a non-finite output: one wrong value on the instance it names,
        // which a fresh sample need not draw (needs_confirmation, bias_confirmation.h).
        if (prop.across_instances && g.first.expected == Status::kFail && !names_a_non_finite_output(g.first.stats)) {
          const Confirmation c = confirm_on_a_fresh_sample(prop, kernel, g.first.family, b);
          f["confirmation"] = {{"status", status_name(c.outcome.status)}, {"instances", c.budget.instances},
                               {"seed", seed_to_json(c.seed)}, {"message", c.outcome.message},
                               {"stats", c.outcome.stats}};
          if (!c.confirmed()) {
            unconfirmed = true;
            ++unconfirmed_groups;
            std::ostringstream why;
            why << "NOT CONFIRMED, not a finding: a fresh sample of the family (T = " << c.budget.instances
                << ", none of the raw case's instances) gives " << status_name(c.outcome.status);
            const std::string numbers = deciding_numbers(c.outcome);
            if (!numbers.empty()) why << " (" << numbers << ")";
            why << "; one check at T = " << b.instances << " fails an unbiased kernel about once in 3·10^5 and a "
                << "campaign makes many (bias_confirmation.h). Raw case kept";
            message = why.str();
          }
        }
        if (!unconfirmed) {
          std::cerr << "attncheck fuzz: minimising " << key.first << " / " << key.second << " ...\n";
          try {
            shrunk = check_and_shrink(prop, kernel, g.first.family, b);
          } catch (const KernelFault& e) {  // a fault the raw case did not show (a flaky kernel): kept as found
            message = std::string("kernel fault while minimising: ") + e.what() + "; kept the raw case";
          }
        }
      }
      f["confirmed"] = !unconfirmed;
      if (shrunk) {
        const Outcome& out = *shrunk;
        if (out.status == g.first.expected) {
          best = case_from_outcome(out, b, "fuzz");
          was_minimised = true;
          best.kernel = o.kernel;
          best.note = "minimised from " + g.raw_path + " (first seen " + std::to_string(g.first_seen) +
                      " s into the campaign)";
          message = out.message;
          report_text = out.report;
          f["shrink_steps"] = out.shrink_steps;
          f["shrink_seconds"] = out.shrink_seconds;
          f["stats"] = out.stats;
        } else {
          message = "shrinking did not reproduce the verdict (" + std::string(status_name(out.status)) +
                    "); kept the raw case";
        }
      }
      // Only minimised cases go into the findings directory; the others stay where the fuzzer wrote them. The replay
      // check runs the kernel once more: not for a fault, nor once a signal stopped minimising.
      const std::string path = was_minimised ? write_finding(o.findings, best) : g.raw_path;
      std::optional<bool> same;
      if (!fault && !minimise_stopped && !unconfirmed) {
        try {
          same = replay_case(best, reg).status == best.expected;
        } catch (const KernelFault&) {
          same = best.expected == Status::kFail;  // a fault replays as a failure (cmd_replay.cpp)
        }
      }
      // The JSON and the markdown say the same; a plugin kernel's replay loads its library again, under its settings.
      const std::string replay = plugin_kernel ? replay_command(path, plugin_replay_args(), plugin_replay_env())
                                               : replay_command(path);
      f["minimal_case"] = path;
      f["family"] = best.family.describe();
      f["literal"] = best.literal ? nlohmann::json(best.instance->problem.describe()) : nlohmann::json(nullptr);
      f["message"] = message;
      f["replay"] = replay;
      f["replays_same_verdict"] = same ? nlohmann::json(*same) : nlohmann::json(nullptr);  // null: not run here
      report["findings"].push_back(f);
      // The target writes one raw case per group and process, not one per failing input (with --workers, each of
      // libFuzzer's fork-mode jobs is a fresh process): the count is of cases, not of hits.
      md << "## " << key.first << " on " << key.second << (unconfirmed ? " (not confirmed: not a finding)" : "")
         << "\n\n- first seen: " << g.first_seen << " s into the campaign"
         << (g.raw_count > 1 ? " (" + std::to_string(g.raw_count) + " raw cases: one per fuzzing process that met it)" : "")
         << "\n- minimal " << (best.literal ? "instance" : "family") << ": `" << literal_origin(best)
         << best.family.describe() << "`\n- why: "
         << message << "\n- minimal case: `" << path << "` (replays with the same verdict: "
         << (!same ? "not run here" : *same ? "yes" : "NO") << ")\n- replay: `" << replay << "`\n\n";
      if (!report_text.empty()) md << "```\n" << report_text << (report_text.back() == '\n' ? "" : "\n") << "```\n\n";
    } catch (const std::exception& e) {  // one bad group (unknown property, a family too large) ends only itself
      f["error"] = e.what();
      report["findings"].push_back(f);
      md << "## " << key.first << " on " << key.second << "\n\n- raw case: `" << g.raw_path
         << "` (not minimised: " << e.what() << ")\n\n";
      std::cerr << "attncheck fuzz: " << key.first << " / " << key.second << ": " << e.what() << "\n";
    }
  }
  const std::string summary_stem = "fuzz-" + safe;
  const fs::path md_path = fs::path(o.findings) / (summary_stem + "-summary.md");
  const fs::path js_path = fs::path(o.findings) / (summary_stem + "-summary.json");
  // How the campaign and its minimising ended: a signal while minimising was said nowhere (the groups left read
  // "(not minimised)", as for a spent budget). "interrupted" is the fuzzing's, as the exit status 128 + N is.
  const bool signal_while_minimising = g_stop_signals > signals_fuzzing;
  report["interrupted"] = interrupted;
  report["signal_while_minimising"] = signal_while_minimising;
  report["minimising_stopped"] = minimise_stopped;
  report["not_minimised_groups"] = not_minimised;
  report["unreadable_raw_findings"] = unreadable;
  report["not_waited_on"] = given_up.empty() ? nlohmann::json(nullptr) : nlohmann::json(given_up);
  std::ostringstream head;
  head << "# attncheck fuzz: " << o.kernel << "\n\n" << static_cast<long>(total) << " s, " << o.workers
       << " worker(s), " << execs << " executions (" << (rate_derived ? "~" : "") << rate << " exec/s"
       << rate_note << "), " << first_seen.size()
       << " raw finding(s) in " << groups.size() << " group(s)"
       // (an unconfirmed bias group is listed far below; the head's count read as that many findings: a UX review)
       << (unconfirmed_groups ? ", " + std::to_string(unconfirmed_groups) + " of them a bias lean a fresh sample did "
                                "not confirm (listed, not a finding)" : std::string())
       << "; the fuzzer ended with " << fuzzer_status
       << (interrupted ? " (stopped by a signal)" : overran ? " (stopped by attncheck: it overran --time)" : "")
       << ".\n\n";
  if (!given_up.empty()) head << "Not waited on: " << given_up << ".\n\n";
  if (minimise_stopped)
    head << "Minimising was stopped by a signal: " << not_minimised << " group(s) keep their raw cases.\n\n";
  else if (not_minimised > 0)
    head << "The minimising budget (" << fmt_num(shrink_budget) << " s) was spent: " << not_minimised
         << " group(s) keep their raw cases.\n\n";
  else if (signal_while_minimising && !groups.empty())
    head << "A signal came while the last group was worked on; that group was finished.\n\n";
  const std::string summary = head.str() + md.str();
  // An earlier campaign's summary on this folder is kept under its start time: it was replaced, and its findings
  // (still on disk) were listed nowhere.
  keep_earlier_summary(o.findings, summary_stem);
  // Each file is tried, and the summary printed, whatever failed: an unwritable .md skipped the .json and the
  // printed summary. What failed is exit 2, after the summary.
  std::string unwritten;
  const std::string report_json = report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (const auto& [path, text] : {std::pair{md_path, summary}, std::pair{js_path, report_json}}) {
    try {
      write_text_file(path.string(), text);
    } catch (const Error& e) {
      unwritten += std::string(unwritten.empty() ? "" : "; ") + e.what();
    }
  }
  std::cout << printable(summary, /*keep_newlines=*/true) << "summary: " << printable(md_path.string()) << " and "
            << printable(js_path.string()) << "\n";
  if (!unwritten.empty())
    throw Error("the campaign's summary could not be written in full (printed above): " + unwritten);
  if (!unreadable.empty())  // a finding that cannot be read may be a real one, lost: not "no finding"
    throw Error(std::to_string(unreadable.size()) + " raw finding(s) could not be read (listed above and in " +
                js_path.string() + ")");
  if (!lost.empty())  // findings lost: not "no finding", and not only the ones saved
    throw Error(std::to_string(lost.size()) + " group(s) of findings could not be saved in " + raw.string() +
                " (a full disk?): " + lost.front() + (lost.size() > 1 ? " and more (the summary lists them)" : ""));
  if (!log_complete)  // lost saves come on the error channel (counted above); what was cut is the campaign's record
    throw Error("the fuzzer's log " + log.string() + " could not be written completely (a full disk?): the record of "
                "the campaign (crash traces, statistics) is incomplete");
  if (groups.size() > unconfirmed_groups || !artifacts.empty()) return kExitFail;
  if (interrupted) {  // stopped early with nothing found: not a clean "no finding" (a CI cancel read as a pass)
    std::cerr << "attncheck fuzz: stopped by signal " << stop_signal << " after " << static_cast<long>(total)
              << " s, with no finding\n";
    // Ended by the signal, as the shell expects (a script's `attncheck fuzz ...; next` stops at ^C): raised again
    // with its default action once everything is written.
    std::cout.flush();
    std::fflush(stdout);
    on_signal.restore();
    ::signal(stop_signal, SIG_DFL);
    ::raise(stop_signal);
    return 128 + stop_signal;  // not reached where the signal's default action ends the process
  }
  if (overran) {
    std::ostringstream by;
    by << grace;
    throw Error("the fuzzer overran --time by " + by.str() +
                " s and was stopped, with no finding (one input ran that long: a large --bias-t? --grace gives it "
                "longer); see " + log.string());
  }
  if (!fuzzer_ok)  // no input to show for it: the target did not start, or the fuzzer was killed
    throw Error("the fuzzer ended with " + fuzzer_status + " and left no finding; see " + log.string());
  if (execs == 0)  // libFuzzer reports every run ("#N ... exec/s", number_of_executed_units): none is no campaign
    throw Error("the fuzzer ended with exit 0 but reported no execution: nothing was fuzzed, so no finding means "
                "nothing; see " + log.string());
  return kExitPass;
}

}  // namespace

void add_fuzz(CLI::App& app, Runner& run) {
  auto opt = std::make_shared<FuzzOptions>();
  CLI::App* sub = app.add_subcommand("fuzz", "Fuzz one kernel with the libFuzzer target, then minimise every finding");
  sub->add_option("-k,--kernel", opt->kernel, "Kernel under test")->capture_default_str()->type_name("KERNEL");
  sub->add_option("-t,--time", opt->seconds, "Campaign length in whole seconds (1 to 30 days)")
      ->capture_default_str()
      ->type_name("SECONDS")
      ->check(number_in(1.0, 2592000.0));
  sub->add_option("-j,--workers", opt->workers, "Parallel libFuzzer workers (-fork=N), 1 to 256")
      ->capture_default_str()
      ->check(CLI::Validator(  // `-jobs=2` reads as -j "obs=2": say what was meant
          [](std::string& text) -> std::string {
            return text.rfind("obs", 0) == 0 ? "libFuzzer's -jobs is not passed through: use --workers N" : "";
          },
          ""))
      ->type_name("N")
      ->check(number_in(1, 256));
  auto* corpus =
      sub->add_option("--corpus", opt->corpus,
                      "Working corpus directory (default build-fuzz/corpus/<kernel>: here, or the checkout's when its "
                      "fuzzer is found beside attncheck's build folder)")
          ->type_name("DIR");
  sub->add_option("--findings", opt->findings, "Where minimised findings and the summary go")
      ->capture_default_str()
      ->type_name("DIR");
  auto* seeds = sub->add_option("--seeds", opt->seeds, "Read-only seed corpus")
                    ->capture_default_str()
                    ->type_name("DIR");
  auto* fuzzer =
      sub->add_option("--fuzzer", opt->fuzzer, "The libFuzzer build of attncheck_fuzz_kernel")->type_name("PATH");
  sub->add_option("--seed", opt->seed, "libFuzzer -seed, 1 to 2^32-1")
      ->capture_default_str()
      ->type_name("N")
      ->check(number_in<std::uint64_t>(1, 4294967295u));
  sub->add_option("--bias-t", opt->bias_t, "Bias property batch size per input, 24 to 100000 (below 24 its z test's level is not what it says)")
      ->capture_default_str()
      ->type_name("T")
      ->check(number_in(kMinBiasInstances, 100000));
  sub->add_flag("--no-feedback", opt->no_feedback, "Switch the error-guided extra counters off");
  sub->add_option("--property", opt->properties,
                  "Only this property (repeatable; default: every per-instance property, and unbiased on inputs with "
                  "the bias flag; unbiased_at_ties runs only when named; `none` alone: no property, crashes and "
                  "sanitizer faults only)")
      ->type_name("PROPERTY");
  sub->add_option("--grace", opt->grace,
                  "Seconds past --time before a fuzzer still running is stopped (SIGTERM; SIGKILL up to 30 s later), "
                  "1 to 1 day: one input of a large --bias-t can run long")
      ->capture_default_str()
      ->type_name("SECONDS")
      ->check(number_in(1.0, 86400.0));
  add_plugin_option(*sub);  // plugin:<name> kernels: the fuzz target loads the same libraries
  sub->footer(
      "Exit status: 0 no finding, 1 findings (minimised, saved, summarised in FINDINGS/fuzz-<kernel>-summary.md\n"
      "and .json), 2 usage error, no libFuzzer build, a bad ATTNCHECK_FUZZ_* setting, a fuzzer that ended or\n"
      "overran --time without a finding to show for it, a raw finding that could not be read, a group of\n"
      "findings none of which could be saved, or a summary that could not be written (it is printed first);\n"
      "128+N when signal N (Ctrl-C: 130) stopped it before any finding.\n"
      "SIGINT/SIGTERM stop the fuzzer and the findings so far are still minimised; a second signal skips that.");
  sub->callback([&run, opt, seeds, corpus, fuzzer] {
    opt->seeds_given = seeds->count() > 0;
    opt->fuzzer_given = fuzzer->count() > 0;
    opt->corpus_given = corpus->count() > 0;
    run = [opt] { return run_fuzz(*opt); };
  });
}

}  // namespace attncheck::cli
