// isolated_call.h — run one call into an external kernel so that its crash or hang cannot take the harness
// down: in a forked child process (isolation on, the default) or in this process (isolation off, faster).
//
// Isolation works by fork(): the child shares nothing with the parent except memory mapped MAP_SHARED
// before the fork (GuardedArena maps its buffers that way), so every buffer the kernel must read or write
// has to live there. The child resets the fatal signals to their default action (so a SIGSEGV kills it
// with that signal, even under AddressSanitizer), runs the call, stores the status and the message in a
// shared control page and leaves with _exit (no atexit handlers, no stdio flush, no leak check). The
// parent waits on a pipe that closes when the child ends, at most `time_limit_s`, then SIGKILLs it.
//
// Caveat: fork() in a multi-threaded parent copies only the calling thread; a kernel that takes a lock
// another parent thread held at the fork would deadlock and be reported as a timeout. The harness calls
// kernels from one thread at a time here: `check -j` runs a plugin's check alone, no other check beside it
// (cmd_check.cpp, run_slot); its idle worker threads wait on a lock no kernel takes.
// Tested by plugin_loader_test (crash, hang, error, out-of-bounds plugins).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace attncheck {

struct CallLimits {
  bool isolate = true;        // fork a child per call; false = call in this process (no crash/hang safety)
  double time_limit_s = 10.0; // isolation only: a call running longer is killed and reported as kTimeout
};

// Runs fn(msg, msg_size) and returns its status (an attncheck_status), with the message it wrote in
// *message. Throws PluginFault (kCrash, kTimeout) naming `kernel` when the isolated call dies or hangs.
int run_plugin_call(const std::function<int(char* msg, std::size_t msg_size)>& fn, const CallLimits& limits,
                    const std::string& kernel, std::string* message);

}  // namespace attncheck
