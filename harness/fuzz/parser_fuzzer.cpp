// parser_fuzzer.cpp — fuzz target for the corpus-file parser and the CLI's argument handling
// (attncheck_fuzz_parser). Contract under test (corpus.h, cli/commands.h): bad input of any kind gives an
// attncheck::Error (or a CLI11 parse error), never a crash, a hang, a leak or a sanitizer report.
//
// The first byte picks the mode, the rest is the payload:
//   0  JSON text -> nlohmann::json::parse (non-throwing) -> case_from_json; a case that loads must survive
//      case_to_json -> case_from_json unchanged (checked: abort() on a difference);
//   1  the payload as a file on disk -> load_case (the path users and `attncheck replay` take);
//   2  NUL-separated CLI arguments -> the attncheck CLI parser (list/check/replay/fuzz options), parse only.
// Run:  build-fuzz/harness/fuzz/attncheck_fuzz_parser corpus/seeds/parser -max_total_time=600
//       build/harness/fuzz/attncheck_fuzz_parser corpus/seeds/parser      (gcc: replay only)
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/corpus.h"

namespace {

void fuzz_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  attncheck::Case c;
  try {
    c = attncheck::case_from_json(j, "fuzz-input");
  } catch (const attncheck::Error&) {
    return;  // the expected answer to a bad case
  }
  // A case that loaded must round-trip: write it and read it back, the JSON must not change.
  const nlohmann::json once = attncheck::case_to_json(c);
  const nlohmann::json twice = attncheck::case_to_json(attncheck::case_from_json(once, "round-trip"));
  if (once != twice) {
    std::fprintf(stderr, "parser fuzz: case does not round-trip\n%s\n%s\n", once.dump().c_str(), twice.dump().c_str());
    std::abort();
  }
}

void fuzz_file(const std::string& text) {
  static const std::string path = "/tmp/attncheck-parser-fuzz-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  try {
    (void)attncheck::load_case(path);
  } catch (const attncheck::Error&) {
  }
}

void fuzz_cli(const std::string& text) {
  std::vector<std::string> args{"attncheck"};
  std::string cur;
  for (char ch : text) {
    if (ch == '\0') {
      args.push_back(cur);
      cur.clear();
      if (args.size() >= 24) break;
    } else {
      cur += ch;
    }
  }
  if (!cur.empty() && args.size() < 24) args.push_back(cur);
  // --plugin loads its argument with dlopen while parsing (plugin_cli.cpp): a generated path that names a real
  // library (or this executable) would run foreign code and register kernels for the rest of the process. Loading
  // is tested by plugin_loader_test and plugin_cli_test; here such an input is passed over.
  for (const std::string& a : args)
    if (a.rfind("--plugin", 0) == 0) return;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CLI::App app{"attncheck (parser fuzz)"};
  app.require_subcommand(1, 1);
  attncheck::cli::Runner run;
  attncheck::cli::add_list(app, run);
  attncheck::cli::add_check(app, run);
  attncheck::cli::add_replay(app, run);
  attncheck::cli::add_fuzz(app, run);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  } catch (const attncheck::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: fuzz_json(payload); break;
    case 1: fuzz_file(payload); break;
    default: fuzz_cli(payload); break;
  }
  return 0;
}
