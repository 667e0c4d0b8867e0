// plugin_cli_test.cpp — end to end: the attncheck executable with --plugin. The example plugin passes the
// quick suite with its defect off; with ATTNCHECK_EXAMPLE_DEFECT=skip_rescale it fails `accurate` far outside
// the bound, is shrunk to a small case, and the finding is saved with a replay line. A crashing plugin is a
// reported failure (exit 1, the harness survives); a library that is not a plugin is a usage error (exit 2).
// Paths come in as ATTNCHECK_EXE and ATTNCHECK_*_PLUGIN. CliRun: ctest -R plugin_cli_test
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <tuple>

#include "harness/run_report.h"

namespace {

using attncheck::shell_word;
// The executable and the plugins as shell words: the commands go through sh, and the build folder may have a space
// in it. attncheck prints them the same way (replay lines, notes).
const std::string kExe = shell_word(ATTNCHECK_EXE);
const std::string kExamplePlugin = shell_word(ATTNCHECK_EXAMPLE_PLUGIN);
const std::string kFaultyPlugin = shell_word(ATTNCHECK_FAULTY_PLUGIN);
// A replay line's program: a plain path, or one quoted as a shell word.
const std::string kProgram = "(?:'[^']*attncheck'|\\S*attncheck)";

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `env attncheck args` with a findings directory of its own; returns its exit code and output.
CliRun attncheck(const std::string& env, const std::string& args) {
  static int counter = 0;
  const std::string findings = testing::TempDir() + "plugin_cli_findings_" + std::to_string(::getpid()) + "_" +
                               std::to_string(counter++);
  const std::string cmd = env + " " + kExe + " " + args + " --findings " + findings + " -q 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

const std::string kExample = "--plugin " + kExamplePlugin + " -k plugin:example --suite quick";

// Without -k, the plugin's kernels are checked beside the built-in ones (they were loaded, then left out).
TEST(PluginCli, APluginsKernelsAreInTheDefaultSet) {
  const CliRun r = attncheck("ATTNCHECK_EXAMPLE_DEFECT=none", "check --plugin " + kExamplePlugin +
                                                                  " --suite quick --property finite");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\nplugin:example "), std::string::npos) << r.output;  // its row of the summary table
  EXPECT_NE(r.output.find("\noracle "), std::string::npos) << r.output;
}

TEST(PluginCli, ExamplePassesWithItsDefectOff) {
  const CliRun r = attncheck("ATTNCHECK_EXAMPLE_DEFECT=none", "check " + kExample);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 0 FAIL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("plugin:example"), std::string::npos) << r.output;
}

TEST(PluginCli, SkipRescaleFailsFarOutsideTheBoundAndIsShrunk) {
  // Unshrunk first: the error is the defect's, hundreds of times the bound (a missed rescale of a running
  // max that moved by O(1) changes O by O(1)), not a borderline ulp.
  const CliRun raw = attncheck("ATTNCHECK_EXAMPLE_DEFECT=skip_rescale", "check " + kExample + " --property accurate --no-shrink");
  EXPECT_EQ(raw.exit_code, 1) << raw.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(raw.output, m, std::regex("err/bound=([0-9.e+]+)"))) << raw.output;
  EXPECT_GT(std::stod(m[1]), 10.0) << raw.output;

  const CliRun r = attncheck("ATTNCHECK_EXAMPLE_DEFECT=skip_rescale", "check " + kExample);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL plugin:example / accurate"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("replay: "), std::string::npos) << r.output;
  // Shrunk to a small case: one query row, a handful of keys (the shape is the first one printed after the
  // FAIL line, in the family's description).
  const std::string after = r.output.substr(std::min(r.output.size(), r.output.find("FAIL plugin:example / accurate")));
  ASSERT_TRUE(std::regex_search(after, m, std::regex("\\[b1 hq1 hkv1 nq1 nk([0-9]+) d([0-9]+)"))) << r.output;
  EXPECT_LE(std::stoi(m[1]), 8) << r.output;
  EXPECT_LE(std::stoi(m[2]), 4) << r.output;
}

