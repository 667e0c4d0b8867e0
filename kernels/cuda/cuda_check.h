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

// Number of CUDA devices this build can run on, 0 when the driver or device is missing or when device 0 has no
// code in this build (never throws: CI has nvcc but no GPU); `why` (optional) gets the reason for a 0. The first
// call decides (device_check.cu); later calls return its answer.
int cuda_device_count(std::string* why = nullptr);

}  // namespace attncheck

#define ATTN_CUDA_CHECK(call) ::attncheck::cuda_check((call), #call, __FILE__, __LINE__)
