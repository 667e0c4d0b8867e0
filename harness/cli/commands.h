// commands.h — the subcommands of the attncheck CLI, one file each (cmd_list.cpp, cmd_check.cpp,
// cmd_replay.cpp, fuzz_command.cpp). Each add_* registers its options on the app and, when its subcommand
// is chosen, sets `run` to the action; main() runs it inside the one place that turns attncheck::Error into
// "exit 2".
// Exit codes everywhere: 0 all pass / verdicts match, 1 a property failed / a verdict differs, 2 usage or
// input error (bad option, unknown kernel, bad case file).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

using Runner = std::function<int()>;

void add_list(CLI::App& app, Runner& run);
void add_check(CLI::App& app, Runner& run);
void add_replay(CLI::App& app, Runner& run);
void add_fuzz(CLI::App& app, Runner& run);  // cli/fuzz_command.cpp

// Seconds between progress lines: `check` when stderr is not a terminal, `fuzz` always.
constexpr double kProgressEvery = 5.0;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

}  // namespace attncheck::cli
