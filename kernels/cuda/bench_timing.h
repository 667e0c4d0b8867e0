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

// Times `once` (one launch, asynchronous) as described above; returns the best seconds per launch.
template <class Fn>
double time_launches(benchmark::State& state, Fn once) {
  once(), once();  // warm-up
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  ATTN_CUDA_CHECK(cudaEventCreate(&e0));
  ATTN_CUDA_CHECK(cudaEventCreate(&e1));
  double best_s = 1e30;
  for (auto _ : state) {
    ATTN_CUDA_CHECK(cudaEventRecord(e0));
    for (int r = 0; r < kBenchReps; ++r) once();
    ATTN_CUDA_CHECK(cudaEventRecord(e1));
    ATTN_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double s = ms / 1e3 / kBenchReps;
    best_s = std::min(best_s, s);
    state.SetIterationTime(s);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best_s;
}

}  // namespace attncheck::cuda
