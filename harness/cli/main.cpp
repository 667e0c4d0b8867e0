// main.cpp — the attncheck executable: `attncheck list | check | replay | fuzz` (see commands.h).
// Every attncheck::Error, CLI11 parse error or unexpected exception becomes one line on stderr and exit 2;
// nothing escapes as a crash or a stack trace. Run: ./build/harness/attncheck --help
#include <cstdio>
#include <exception>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/problem.h"

int main(int argc, char** argv) {
  namespace cli = attncheck::cli;
  CLI::App app{"attncheck: property-based numerical tests for flash-attention kernels"};
  app.require_subcommand(1, 1);
  app.footer(
      "Exit status: 0 all pass, 1 a property failed (or a replayed verdict differs), 2 usage or input error.\n"
      "RapidCheck: set RC_PARAMS (e.g. RC_PARAMS=\"seed=42\" or the reproduce token a failure printed); attncheck\n"
      "passes it through to RapidCheck unchanged. Subcommand help: attncheck <command> --help");
  cli::Runner run;
  cli::add_list(app, run);
  cli::add_check(app, run);
  cli::add_replay(app, run);
  cli::add_fuzz(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "attncheck: error: " << e.what() << " (see attncheck --help)\n";
    return cli::kExitUsage;
  }
  try {
    return run ? run() : cli::kExitUsage;
  } catch (const attncheck::Error& e) {
    std::cout.flush();
    std::cerr << "attncheck: error: " << e.what() << "\n";
    return cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "attncheck: internal error: " << e.what() << "\n";
    return cli::kExitUsage;
  }
}
