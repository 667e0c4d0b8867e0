// stdout_on_stderr.h — while a StdoutOnStderr lives, file descriptor 1 is standard error; restore() (or the
// destructor) gives standard output back. The descriptor, not std::cout's buffer, so what C stdio and a plugin's own
// code print moves too. Used where standard output must carry one thing only: `check --json -` (the report) and a
// plugin's loading (its constructors, entry point and init print nothing into attncheck's output).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace attncheck {

class StdoutOnStderr {
 public:
  explicit StdoutOnStderr(bool active = true) {
    if (!active) return;
    std::cout.flush();
    std::fflush(stdout);
    // Above 2 and close-on-exec: a closed stderr must not receive the copy (dup took fd 2, and fd 1 stayed on stdout),
    // and spawned processes must not hold the real stdout open. Fails when stdout is closed: nothing to move.
    saved_ = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (saved_ < 0) return;
    // A closed stderr: what would have gone there goes nowhere rather than into the report.
    const int to = ::fcntl(2, F_GETFD) >= 0 ? 2 : ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (to < 0 || ::dup2(to, 1) < 0) {
      ::close(saved_);
      saved_ = -1;
    }
    if (to > 2) ::close(to);
  }
  void restore() {
    if (saved_ < 0) return;
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    saved_ = -1;
    // A failed write to the stand-in (a full stderr) is not a failure of standard output, which starts clean.
    std::cout.clear();
    std::clearerr(stdout);
  }
  ~StdoutOnStderr() { restore(); }
  StdoutOnStderr(const StdoutOnStderr&) = delete;
  StdoutOnStderr& operator=(const StdoutOnStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace attncheck
