// cuda_check.h — the one CUDA error-check helper of attncheck (style.md: "One CUDA error-check helper").
//
// ATTN_CUDA_CHECK(call) turns any cudaError_t other than cudaSuccess into attncheck::Error naming the call,
// the file and line, and CUDA's own message. Host code only. Kernel launches are checked with
// ATTN_CUDA_CHECK(cudaGetLastError()) right after the launch.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "harness/problem.h"

namespace attncheck {

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw Error(std::string("CUDA error in ") + what + " at " + file + ":" + std::to_string(line) + ": " +
              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Number of CUDA devices, 0 when the driver or device is missing (never throws: CI has nvcc but no GPU); `why`
// (optional) gets CUDA's reason for a 0.
inline int cuda_device_count(std::string* why = nullptr) {
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ", " + cudaGetErrorString(e);
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount: 0 devices";
  return n;
}

}  // namespace attncheck

#define ATTN_CUDA_CHECK(call) ::attncheck::cuda_check((call), #call, __FILE__, __LINE__)
