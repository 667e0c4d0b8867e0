// main.cpp — the attncheck executable: `attncheck list | check | replay | fuzz` (see commands.h).
// Every attncheck::Error, CLI11 parse error or unexpected exception becomes one line on stderr and exit 2;
// nothing escapes as a crash or a stack trace. Run: ./build/harness/attncheck --help
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "attncheck_version.h"  // ATTNCHECK_VERSION, generated at build time (cli/version.cmake)
#include "harness/cli/commands.h"
#include "harness/corpus.h"
#include "harness/plugin/attncheck_plugin.h"
#include "harness/problem.h"
#include "harness/run_report.h"

namespace {

// The long option of `command` a mistyped --word most likely meant (nearest_name: --kernal, --inst), or "".
std::string nearest_option(const CLI::App* command, const std::string& word) {
  if (command == nullptr || word.rfind("--", 0) != 0) return "";
  std::vector<std::string> names;
  for (const CLI::Option* o : command->get_options())
    for (const std::string& name : o->get_lnames()) names.push_back(name);
  const std::size_t equals = word.find('=');
  const std::string typed = word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  const std::string near = attncheck::nearest_name(typed, names);
  return near.empty() ? "" : "--" + near;
}

// CLI11's wording for the commonest slips, said plainly (a README audit, session 32: "files is required",
// "--time: At Most 1 required but received 2", "--kernel: 1 required KERNEL missing"; session 33: "A subcommand is
// required", "what: x not in {kernels,...}"); anything else as CLI11 says it.
std::string plain_parse_error(const std::string& what) {
  static const std::regex missing_value(R"(^(-[-\w]+): 1 required .* missing$)");
  static const std::regex given_twice(R"(^(-[-\w]+): At Most 1 required but received (\d+)$)");
  static const std::regex not_in_set(R"(^\w+: (.*) not in \{(.*)\}$)");
  std::smatch m;
  if (std::regex_match(what, m, missing_value)) return m[1].str() + " needs a value";
  if (std::regex_match(what, m, given_twice)) return m[1].str() + " is given " + m[2].str() + " times: give it once";
  if (what == "files is required") return "no case file or folder to replay";
  if (what == "A subcommand is required") return "no command given; commands: list, check, replay, fuzz";  // (one parenthesis: "(see ...)" follows)
  if (std::regex_match(what, m, not_in_set)) {
    std::string choices = m[2].str();
    for (std::size_t at = choices.find(','); at != std::string::npos; at = choices.find(',', at + 2))
      choices.replace(at, 1, ", ");
    return "'" + m[1].str() + "' is not one of " + choices;
  }
  return what;
}

// CLI11's "The following arguments were not expected: abc --time" said plainly, from the words it left over, each
// whole and in the command line's order (its message joins them with spaces, last first). `command` is the command
// named, for "did you mean" (nullptr at the top level).
std::string plain_leftovers(const std::vector<std::string>& left, const CLI::App* command) {
  std::vector<std::string> options, arguments;
  for (const std::string& w : left) {
    const bool option = w.size() > 1 && w[0] == '-' && !std::isdigit(static_cast<unsigned char>(w[1])) && w[1] != '.';
    (option ? options : arguments).push_back(w);
  }
  std::string said;
  for (const std::string& o : options) {
    const std::string near = nearest_option(command, o);
    said += (said.empty() ? "" : "; ") + std::string("unknown option ") + o;
    if (!near.empty()) said += " (did you mean " + near + "?)";
  }
  if (!said.empty()) return said;  // the words beside an unknown option are most likely its value
  said = std::string("unexpected argument") + (arguments.size() > 1 ? "s" : "");
  for (std::size_t i = 0; i < arguments.size(); ++i) said += (i ? ", '" : " '") + arguments[i] + "'";
  return said;
}

// An option whose value is missing took the next option as it (`check --json -q` wrote the JSON report to a file
// named -q, `--findings -k` made a folder -k: a UX review, session 34). A value that looks like an
// option is refused, naming both; a number (-1) is left to the option's own check, and a path that starts with '-'
// is written ./-q. "-" alone is standard output. Also asked where parsing failed: the option's value may have left
// the rest unparsable (`--findings --time 2`: "unexpected argument '2'"). Says so on stderr, true; else false.
bool refused_option_taken_as_value(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) {
    for (const CLI::Option* o : command->get_options()) {
      // a flag, a positional (`replay -- -x.json`), or not given
      if (o->get_type_size() == 0 || !o->nonpositional() || o->count() == 0) continue;
      const std::string type = o->get_type_name();
      const bool path = type == "FILE" || type == "DIR" || type == "PATH";
      for (const std::string& value : o->results()) {
        const auto digit = [&](std::size_t i) { return i < value.size() && std::isdigit(static_cast<unsigned char>(value[i])); };
        if (value.size() < 2 || value[0] != '-' || digit(1) || (value[1] == '.' && digit(2))) continue;  // -1, -.5
        std::cerr << "attncheck: error: " << o->get_name() << " needs a value, and took the option '"
                  << attncheck::printable(value) << "' as it ("
                  << (path ? "a path that starts with '-' is written ./" + attncheck::printable(value) + "; " : "")
                  << "see attncheck " << command->get_name() << " --help)\n";
        return true;
      }
    }
  }
  return false;
}

