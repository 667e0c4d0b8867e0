// stop_signals.cpp — see stop_signals.h.
#include "harness/cli/stop_signals.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "properties/property.h"

namespace attncheck::cli {

std::atomic<int> g_stop_signals{0};
std::atomic<int> g_last_stop_signal{0};

extern "C" void count_stop_signal(int sig) {
  g_last_stop_signal = sig;  // before the count: a thread that sees the count sees the signal's number
  ++g_stop_signals;
}

namespace {
// What `check` says at the first signal, written from the handler (write(2) is async-signal-safe; the text is fixed
// before the handler is installed). "\r\033[K" clears a progress line on a terminal first.
char g_check_stop_message[256];
std::size_t g_check_stop_message_size = 0;
// The dispositions before `check` installed its handler, which puts both back at the first signal (sigaction is
// async-signal-safe): the next SIGINT or SIGTERM, either one, then ends attncheck at once.
struct sigaction g_check_old_int {}, g_check_old_term {};

extern "C" void stop_check(int sig) {
  ::sigaction(SIGINT, &g_check_old_int, nullptr);
  ::sigaction(SIGTERM, &g_check_old_term, nullptr);
  count_stop_signal(sig);
  request_stop();
  (void)!::write(2, g_check_stop_message, g_check_stop_message_size);
}
}  // namespace

StopSignals::StopSignals(For what) {
  ::sigaction(SIGINT, nullptr, &old_int_);
  ::sigaction(SIGTERM, nullptr, &old_term_);
  g_stop_signals = 0;
  g_last_stop_signal = 0;
  if (what == For::kFuzz) {
    install(count_stop_signal, SA_RESTART);
    return;
  }
  clear_stop_request();
  const int n = std::snprintf(g_check_stop_message, sizeof g_check_stop_message, "%s%s", ::isatty(2) ? "\r\033[K" : "\n",
                              "attncheck: interrupted: stopping at the check in progress (a failure it found is saved, "
                              "shrunk no further); the summary and reports follow, marked interrupted. Interrupt "
                              "again to stop at once.\n");
  g_check_stop_message_size = std::min<std::size_t>(n, sizeof g_check_stop_message - 1);
  g_check_old_int = old_int_;
  g_check_old_term = old_term_;
  install(stop_check, SA_RESTART);
}

void StopSignals::one_more() {
  if (!restored_) install(count_stop_signal, SA_RESTART | SA_RESETHAND);
}

void StopSignals::restore() {
  if (restored_) return;
  restored_ = true;
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

void StopSignals::install(void (*handler)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  ::sigemptyset(&sa.sa_mask);
  if (old_int_.sa_handler != SIG_IGN) ::sigaction(SIGINT, &sa, nullptr);
  if (old_term_.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace attncheck::cli
