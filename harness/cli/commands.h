// commands.h — the subcommands of the attncheck CLI, one file each (cmd_list.cpp, cmd_check.cpp,
// cmd_replay.cpp, fuzz_command.cpp). Each add_* registers its options on the app and, when its subcommand
// is chosen, sets `run` to the action; main() runs it inside the one place that turns attncheck::Error into
// "exit 2".
// Exit codes everywhere: 0 all pass / verdicts match, 1 a property failed / a verdict differs, 2 usage or
// input error (bad option, unknown kernel, bad case file).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <iomanip>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>

#include <CLI/CLI.hpp>

namespace attncheck::cli {

using Runner = std::function<int()>;

void add_list(CLI::App& app, Runner& run);
void add_check(CLI::App& app, Runner& run);
void add_replay(CLI::App& app, Runner& run);
void add_fuzz(CLI::App& app, Runner& run);  // cli/fuzz_command.cpp

// Seconds between progress lines: `check` when stderr is not a terminal, `fuzz` always.
constexpr double kProgressEvery = 5.0;

// A numeric option's check, for options of type T: "'abc' is not an integer" (or "a number") for text that does
// not parse as T, "not a finite number" for nan and inf, "2e7 is outside 0 to 10000000" for a value out of
// [lo, hi]. (CLI::Range says "Value abc not in range 1 to 1073741824" for both, with six decimals for
// floating-point bounds.)
template <class T>
CLI::Validator number_in(T lo, T hi) {
  auto show = [](T x) {
    std::ostringstream out;
    out << std::setprecision(12) << x;
    return out.str();
  };
  const std::string range = show(lo) + " to " + show(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        T value{};
        // Integers in decimal only, as --seed and the case files read them: CLI11's own conversion also takes
        // "0x20", "0b101" and " 24", which no other number here accepts.
        if constexpr (std::is_integral_v<T>)
          if (text.empty() || !std::all_of(text.begin(), text.end(), [](unsigned char c) {
                return std::isdigit(c) || c == '-' || c == '+';
              }))
            return "'" + text + "' is not an integer";
        if (!CLI::detail::lexical_cast(text, value)) {
          // An integer's digits (one sign at most) but no T: too large for T, "outside" the range, not "not an
          // integer" ("1-2" is still not an integer).
          const std::size_t digits_from = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
          if (std::is_integral_v<T> && text.size() > digits_from &&
              text.find_first_not_of("0123456789", digits_from) == std::string::npos)
            return text + " is outside " + range;
          return "'" + text + "' is not " + (std::is_integral_v<T> ? "an integer" : "a number");
        }
        if constexpr (std::is_floating_point_v<T>) {
          if (!std::isfinite(value)) return "not a finite number";
          // Numbers in decimal only (an optional sign, digits with one point, an exponent), as the integers above:
          // CLI11 also takes " 3", "0x10" (16) and "1_000" (1000) where a number of seconds is asked for.
          if (!std::regex_match(text, std::regex(R"([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)")))
            return "'" + text + "' is not a number";
        }
        if (!(value >= lo && value <= hi)) return text + " is outside " + range;
        return "";
      },
      "[" + show(lo) + " - " + show(hi) + "]");  // --help shows it after the type: INT:[1 - 256]
}

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

}  // namespace attncheck::cli
