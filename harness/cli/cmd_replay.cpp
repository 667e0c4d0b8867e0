// cmd_replay.cpp — `attncheck replay FILE...`: load each saved case (fully validated), check that its family
// still generates the pinned bits, re-run its property with its budget, print verdict and report.
// Exit 0 when every verdict matches the file's expected verdict, 1 when one differs, 2 when a file is bad
// (unreadable, malformed, generator drift); every file is still tried and reported.
#include <iostream>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/corpus.h"
#include "harness/plugin/plugin_cli.h"

namespace attncheck::cli {

namespace {

struct ReplayOptions {
  std::vector<std::string> files;
  bool quiet = false;
};

int run_replay(const ReplayOptions& opt) {
  int bad = 0, differ = 0;
  for (const std::string& path : opt.files) {
    try {
      const Case c = load_case(path);  // its errors name the file and the field
      Outcome o;
      try {
        o = replay_case(c, default_registry());
      } catch (const KernelFault& e) {  // the kernel crashed / hung / wrote out of bounds again: a failure
        o.kernel = c.kernel;
        o.property = c.property;
        o.status = Status::kFail;
        o.message = std::string("kernel fault: ") + e.what();
      } catch (const Error& e) {
        throw Error(path + ": " + e.what());  // drift, unknown kernel or property: still name the file
      }
      const bool same = o.status == c.expected;
      differ += !same;
      std::cout << (same ? "ok    " : "DIFFER") << " " << path << ": " << c.kernel << " / " << c.property << " / "
                << c.family.describe() << ": expected " << status_name(c.expected) << ", got " << status_name(o.status)
                << "\n";
      if (!opt.quiet && !o.report.empty()) {  // the report repeats the message and the statistic
        std::cout << o.report << (o.report.back() == '\n' ? "" : "\n");
      } else {
        if (!o.message.empty()) std::cout << "  " << o.message << "\n";
        if (!opt.quiet && !o.stats.is_null() && !o.stats.empty()) std::cout << "  stats: " << o.stats.dump() << "\n";
      }
    } catch (const std::exception& e) {  // Error for a bad file; anything else must not end the other replays
      ++bad;
      std::cout.flush();
      std::cerr << "attncheck: error: " << e.what() << "\n";
    }
  }
  if (opt.files.size() > 1)
    std::cout << opt.files.size() << " cases: " << opt.files.size() - bad - differ << " match, " << differ
              << " differ, " << bad << " could not be replayed\n";
  return bad ? kExitUsage : differ ? kExitFail : kExitPass;
}

}  // namespace

void add_replay(CLI::App& app, Runner& run) {
  auto opt = std::make_shared<ReplayOptions>();
  CLI::App* sub = app.add_subcommand("replay", "Re-run saved cases (corpus/findings, corpus/regression) and compare verdicts");
  sub->add_option("files", opt->files, "Case files (JSON, corpus/README.md)")->required();
  sub->add_flag("-q,--quiet", opt->quiet, "Only the verdict lines");
  add_plugin_option(*sub);  // cases found on plugin kernels need their library loaded again
  sub->callback([&run, opt] { run = [opt] { return run_replay(*opt); }; });
}

}  // namespace attncheck::cli