// The exit status when standard output could not be written. A page read by a reader that went away (`attncheck list
// | head`, a help page into `head -3`) ends as any filter's does, quiet with 141 (128 + SIGPIPE, as killed by it): the
// reader took what it wanted (a UX review, session 33: "cannot write to standard output" read as a fault). Anything
// else, and a check, replay or fuzz run (work whose output was lost, findings saved), says so, exit 2.
int stdout_lost(bool is_page) {
  pollfd out{STDOUT_FILENO, 0, 0};
  const bool reader_gone = ::poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0;  // a pipe's write end, no reader
  if (is_page && reader_gone) return 128 + SIGPIPE;
  std::cerr << "attncheck: error: cannot write to standard output" << (reader_gone ? " (its reader went away)" : "")
            << "\n";
  return attncheck::cli::kExitUsage;
}

int run_main(int argc, char** argv) {
  // A reader that goes away (`attncheck check | head`) must not kill the run: SIGPIPE ended it before the rest of
  // the findings and the --json report were written. Ignored, a write to the closed pipe fails instead; the run goes
  // on, saves and writes everything, and exits 2 for the standard output it could not write (below).
  std::signal(SIGPIPE, SIG_IGN);
  // Children's exit statuses are read with waitpid (the fuzzer, plugin calls in isolation): SIGCHLD ignored by
  // whoever started attncheck (it passes through exec), or SA_NOCLDWAIT, has the kernel reap them itself and their
  // statuses are lost (`fuzz` then waited forever; a plugin's crash read as wait status 0). A handler is left alone.
  if (struct sigaction sa {}; ::sigaction(SIGCHLD, nullptr, &sa) == 0 &&
                              (sa.sa_handler == SIG_IGN || (sa.sa_flags & SA_NOCLDWAIT)))
    std::signal(SIGCHLD, SIG_DFL);
  if (argc > 0) attncheck::set_replay_program(argv[0]);  // printed replay lines name the program as invoked
  attncheck::set_tool_version(ATTNCHECK_VERSION);
  namespace cli = attncheck::cli;
  CLI::App app{"attncheck: property-based numerical tests for flash-attention kernels"};
  app.require_subcommand(1, 1);
  // What a bug report or a saved report needs to name: the commit, and the formats this build reads and writes.
  app.set_version_flag("--version", std::string("attncheck ") + ATTNCHECK_VERSION + " (case files version " +
                                        std::to_string(attncheck::kCorpusVersion) + ", JSON report version " +
                                        std::to_string(attncheck::kRunReportVersion) + ", plugin ABI " +
                                        std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR) + "." +
                                        std::to_string(ATTNCHECK_PLUGIN_ABI_VERSION_MINOR) + ")");
  app.footer(
      "Exit status: 0 all pass, 1 a property failed (or a replayed verdict differs), 2 usage or input error.\n"
      "Subcommand help: attncheck <command> --help, or attncheck help <command>.");
  cli::Runner run;
  cli::add_list(app, run);
  cli::add_check(app, run);
  cli::add_replay(app, run);
  cli::add_fuzz(app, run);
  const bool names_command = argc > 1 && argv[1][0] != '-';
  if (argc > 1 && !names_command) {  // before a command only --help and --version (CLI11 said "no command given")
    const std::string word = argv[1];
    if (word != "-h" && word != "--help" && word != "--version") {
      const std::string near =
          word.rfind("--", 0) == 0 ? attncheck::nearest_name(word.substr(2), {"help", "version"}) : "";
      std::cerr << "attncheck: error: unknown option " << attncheck::printable(word)
                << (near.empty() ? "" : " (did you mean --" + near + "?)")
                << " before the command: there only --help and --version; a command's options come after it, as in "
                << "attncheck check -k fa2 (see attncheck --help)\n";
      return cli::kExitUsage;
    }
    // `--help check` is `help check` (CLI11 printed the top page, exit 0, for `--help nonsense`); words after the
    // command are left out, as `check --help -k fa2` leaves them.
    if ((word == "-h" || word == "--help") && argc > 2) {
      static char help_word[] = "help";
      std::vector<char*> args{argv[0], help_word, argv[2]};
      return run_main(static_cast<int>(args.size()), args.data());
    }
    if (word == "--version" && argc > 2) {  // CLI11 prints the version at the flag and drops what follows: exit 0
      std::cerr << "attncheck: error: --version takes nothing after it (got " << attncheck::printable(argv[2])
                << "; see attncheck --help)\n";
      return cli::kExitUsage;
    }
  }
  if (names_command) {  // the first word names the command: say so when it names none
    const std::string word = argv[1];
    if (word == "help") {  // `attncheck help` is `attncheck --help`, `attncheck help check` is `attncheck check --help`
      if (argc > 3) {  // `help list fuzz` showed list's help and dropped the rest
        std::cerr << "attncheck: error: help takes one command at most (see attncheck --help)\n";
        return cli::kExitUsage;
      }
      if (argc > 2 && argv[2][0] == '-') {  // `help --help` (and `--help --help`, which comes here) names no command
        std::cerr << "attncheck: error: help takes a command name, not " << attncheck::printable(argv[2])
                  << " (commands: list, check, replay, fuzz; see attncheck --help)\n";
        return cli::kExitUsage;
      }
      static char help_flag[] = "--help";
      std::vector<char*> args{argv[0]};
      if (argc > 2 && std::string(argv[2]) != "help") args.push_back(argv[2]);  // `help help`: the top page
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
  // `--kernel=` (an empty value after '='): CLI11 took the next word as the value (`replay --kernel= DIR` replayed
  // nothing, on a kernel named DIR); a flag's `--quiet=` it took as the flag given. Only the command's own options:
  // an unknown one (--kernal=) is CLI11's "unknown option ... (did you mean --kernel?)". Words after `--` are files.
  const CLI::App* command = names_command ? app.get_subcommand(argv[1]) : nullptr;
  for (int i = 2; command && i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string word = argv[i];
    if (word.rfind("--help=", 0) == 0) {  // CLI11 printed the page and exit 0 for `check --help=x` (a UX review)
      std::cerr << "attncheck: error: --help takes no value (got " << attncheck::printable(word) << "; see attncheck "
                << argv[1] << " --help)\n";
      return cli::kExitUsage;
    }
    const CLI::Option* o = word.size() > 3 && word.rfind("--", 0) == 0 && word.find('=') == word.size() - 1
                               ? command->get_option_no_throw(word.substr(0, word.size() - 1))
                               : nullptr;
    if (o) {
      std::cerr << "attncheck: error: " << attncheck::printable(word) << " gives an empty value"
                << (o->get_expected_max() == 0 ? " (a flag: give it without '=')" : "") << " (see attncheck " << argv[1]
                << " --help)\n";
      return cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version: a page nobody received is not a success either
      const int status = app.exit(e);
      return std::cout.flush() ? status : stdout_lost(/*is_page=*/true);
    }
    if (refused_option_taken_as_value(app)) return cli::kExitUsage;
    // A command's own options are in its help, not the top level's (which lists the commands only).
    const std::string help = names_command ? std::string("attncheck ") + argv[1] + " --help" : "attncheck --help";
    const CLI::App* command = names_command ? app.get_subcommand(argv[1]) : nullptr;
    const std::string said = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr
                                 ? plain_leftovers(app.remaining(/*recurse=*/true), command)
                                 : plain_parse_error(e.what());
    std::cerr << "attncheck: error: " << attncheck::printable(said) << " (see " << help << ")\n";
    return cli::kExitUsage;
  }
  if (refused_option_taken_as_value(app)) return cli::kExitUsage;
  try {
    const int status = run ? run() : cli::kExitUsage;
    // A report nobody received is not a result: a closed or full standard output (`attncheck list >&-`) was exit 0.
    return std::cout.flush() ? status : stdout_lost(/*is_page=*/names_command && std::string(argv[1]) == "list");
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
