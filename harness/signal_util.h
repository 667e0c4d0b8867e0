// signal_util.h — two POSIX signal helpers that code on both sides of the library layering needs: the plugin library
// (isolated_call.cpp), which links attncheck_base only, and the harness's reports and the CLI above it
// (report_json.cpp, cli/fuzz_command.cpp). So they live in attncheck_base.
//
//   StopSignalsBlocked  SIGINT and SIGTERM blocked in this thread from construction until restore() (or the end of
//                       its scope), held across a fork(): a stop signal arriving between the fork and the child's own
//                       dispositions would run the parent's handler in the child (counted there and lost, or said
//                       twice). The child restores before() once its dispositions are set.
//   signal_abbrev       "SIGINT" for SIGINT (glibc's sigabbrev_np with "SIG" before it), "" for a number it has no
//                       name for; each caller words that case as it did.
// Tests: Cli.AnInterrupted* (a stop signal during `attncheck fuzz` and `check`), plugin_loader_test (a crash named
// "killed by SIGSEGV"), report_test.
#pragma once

#include <signal.h>

#include <string>

namespace attncheck {

class StopSignalsBlocked {
 public:
  StopSignalsBlocked();
  ~StopSignalsBlocked() { restore(); }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;
  void restore();                                  // the mask from before; again is a no-op
  const sigset_t& before() const { return before_; }  // the mask from before, for a child to restore itself

 private:
  sigset_t before_;
  bool restored_ = false;
};

std::string signal_abbrev(int sig);

}  // namespace attncheck