// A decline is a skip, not a failure; and a run whose every check was skipped tested nothing, which is not a pass
// (exit 2, said on stderr): a kernel that declines every problem must not turn CI green.
TEST(PluginCli, ARunTimeDeclineIsASkipNotAFailure) {
  const CliRun r = attncheck("", "check --plugin " + kFaultyPlugin +
                                  " -k plugin:unsupported --suite quick --property accurate --no-shrink");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("0 FAIL, 1 skip"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing was tested: 1 check(s) skipped"), std::string::npos) << r.output;
}

TEST(PluginCli, ACrashingPluginIsAFailureNotACrash) {
  const CliRun r = attncheck("", "check --plugin " + kFaultyPlugin +
                                  " -k plugin:crash --suite quick --property accurate --no-shrink");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("plugin:crash: crash: killed by SIGSEGV"), std::string::npos) << r.output;
  // The fault is a finding: saved, with a replay command that loads the plugin again, and the replay
  // reproduces the verdict (the crash) without crashing attncheck.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("replay: " + kProgram + " replay (\\S+) --plugin ('[^']*'|\\S+)"))) << r.output;
  const std::string cmd = kExe + " replay " + m[1].str() + " --plugin " + m[2].str() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("expected fail, got fail"), std::string::npos) << out;
}

// `check -j` runs checks at once, but a plugin's kernel may keep one workspace (it is not reentrant): its checks run
// one at a time. plugin:unshared (faulty_plugin.c) returns an error when a call starts while another is running;
// with isolation off the calls share one process, so two checks at once would meet.
TEST(PluginCli, APluginsChecksRunOneAtATimeUnderJobs) {
  const CliRun r = attncheck("ATTNCHECK_PLUGIN_ISOLATION=0", "check --plugin " + kFaultyPlugin +
                                  " -k plugin:unshared --property accurate --instances 8 --no-shrink -j 4");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // O = 0 is not accurate: every check fails, none for the error below
  EXPECT_EQ(r.output.find("called while another call was running"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("checks: 0 pass, (\\d+) FAIL"))) << r.output;
  EXPECT_GE(std::stoi(m[1].str()), 8) << "too few checks to overlap (each holds its first call 20 ms)";
}

// A plugin's message is text by the time anyone sees it: its escape sequence and its byte that is not UTF-8 are
// \xNN on the terminal and in the case file (the byte made saving the finding throw: the finding was lost).
TEST(PluginCli, AnErrorMessageIsSavedAsText) {
  const CliRun r = attncheck("", "check --plugin " + kFaultyPlugin +
                                  " -k plugin:error --suite quick --property accurate --no-shrink");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("too small\\x1b[2J\\xff"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("replay: " + kProgram + " replay (\\S+)"))) << r.output;
  std::ifstream saved(m[1].str());
  ASSERT_TRUE(saved) << m[1].str();
  // The case names the kernel only; its note says which library found it (replay needs --plugin again).
  std::stringstream text;
  text << saved.rdbuf();
  EXPECT_NE(text.str().find("[found with --plugin " + kFaultyPlugin + "]"), std::string::npos)
      << text.str();
}

