// plugin_cli.cpp — see plugin_cli.h.
#include "harness/plugin/plugin_cli.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "harness/plugin/plugin_loader.h"
#include "harness/run_report.h"

namespace attncheck::cli {

namespace {
std::vector<std::string>& loaded_paths() {
  static std::vector<std::string> paths;
  return paths;
}
}  // namespace

const std::vector<std::string>& loaded_plugins() { return loaded_paths(); }

std::string plugin_replay_args() {
  std::string out;
  for (const std::string& p : loaded_paths()) out += " --plugin " + shell_word(p);
  return out;
}

std::string plugin_replay_env() {
  std::string out;
  for (const char* name : {"ATTNCHECK_PLUGIN_ISOLATION", "ATTNCHECK_PLUGIN_TIMEOUT", "ATTNCHECK_PLUGIN_PAD"})
    if (const char* v = std::getenv(name); v && *v) out += std::string(name) + "=" + shell_word(v) + " ";
  return out;
}

void add_plugin_option(CLI::App& sub) {
  sub.add_option_function<std::vector<std::string>>(
         "--plugin",
         [](const std::vector<std::string>& paths) {
           for (const std::string& p : paths) {
             try {
               load_plugin(p, default_registry());
               loaded_paths().push_back(p);
             } catch (const Error& e) {
               throw CLI::ValidationError("--plugin", e.what());
             }
           }
         },
         "Load the kernels of an attncheck plugin (.so) as plugin:<name> (repeatable; PATH:OPTIONS passes "
         "OPTIONS to its init). Environment: ATTNCHECK_PLUGIN_ISOLATION=0, ATTNCHECK_PLUGIN_TIMEOUT=S, "
         "ATTNCHECK_PLUGIN_PAD=N (harness/plugin/README.md)")
      ->type_name("PATH")
      // One path per --plugin, repeatable: `replay --plugin lib.so a.json b.json` took the cases as libraries.
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace attncheck::cli
