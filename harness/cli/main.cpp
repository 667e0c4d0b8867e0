// main.cpp — the attncheck executable: `attncheck list | check | replay | fuzz` (see commands.h).
// Every attncheck::Error, CLI11 parse error or unexpected exception becomes one line on stderr and exit 2;
// nothing escapes as a crash or a stack trace. Run: ./build/harness/attncheck --help
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/problem.h"
#include "harness/run_report.h"

namespace {

// CLI11's wording for the commonest slips, said plainly (a README audit, session 32: "files is required",
// "--time: At Most 1 required but received 2", "--kernel: 1 required KERNEL missing"); anything else as CLI11 says it.
std::string plain_parse_error(const std::string& what) {
  static const std::regex missing_value(R"(^(-[-\w]+): 1 required .* missing$)");
  static const std::regex given_twice(R"(^(-[-\w]+): At Most 1 required but received (\d+)$)");
  std::smatch m;
  if (std::regex_match(what, m, missing_value)) return m[1].str() + " needs a value";
  if (std::regex_match(what, m, given_twice)) return m[1].str() + " is given " + m[2].str() + " times: give it once";
  if (what == "files is required") return "no case file or folder to replay";
  return what;
}

int run_main(int argc, char** argv) {
  // A reader that goes away (`attncheck check | head`) must not kill the run: SIGPIPE ended it before the rest of
  // the findings and the --json report were written. Ignored, a write to the closed pipe fails instead; the run goes
  // on, saves and writes everything, and exits 2 for the standard output it could not write (below).
  std::signal(SIGPIPE, SIG_IGN);
  if (argc > 0) attncheck::set_replay_program(argv[0]);  // printed replay lines name the program as invoked
  namespace cli = attncheck::cli;
  CLI::App app{"attncheck: property-based numerical tests for flash-attention kernels"};
  app.require_subcommand(1, 1);
  app.footer(
      "Exit status: 0 all pass, 1 a property failed (or a replayed verdict differs), 2 usage or input error.\n"
      "Subcommand help: attncheck <command> --help, or attncheck help <command>.");
  cli::Runner run;
  cli::add_list(app, run);
  cli::add_check(app, run);
  cli::add_replay(app, run);
  cli::add_fuzz(app, run);
  const bool names_command = argc > 1 && argv[1][0] != '-';
  if (names_command) {  // the first word names the command: say so when it names none
    const std::string word = argv[1];
    if (word == "help") {  // `attncheck help` is `attncheck --help`, `attncheck help check` is `attncheck check --help`
      if (argc > 3) {  // `help list fuzz` showed list's help and dropped the rest
        std::cerr << "attncheck: error: help takes one command at most (see attncheck --help)\n";
        return cli::kExitUsage;
      }
      static char help_flag[] = "--help";
      std::vector<char*> args{argv[0]};
      if (argc > 2) args.push_back(argv[2]);
      args.push_back(help_flag);
      return run_main(static_cast<int>(args.size()), args.data());
    }
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == word;
    if (!known) {
      std::cerr << "attncheck: error: unknown command '" << word << "' (commands: list, check, replay, fuzz; see "
                << "attncheck --help)\n";
      return cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A command's own options are in its help, not the top level's (which lists the commands only).
    const std::string help = names_command ? std::string("attncheck ") + argv[1] + " --help" : "attncheck --help";
    std::cerr << "attncheck: error: " << attncheck::printable(plain_parse_error(e.what())) << " (see " << help << ")\n";
    return cli::kExitUsage;
  }
  try {
    const int status = run ? run() : cli::kExitUsage;
    // A report nobody received is not a result: a closed or full standard output (`attncheck list >&-`) was exit 0.
    if (!std::cout.flush()) {
      std::cerr << "attncheck: error: cannot write to standard output\n";
      return cli::kExitUsage;
    }
    return status;
  } catch (const attncheck::Error& e) {
    std::cout.flush();
    std::cerr << "attncheck: error: " << attncheck::printable(e.what()) << "\n";
    return cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "attncheck: internal error: " << attncheck::printable(e.what()) << "\n";
    return cli::kExitUsage;
  }
}

}  // namespace

int main(int argc, char** argv) { return run_main(argc, argv); }
