// stop_signals.cpp — see stop_signals.h.
#include "harness/cli/stop_signals.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "properties/property.h"

namespace attncheck::cli {

std::atomic<int> g_stop_signals{0};
std::atomic<int> g_last_stop_signal{0};

namespace {
// One request delivered twice: GNU timeout (a CI job's time limit) sends its signal to attncheck and then to attncheck's
// process group, so two arrive microseconds apart; the second, read as "again: stop at once", ended `check` with no
// summary and no report (a UX review, session 34: 2 runs in 30 under `timeout 1.2`). A signal within kSameRequestNs
// of the last one counted is that one again; a person's second Ctrl-C comes later. clock_gettime is async-signal-safe.
constexpr long long kSameRequestNs = 500'000'000;
std::atomic<long long> g_last_signal_ns{0};
static_assert(std::atomic<long long>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

bool same_request_again() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const long long ns = now.tv_sec * 1'000'000'000LL + now.tv_nsec;
  long long last = g_last_signal_ns;
  do {  // one compare-and-swap: two handlers at once (check -j's threads) must not both take theirs for the first
    if (last != 0 && ns - last < kSameRequestNs) return true;
  } while (!g_last_signal_ns.compare_exchange_weak(last, ns));
  return false;
}

// The dispositions before StopSignals installed its handler. A handler that has had its signal puts both back at the
// next one and raises it again (sigaction and raise are async-signal-safe; the signal is blocked in its handler, so it
// is delivered, with the old disposition, as the handler returns): attncheck then ends as it would have.
struct sigaction g_old_int {}, g_old_term {};
std::atomic<bool> g_end_at_next{false};  // one_more()'s handler and check's: the next signal ends attncheck

void end_as_before(int sig) {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::raise(sig);
}
}  // namespace

extern "C" void count_stop_signal(int sig) {
  if (same_request_again()) return;
  g_last_stop_signal = sig;  // before the count: a thread that sees the count sees the signal's number
  ++g_stop_signals;
}

namespace {
// What `check` says at the first signal, written from the handler (write(2) is async-signal-safe; the text is fixed
// before the handler is installed). "\r\033[K" clears a progress line on a terminal first.
char g_check_stop_message[256];
std::size_t g_check_stop_message_size = 0;

// Counts the first signal (true) and ends attncheck at the next SIGINT or SIGTERM, either one; a repeat is neither.
bool count_then_end_at_next(int sig) {
  if (same_request_again()) return false;
  if (g_end_at_next.exchange(true)) {
    end_as_before(sig);
    return false;
  }
  g_last_stop_signal = sig;
  ++g_stop_signals;
  return true;
}

extern "C" void stop_check(int sig) {
  if (!count_then_end_at_next(sig)) return;
  request_stop();
  (void)!::write(2, g_check_stop_message, g_check_stop_message_size);
}

extern "C" void count_then_end(int sig) { count_then_end_at_next(sig); }  // one_more()
}  // namespace

StopSignals::StopSignals(For what) {
  ::sigaction(SIGINT, nullptr, &old_int_);
  ::sigaction(SIGTERM, nullptr, &old_term_);
  g_stop_signals = 0;
  g_last_stop_signal = 0;
  g_last_signal_ns = 0;
  g_end_at_next = false;
  g_old_int = old_int_;
  g_old_term = old_term_;
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
  install(stop_check, SA_RESTART);
}

void StopSignals::one_more() {
  if (restored_) return;
  g_end_at_next = false;
  install(count_then_end, SA_RESTART);
}

void StopSignals::end_at_next() {
  if (!restored_) g_end_at_next = true;
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
  ::sigemptyset(&sa.sa_mask);  // each blocks the other while it runs (a SIGTERM inside the SIGINT handler)
  ::sigaddset(&sa.sa_mask, SIGINT);
  ::sigaddset(&sa.sa_mask, SIGTERM);
  if (old_int_.sa_handler != SIG_IGN) ::sigaction(SIGINT, &sa, nullptr);
  if (old_term_.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace attncheck::cli
