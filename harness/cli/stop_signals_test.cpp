// stop_signals_test.cpp — StopSignals in a child process: one request delivered twice (GNU timeout signals attncheck
// and then its process group) is one stop; a second signal later ends the process at once, as the README says.
// Run: ctest -R stop_signals_test   (label unit)
#include "harness/cli/stop_signals.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace attncheck::cli {
namespace {

// The wait status of a child that runs `body` and then exits 0 (a failed expectation there exits 3).
int in_child(const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    body();
    ::_exit(0);
  }
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  return ws;
}

TEST(StopSignals, ARepeatWithinHalfASecondIsTheSameRequest) {
  for (const auto what : {StopSignals::For::kCheck, StopSignals::For::kFuzz}) {
    const int ws = in_child([what] {
      StopSignals on_signal(what);
      ::raise(SIGTERM);  // the handler runs before raise returns
      ::raise(SIGTERM);  // timeout's second delivery: a check that took it as "again" ended here
      ::raise(SIGINT);   // either signal
      if (g_stop_signals != 1 || g_last_stop_signal != SIGTERM) ::_exit(3);
    });
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << "wait status " << ws;
  }
}

TEST(StopSignals, ASecondSignalLaterEndsCheckAtOnceAndCountsForFuzz) {
  const int check = in_child([] {
    StopSignals on_signal(StopSignals::For::kCheck);
    ::raise(SIGINT);
    ::usleep(600000);
    ::raise(SIGTERM);  // ends the process here, by SIGTERM
    ::_exit(4);
  });
  EXPECT_TRUE(WIFSIGNALED(check) && WTERMSIG(check) == SIGTERM) << "wait status " << check;
  const int fuzz = in_child([] {
    StopSignals on_signal(StopSignals::For::kFuzz);
    ::raise(SIGINT);
    ::usleep(600000);
    ::raise(SIGINT);
    if (g_stop_signals != 2) ::_exit(3);
    on_signal.one_more();  // the next is counted, the one after ends the process
    ::usleep(600000);
    ::raise(SIGINT);
    if (g_stop_signals != 3) ::_exit(3);
    ::usleep(600000);
    ::raise(SIGINT);
    ::_exit(4);
  });
  EXPECT_TRUE(WIFSIGNALED(fuzz) && WTERMSIG(fuzz) == SIGINT) << "wait status " << fuzz;
}

}  // namespace
}  // namespace attncheck::cli
