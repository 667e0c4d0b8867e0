// plugin_fault.cpp — names of the kinds of fault an external kernel can have.
#include "harness/plugin/plugin_fault.h"

namespace attncheck {

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kCrash: return "crash";
    case FaultKind::kTimeout: return "timeout";
    case FaultKind::kError: return "error";
    case FaultKind::kOutOfBounds: return "out_of_bounds";
  }
  return "unknown";
}

}  // namespace attncheck
