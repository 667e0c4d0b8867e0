// bench_timing.h — the one timing loop and FLOP count of the attention benchmarks (bench_attention.cu and
// bench_cudnn_sdpa.cpp share it, so our kernels and the cuDNN anchor are timed the same way by construction).
//
// Timing: two warm-up calls (the first may build a plan), then per benchmark iteration CUDA events around
// kReps back-to-back launches on the default stream; the manual iteration time is their mean; the reported
// TFLOP/s use the best iteration. FLOPs: attention_flops (bench_flops.h).
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/bench_flops.h"
#include "kernels/cuda/cuda_check.h"

namespace attncheck::cuda {

constexpr int kBenchReps = 10;

// Two CUDA events: the seconds per launch of kBenchReps back-to-back launches of `once` on the default stream.
class LaunchTimer {
 public:
  LaunchTimer() {
    ATTN_CUDA_CHECK(cudaEventCreate(&e0_));
    ATTN_CUDA_CHECK(cudaEventCreate(&e1_));
  }
  ~LaunchTimer() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
  }
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;
  template <class Fn>
  double seconds(Fn once) {
    ATTN_CUDA_CHECK(cudaEventRecord(e0_));
    for (int r = 0; r < kBenchReps; ++r) once();
    ATTN_CUDA_CHECK(cudaEventRecord(e1_));
    ATTN_CUDA_CHECK(cudaEventSynchronize(e1_));
    float ms = 0;
    ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0_, e1_));
    return ms / 1e3 / kBenchReps;
  }

 private:
  cudaEvent_t e0_{}, e1_{};
};

// Times `once` (one launch, asynchronous) as described above; returns the best seconds per launch.
template <class Fn>
double time_launches(benchmark::State& state, Fn once) {
  once(), once();  // warm-up
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  LaunchTimer timer;
  double best_s = 1e30;
  for (auto _ : state) {
    const double s = timer.seconds(once);
    best_s = std::min(best_s, s);
    state.SetIterationTime(s);
  }
  return best_s;
}

}  // namespace attncheck::cuda