// The command's standard output (and its standard error too unless `stdout_only`), and its exit status in *status.
std::string run_shell(const std::string& cmd, int* status, bool stdout_only = false) {
  FILE* p = popen((cmd + (stdout_only ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

// A finding made under ATTNCHECK_PLUGIN_PAD (rows padded: `packed` ignores strides) is replayed by its printed line
// as pasted: the line sets the pad again (without it the replay read "expected fail, got pass", exit 1). --plugin
// takes one path, so the cases after it are cases (`replay --plugin lib a.json b.json` loaded a.json as a library).
// A built-in kernel's line names no --plugin.
TEST(PluginCli, AFindingsReplayLineCarriesThePluginSettings) {
  const CliRun r = attncheck("ATTNCHECK_PLUGIN_PAD=3", "check --plugin " + kFaultyPlugin +
                                                           " -k plugin:packed --suite quick --property finite --no-shrink");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("replay: (ATTNCHECK_PLUGIN_PAD=3 " + kProgram + " replay (\\S+) --plugin (?:'[^']*'|\\S+))")))
      << r.output;
  int st = -1;
  std::string out = run_shell(m[1].str(), &st);
  EXPECT_EQ(st, 0) << m[1].str() << "\n" << out;
  EXPECT_NE(out.find("expected fail, got fail"), std::string::npos) << out;
  const std::string copy = m[2].str() + ".copy.json";
  std::filesystem::copy_file(m[2].str(), copy, std::filesystem::copy_options::overwrite_existing);
  out = run_shell("ATTNCHECK_PLUGIN_PAD=3 " + kExe + " replay -q --plugin " + kFaultyPlugin +
                      " " + m[2].str() + " " + copy, &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out.find("cannot load"), std::string::npos) << out;
  out = run_shell(kExe + " list --plugin " + kFaultyPlugin + " kernels", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("plugin:packed"), std::string::npos) << out;
  const CliRun b = attncheck("", "check --plugin " + kExamplePlugin +
                                     " -k paper --property unbiased --family tied_max --instances 24 --no-shrink");
  EXPECT_EQ(b.exit_code, 1) << b.output;
  ASSERT_NE(b.output.find("replay: "), std::string::npos) << b.output;
  EXPECT_EQ(b.output.find("--plugin", b.output.find("replay: ")), std::string::npos) << b.output;
}

// `check --json -`: the report is all that reaches standard output, even what a plugin writes to it itself (this
// one's init prints a line): the terminal report moved to stderr at the descriptor, not only std::cout's buffer.
TEST(PluginCli, AReportOnStandardOutputKeepsAPluginsOwnOutputOut) {
  int st = -1;
  const std::string out = run_shell(kExe + " check -q --plugin " + shell_word(ATTNCHECK_FUTURE_PLUGIN) +
                                        " -k plugin:first --suite quick --property finite --no-shrink --findings " +
                                        testing::TempDir() + "plugin_cli_stdout --json -",
                                    &st, /*stdout_only=*/true);
  EXPECT_EQ(st, 1) << out;  // plugin:first writes nothing: its outputs read back as NaN
  EXPECT_EQ(out.find("hello from init"), std::string::npos) << out;
  EXPECT_EQ(out.rfind("{", 0), 0u) << out;
}

// A plugin: kernel no loaded library provides names the ones loaded; "pass --plugin LIB" alone read as if none was.
TEST(PluginCli, AnUnknownPluginKernelNamesTheLoadedOnes) {
  const CliRun r = attncheck("", "check --plugin " + kExamplePlugin + " -k plugin:nosuch --suite quick");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown kernel 'plugin:nosuch'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the plugins loaded provide plugin:example, plugin:example_bwd"), std::string::npos)
      << r.output;
  const CliRun none = attncheck("", "check -k plugin:nosuch --suite quick");  // none loaded: the hint as it was
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("they come from a library: pass --plugin LIB"), std::string::npos) << none.output;
  EXPECT_EQ(none.output.find("finding"), std::string::npos) << "a check run has no finding to name: " << none.output;
  // A near miss of a loaded kernel is a typo, not a kernel from another library (it said plugin kernels are not here).
  const CliRun typo = attncheck("", "check --plugin " + kExamplePlugin + " -k plugin:exampel --suite quick");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("unknown kernel 'plugin:exampel' (did you mean plugin:example?)"), std::string::npos)
      << typo.output;
  EXPECT_EQ(typo.output.find("not available here"), std::string::npos) << typo.output;
}

