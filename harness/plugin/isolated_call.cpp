// isolated_call.cpp — fork/wait/kill for one plugin call; see isolated_call.h for the protocol.
#include "harness/plugin/isolated_call.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "harness/plugin/plugin_fault.h"
#include "harness/signal_util.h"

namespace attncheck {
namespace {

constexpr std::size_t kMessageBytes = 1024;
constexpr int kChildDone = 0x600d;  // the child sets this after the call returned, before _exit

struct ControlPage {
  volatile int done;
  int status;
  char message[kMessageBytes];
};

// The plugin's message as text: control bytes and bytes that are not UTF-8 as \xNN (it reaches the terminal and
// the case files).
std::string terminated(const char* buf) { return printable(std::string(buf, strnlen(buf, kMessageBytes - 1))); }

// Owns the shared control page.
struct SharedControl {
  ControlPage* page = nullptr;
  SharedControl() {
    void* p = mmap(nullptr, sizeof(ControlPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error(std::string("plugin call: mmap of the control page failed: ") + strerror(errno));
    page = static_cast<ControlPage*>(p);
    std::memset(page, 0, sizeof *page);
  }
  ~SharedControl() { munmap(page, sizeof(ControlPage)); }
  SharedControl(const SharedControl&) = delete;
  SharedControl& operator=(const SharedControl&) = delete;
};

[[noreturn]] void child_main(const std::function<int(char*, std::size_t)>& fn, ControlPage* page, int pipe_write,
                            const sigset_t& mask) {
  // Die with the real signal, not through the parent's (or a sanitizer's) handler.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) signal(sig, SIG_DFL);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a harness killed mid-call takes its child along
  // Ctrl-C reaches the whole foreground process group, this child too: killed by it, the call read as the plugin
  // crashing ("killed by SIGINT"), saved as a finding. Stopping is the harness's business (it finishes or abandons
  // the check, stop_signals.h); the time limit and PDEATHSIG still end a child that does not return.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  sigprocmask(SIG_SETMASK, &mask, nullptr);  // blocked across fork (run_plugin_call); a pending one is now ignored
  int status = 3;                    // ATTNCHECK_ERR_INTERNAL if fn throws (it is C; it should not)
  try {
    status = fn(page->message, kMessageBytes);
  } catch (...) {
    std::strncpy(page->message, "C++ exception escaped the plugin call", kMessageBytes - 1);
  }
  page->status = status;
  page->done = kChildDone;
  close(pipe_write);
  _exit(0);
}

std::string describe_wait_status(int ws) {
  if (WIFSIGNALED(ws)) {
    const int sig = WTERMSIG(ws);
    const std::string name = signal_abbrev(sig);
    return "killed by " + (name.empty() ? "SIG" + std::to_string(sig) : name) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(ws))  // e.g. a sanitizer in the plugin reported an error (its report went to stderr) and exited
    return "exited with status " + std::to_string(WEXITSTATUS(ws)) + " before the call returned (see stderr)";
  return "ended abnormally (wait status " + std::to_string(ws) + ")";
}

}  // namespace

int run_plugin_call(const std::function<int(char*, std::size_t)>& fn, const CallLimits& limits,
                    const std::string& kernel, std::string* message) {
  if (!limits.isolate) {
    char buf[kMessageBytes] = {};
    const int status = fn(buf, kMessageBytes);
    if (message) *message = terminated(buf);
    return status;
  }

  SharedControl control;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("plugin call: pipe failed: ") + strerror(errno));
  // SIGINT and SIGTERM wait until the child ignores them (child_main): one arriving between fork and that ran the
  // harness's handler in the child (`check` said "interrupted" twice). In the parent they arrive after the fork.
  StopSignalsBlocked blocked;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_main(fn, control.page, fds[1], blocked.before());
  }
  blocked.restore();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw Error(std::string("plugin call: fork failed: ") + strerror(errno));
  }
  close(fds[1]);

  // Wait until the pipe closes (the child ended) or the time limit passes.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(limits.time_limit_s);
  bool timed_out = false;
  for (;;) {
    // Rounded up: poll must not return before the deadline (a truncated wait would end the limit early).
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    if (stop_requested()) break;  // Ctrl-C in `check`: the call is abandoned (below), not waited for
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // loop re-checks the deadline
    char c;
    if (r > 0 && read(fds[0], &c, 1) <= 0) break;  // EOF: the write end closed
  }
  close(fds[0]);
  const bool abandoned = !timed_out && stop_requested();
  if (timed_out || abandoned) kill(pid, SIGKILL);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (abandoned && control.page->done != kChildDone)  // no verdict on the kernel: it was stopped, not faulty
    throw Interrupted("plugin call to " + kernel + " stopped on request");
  if (timed_out && control.page->done != kChildDone) {
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g", limits.time_limit_s);
    throw PluginFault(FaultKind::kTimeout, kernel, std::string("no return within the time limit of ") + limit +
                                                       " s (set ATTNCHECK_PLUGIN_TIMEOUT to change it); killed");
  }
  if (control.page->done != kChildDone) throw PluginFault(FaultKind::kCrash, kernel, describe_wait_status(ws));
  if (message) *message = terminated(control.page->message);
  return control.page->status;
}

}  // namespace attncheck
