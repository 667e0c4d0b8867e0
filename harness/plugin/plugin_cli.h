// plugin_cli.h — the `--plugin PATH` option of the attncheck CLI (repeatable), in one call so that the CLI
// needs two lines for it: the include and add_plugin_option(*sub).
//
// Each PATH (optionally PATH:OPTIONS, passed to the plugin's init) is loaded with load_plugin() into
// default_registry() when the command line is parsed, before the command runs, so `-k plugin:<name>` finds
// its kernels. A bad plugin is a CLI::ValidationError (a usage error: message and exit 2), never a crash.
// Example: attncheck check --plugin build/harness/plugin/libattncheck_example_plugin.so -k plugin:example
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

void add_plugin_option(CLI::App& sub);
// " --plugin PATH" for every plugin loaded so far (empty when none): appended to a plugin kernel's printed replay
// command.
std::string plugin_replay_args();
// The ATTNCHECK_PLUGIN_* settings of this process that change what a plugin call does (pad, timeout, isolation), as
// shell words ending in a space ("ATTNCHECK_PLUGIN_PAD=3 "), or "": put before a plugin kernel's replay command. A
// finding made with padded rows or a short time limit did not reproduce without them.
std::string plugin_replay_env();
// Every PATH[:OPTIONS] given to --plugin so far, in order (`attncheck fuzz` hands them to the fuzz target).
const std::vector<std::string>& loaded_plugins();

}  // namespace attncheck::cli
