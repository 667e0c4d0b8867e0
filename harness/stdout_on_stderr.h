// stdout_on_stderr.h — while a StdoutOnStderr lives, file descriptor 1 is standard error; restore() (or the
// destructor) gives standard output back. The descriptor, not std::cout's buffer, so what C stdio and a plugin's own
// code print moves too. Used where standard output must carry one thing only: `check --json -` (the report) and a
// plugin's loading (its constructors, entry point and init print nothing into attncheck's output).
#pragma once

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
    saved_ = ::dup(1);  // fails when stdout is closed: nothing to move (a later write to it fails, and says so)
    if (saved_ >= 0 && ::dup2(2, 1) < 0) {
      ::close(saved_);
      saved_ = -1;
    }
  }
  void restore() {
    if (saved_ < 0) return;
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    saved_ = -1;
  }
  ~StdoutOnStderr() { restore(); }
  StdoutOnStderr(const StdoutOnStderr&) = delete;
  StdoutOnStderr& operator=(const StdoutOnStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace attncheck
