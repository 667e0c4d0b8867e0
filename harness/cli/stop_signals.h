// stop_signals.h — SIGINT and SIGTERM as "stop gracefully" for the long-running subcommands (`fuzz`, `check`).
//
// The handler only counts (async-signal-safe); the command's loop acts on the count. `fuzz`: the first stops the
// fuzzer and the findings are minimised and summarised, a second skips that (fuzz_command.cpp). `check`: the first
// ends the run after the check in progress (whose instance loop stops at its next instance, and whose shrinking keeps
// what it has: properties/property.h, request_stop) with the summary and both reports marked interrupted; a second
// signal ends attncheck at once: the handler puts the earlier dispositions back and raises it again (cmd_check.cpp).
// A signal within 0.5 s of the last one counted is the same request delivered twice (GNU timeout signals attncheck,
// then its process group) and is neither counted nor a second. A signal ignored when attncheck started (SIGINT in a
// shell's background job, nohup) stays ignored.
#pragma once

#include <signal.h>

#include <atomic>
#include <csignal>

namespace attncheck::cli {

// How many stop signals arrived since the command installed StopSignals, and the last one's number. Lock-free atomics:
// safe in a handler, and read by `check -j`'s worker threads (a volatile sig_atomic_t read across threads is a race).
extern std::atomic<int> g_stop_signals;
extern std::atomic<int> g_last_stop_signal;
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

// The counting handler (`fuzz` tells its own handler from the fuzzer's by it, in the forked child).
extern "C" void count_stop_signal(int sig);

class StopSignals {
 public:
  enum class For { kFuzz, kCheck };
  // kFuzz: counts every signal but a repeat within 0.5 s (SA_RESTART: read() and waitpid() go on; poll() returns).
  // kCheck: the first also asks the running check to stop (request_stop) and says on stderr what happens next; the
  // next ends attncheck as the dispositions before would have. Either way the count starts at 0.
  explicit StopSignals(For what);
  ~StopSignals() { restore(); }
  // From now on the next signal is counted; one more after it ends attncheck as the dispositions before would have.
  // For `fuzz`'s phase after the fuzzer, where a signal stops minimising at once.
  void one_more();
  // kCheck: from now on the next signal ends attncheck as the dispositions before would have, except one within 0.5 s
  // of a signal that came (the same request delivered twice).
  void end_at_next();
  // The dispositions attncheck had before (a further signal then ends it as it would have).
  void restore();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void install(void (*handler)(int), int flags);
  struct sigaction old_int_ {}, old_term_ {};
  bool restored_ = false;
};

}  // namespace attncheck::cli
