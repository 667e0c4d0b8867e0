// plugin_fault.h — what goes wrong inside an external kernel, as an exception the harness can record.
//
// A PluginFault is a finding about the kernel under test (it crashed, hung, returned an error, or wrote
// outside its outputs), not a problem with attncheck's input. It derives from attncheck::Error so that code
// which only knows Error still reports it and never dies; property code that wants to record it as a
// failure (rather than as "unsupported, skip") catches PluginFault first:
//
//     try { out = kernel.forward(in); }
//     catch (const PluginFault& f) { outcome.status = Status::kFail; outcome.message = f.what(); }
//     catch (const Error& e)       { outcome.status = Status::kSkip; ... }
//
// A kernel that declines a problem (ATTNCHECK_ERR_UNSUPPORTED) throws a plain Error, never a PluginFault.
#pragma once

#include <string>

#include "harness/problem.h"

namespace attncheck {

enum class FaultKind {
  kCrash,        // the call died: a signal (SIGSEGV, SIGABRT, ...) or the child exited without finishing
  kTimeout,      // the call ran past the per-call time limit and was killed
  kError,        // the kernel returned an error status (INVALID, INTERNAL, DEVICE, NO_MEMORY or unknown)
  kOutOfBounds,  // the kernel wrote outside its outputs: a guard margin, row padding, or an input changed
};

const char* fault_kind_name(FaultKind k);  // "crash", "timeout", "error", "out_of_bounds"

class PluginFault : public KernelFault {
 public:
  PluginFault(FaultKind kind, const std::string& kernel, const std::string& detail)
      : KernelFault(kernel + ": " + fault_kind_name(kind) + ": " + detail), kind_(kind), kernel_(kernel), detail_(detail) {}
  FaultKind kind() const { return kind_; }
  const std::string& kernel() const { return kernel_; }
  const std::string& detail() const { return detail_; }

 private:
  FaultKind kind_;
  std::string kernel_;
  std::string detail_;
};

}  // namespace attncheck
