// bench_main.h — the command line and exit status of the benchmark programs (flash_model_bench,
// bench_attention, bench_forward_many), so that a script can tell a measurement from a run that measured nothing.
//
// Exit status: 0 every benchmark the filter selects measured something; 1 one or more could not (no CUDA device,
// no cuDNN, a CUDA error), each reason counted on standard error once the benchmarks have run; 2 a usage error: an unknown
// flag or a malformed value (Google Benchmark prints its own complaint about a bad value and leaves the argument in
// argv; BENCHMARK_MAIN would exit 1 for it, the same as a failure), or a --benchmark_filter that selects no
// benchmark or does not compile (Google Benchmark says so and returns normally). --help prints the flags, exit 0.
// Checked here before Google Benchmark (1.7) sees them, because it takes them without complaint: a repetition count
// below 1 (0 ran nothing and exited 0; -3 aborted in std::vector::reserve) and a report format other than console,
// json, csv (it printed the usage and exited 0).
// Use: parse_flags() first (a GPU program checks its device after it, so --help and typos need no GPU), skip()
// instead of State::SkipWithError, and `return run_selected("name");` at the end of main.
// Test: kernels/bench_cli_test.sh (ctest -R bench_cli).
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace attncheck::bench {

// Why benchmark runs were not measured -> how many. Never destroyed: a static destructor may still skip.
inline std::map<std::string, int>& unmeasured() {
  static auto* m = new std::map<std::string, int>;
  return *m;
}

// Marks the running benchmark as not measured (Google Benchmark prints `ERROR OCCURRED: 'why'` on its row).
inline void skip(benchmark::State& state, const std::string& why) {
  state.SkipWithError(why.c_str());
  ++unmeasured()[why];
}

// Google Benchmark's flags; false (said on standard error) when an argument is left that it did not take.
inline bool parse_flags(int* argc, char** argv, const char* program) {
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    a.erase(0, a.rfind("--", 0) == 0 ? 2 : a.rfind('-', 0) == 0 ? 1 : 0);  // Google Benchmark takes -flag and --flag
    const std::size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool bad = false;
    if (flag == "benchmark_repetitions") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      bad = value.empty() || *end != '\0' || n < 1;
    } else if (flag == "benchmark_format" || flag == "benchmark_out_format") {
      bad = value != "console" && value != "json" && value != "csv";
    }
    if (bad) {
      std::fprintf(stderr, "%s: malformed value '%s' (repetitions: an integer >= 1; formats: console, json, csv)\n",
                   program, argv[i]);
      return false;
    }
  }
  benchmark::Initialize(argc, argv);  // --help: prints the flags and exits 0
  if (*argc <= 1) return true;
  std::fprintf(stderr, "%s: unknown flag or malformed value '%s' (--help lists the flags)\n", program, argv[1]);
  return false;
}

// Runs what --benchmark_filter selects and returns the exit status above.
inline int run_selected(const char* program) {
  const std::size_t selected = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (selected == 0) {
    std::fprintf(stderr, "%s: --benchmark_filter='%s' selects no benchmark (--benchmark_list_tests=true lists them)\n",
                 program, benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  int runs = 0;
  for (const auto& [why, n] : unmeasured()) runs += n;
  if (runs == 0) return 0;
  std::fprintf(stderr, "%s: %d benchmark run(s) measured nothing:", program, runs);
  for (const auto& [why, n] : unmeasured()) std::fprintf(stderr, " %s (%d);", why.c_str(), n);
  std::fprintf(stderr, " exit 1\n");
  return 1;
}

}  // namespace attncheck::bench