// A crash shrinks, as a failure does, to the smallest family that crashes the same way (it was reported on the
// family as found, 16x32 d16); a hang is not shrunk (each try would cost the call's time limit). A UX review,
// session 33.
TEST(PluginCli, ACrashShrinksAndAHangDoesNot) {
  const CliRun crash = attncheck("", "check -k plugin:crash --plugin " + shell_word(ATTNCHECK_FAULTY_PLUGIN) +
                                         " --suite quick --property finite");
  EXPECT_EQ(crash.exit_code, 1) << crash.output;
  EXPECT_NE(crash.output.find("killed by SIGSEGV"), std::string::npos) << crash.output;
  EXPECT_NE(crash.output.find("[b1 hq1 hkv1 nq1 nk1 d1 "), std::string::npos) << crash.output;
  EXPECT_NE(crash.output.find("; shrunk in "), std::string::npos) << crash.output;
  EXPECT_NE(crash.output.find("outputs unavailable"), std::string::npos) << crash.output;
  // Its case replays as the same fault (the printed replay line); another signal is another failure, and the
  // kernel's name is not compared (a case replayed with --kernel faults under another name).
  const std::size_t at = crash.output.find("replay: ");
  ASSERT_NE(at, std::string::npos) << crash.output;
  const std::string line = crash.output.substr(at + 8, crash.output.find('\n', at) - at - 8);
  int st = -1;
  const std::string again = run_shell(line + " -q", &st);
  EXPECT_EQ(st, 0) << line << "\n" << again;
  const std::size_t from = line.find(" replay ") + 8;
  const std::string file = line.substr(from, line.find(" --plugin") - from);
  const std::string abort = run_shell(kExe + " replay -q " + file + " --kernel plugin:abort --plugin " +
                                          shell_word(ATTNCHECK_FAULTY_PLUGIN), &st);
  EXPECT_EQ(st, 1) << abort;
  EXPECT_NE(abort.find("the file's failure is a kernel fault (crash: killed by SIGSEGV), this replay's a kernel "
                       "fault (crash: killed by SIGABRT): another failure"),
            std::string::npos)
      << abort;
  const CliRun hang = attncheck("ATTNCHECK_PLUGIN_TIMEOUT=1", "check -k plugin:hang --plugin " +
                                                                shell_word(ATTNCHECK_FAULTY_PLUGIN) +
                                                                " --suite quick --property finite");
  EXPECT_EQ(hang.exit_code, 1) << hang.output;
  EXPECT_NE(hang.output.find("timeout"), std::string::npos) << hang.output;
  EXPECT_EQ(hang.output.find("shrunk in"), std::string::npos) << hang.output;
  EXPECT_NE(hang.output.find("nq16 nk32"), std::string::npos) << hang.output;
}

// A case whose kernel now crashes differs from its finding, whatever the note says: a statistic's (the bias cases
// replayed "ok" on a crash, their prose notes not compared), a per-instance failure quoted after "Found: ", or one
// whose prose quotes nothing but whose stats were measured on the kernel's outputs. A crash case replays "ok".
TEST(PluginCli, AFindingWhoseKernelNowCrashesDiffers) {
  const std::string reg = std::string(ATTNCHECK_SOURCE_DIR) + "/corpus/regression/";
  for (const auto& [name, said] : {std::pair<std::string, std::string>{"paper-unbiased-tied_max-c0b57938.json",
                                                                     "the file's failure is a biased statistic"},
                                   {"fa2-finite-very_negative_rows-f33ba021.json", "the file's failure is on dQ"},
                                   {"", "the file's failure is one measured on the kernel's outputs (its stats)"}}) {
    std::string path = reg + name;
    if (name.empty()) {  // constant_v's case with its prose cut before "Found: ": stats {"c": 1.5} are left
      std::ifstream in(reg + "paper-constant_v-constant_v-4dac08cc.json");
      std::stringstream text;
      text << in.rdbuf();
      path = testing::TempDir() + "plugin_cli_prose_" + std::to_string(::getpid()) + ".json";
      std::ofstream(path) << std::regex_replace(text.str(), std::regex(" Found: [^\"]*"), "");
    }
    int st = -1;
    const std::string out =
        run_shell(kExe + " replay -q -k plugin:crash --plugin " + kFaultyPlugin + " " + shell_word(path), &st);
    EXPECT_EQ(st, 1) << name << "\n" << out;
    EXPECT_NE(out.find(said + ", this replay's a kernel fault (crash: killed by SIGSEGV): another failure"),
              std::string::npos)
        << name << "\n" << out;
  }
  // On the case's own kernel: a bias note against the bias check's other failure (outputs not finite), and a fault
  // quoted in prose after "Found: " against another fault. Both replayed "ok".
  std::ifstream in(reg + "paper-unbiased-tied_max-c0b57938.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto with = [&](const std::string& kernel, const std::string& note) {
    const std::string path = testing::TempDir() + "plugin_cli_" + kernel + "_" + std::to_string(::getpid()) + ".json";
    const std::string c =
        std::regex_replace(text.str(), std::regex("\"kernel\": \"[^\"]*\""), "\"kernel\": \"plugin:" + kernel + "\"");
    std::ofstream(path) << std::regex_replace(c, std::regex("\"note\": \"[^\"]*\""), "\"note\": \"" + note + "\"");
    return path;
  };
  for (const auto& [kernel, note, said] : std::initializer_list<std::tuple<std::string, std::string, std::string>>{
           {"silent", "biased: O: mean +0.2422 ulp, z +7.69 (T=64, away-from-zero +0.2422)",
            "the file's failure is a biased statistic, this replay's non-finite outputs"},
           {"abort", "prose. Found: kernel fault: plugin:crash: crash: killed by SIGSEGV (Segmentation fault)",
            "the file's failure is a kernel fault (crash: killed by SIGSEGV), this replay's a kernel fault (crash: "
            "killed by SIGABRT)"}}) {
    int st = -1;
    const std::string out = run_shell(kExe + " replay -q --plugin " + kFaultyPlugin + " " + with(kernel, note), &st);
    EXPECT_EQ(st, 1) << kernel << "\n" << out;
    EXPECT_NE(out.find(said), std::string::npos) << kernel << "\n" << out;
  }
}

