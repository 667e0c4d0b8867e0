// signal_util.cpp — SIGINT/SIGTERM blocked across a fork, and a signal's "SIG" name (see signal_util.h).
#include "harness/signal_util.h"

#include <cstring>

namespace attncheck {

StopSignalsBlocked::StopSignalsBlocked() {
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_set, &before_);
}

void StopSignalsBlocked::restore() {
  if (restored_) return;
  restored_ = true;
  sigprocmask(SIG_SETMASK, &before_, nullptr);
}

std::string signal_abbrev(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : std::string();
}

}  // namespace attncheck