// A check that runs long says so on a standard error that is not a terminal: which check, for how long (a plugin call
// waiting out its time limit, or a huge --instances, said nothing until it ended; one line per check start came at
// most every 5 s). The call here waits 7 s; the line comes at 5 s.
TEST(PluginCli, ALongCheckIsNamedWhileItRuns) {
  int st = -1;
  const std::string findings = testing::TempDir() + "plugin_cli_long_" + std::to_string(::getpid());
  const std::string err = run_shell("{ ATTNCHECK_PLUGIN_TIMEOUT=7 " + kExe + " check -k plugin:hang --plugin " +
                                        kFaultyPlugin + " --property finite --family normal --findings " + findings +
                                        " 2>&1 >/dev/null; }",  // standard error alone (not a terminal)
                                    &st, /*stdout_only=*/true);
  EXPECT_EQ(st, 1) << err;
  EXPECT_TRUE(std::regex_search(err, std::regex("attncheck: 0/1 checks done, still running: plugin:hang finite "
                                                "normal \\([4-9] s\\)\n")))
      << err;
}

// One fault met by every property is printed in full once; the other checks say it in two lines, each with its saved
// case's replay line (four whole blocks of the same inputs read as four bugs: a UX review, session 33).
TEST(PluginCli, AKernelFaultMetAgainIsPrintedOnce) {
  const CliRun r = attncheck("", "check -k plugin:crash --plugin " + shell_word(ATTNCHECK_FAULTY_PLUGIN) +
                                     " --suite quick");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto count = [&r](const std::string& what) {
    int n = 0;
    for (std::size_t at = r.output.find(what); at != std::string::npos; at = r.output.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("FAIL plugin:crash / "), 4) << r.output;
  EXPECT_EQ(count("\nreplay: "), 4) << r.output;
  EXPECT_EQ(count("(outputs unavailable: "), 1) << r.output;
  EXPECT_EQ(count("  the same kernel fault as accurate / normal above: plugin:crash: crash: killed by SIGSEGV"), 3)
      << r.output;
}

// A kernel that declines the suites' head dims everywhere is told where other shapes are (a UX review, session 33).
TEST(PluginCli, NothingTestedForTheHeadDimSaysWhereOtherShapesAre) {
  const CliRun r = attncheck("", "check -q -k plugin:unsupported --plugin " + shell_word(ATTNCHECK_FAULTY_PLUGIN) +
                                     " --suite quick");  // the helper names the findings folder
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing was tested"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--suite long has 64 and 128, and --family 'GENERATOR[head_dim=64]'"), std::string::npos)
      << r.output;
}

// A defect name the example does not know, from the environment, is a usage error at load (exit 2), as the same
// name in its init option is; it was read per call only, so every check became a kernel fault saved as a finding.
TEST(PluginCli, AnUnknownDefectInTheEnvironmentIsAUsageError) {
  const CliRun r = attncheck("ATTNCHECK_EXAMPLE_DEFECT=bogus", "check " + kExample);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ATTNCHECK_EXAMPLE_DEFECT='bogus': unknown defect"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
}

TEST(PluginCli, ANonPluginLibraryIsAUsageError) {
  const CliRun r = attncheck("", "check --plugin " + shell_word(ATTNCHECK_NO_ENTRY_PLUGIN) + " -k plugin:x --suite quick");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not an attncheck plugin"), std::string::npos) << r.output;
}

}  // namespace
