// bench_forward_many.cpp — Google Benchmark: how many small attention instances per second a CUDA kernel runs
// through Kernel::forward_many, the path fuzzing and the property suites use on the GPU (issue #5's target:
// >= 50,000 instances/s for n <= 128, d <= 64 on an H200).
//
// What is timed: the whole call as a caller sees it — packing doubles to bf16 on the host (parallel), copies
// in and out, NaN-poisoning and checking the outputs, one batched launch per shape, unpacking to doubles.
// Inputs: one random instance (1 head, n_q = n_k = n, head dim d) repeated `count` times; the values do not
// change the work. Counter `instances_per_s` = count / time of one call.
// Run: build-gpu/kernels/cuda/bench_forward_many [--benchmark_filter=n128]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace attncheck::cuda {
namespace {

void bm_forward_many(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  const int count = static_cast<int>(state.range(2));
  auto k = make_cuda_kernel(static_cast<Variant>(state.range(3)));
  const Problem p = test::make_problem(1, 1, 1, n, n, d, false);
  const std::vector<Instance> ins(count, test::random_instance(p, 7000 + n));
  std::vector<const Instance*> ptrs;
  for (const Instance& in : ins) ptrs.push_back(&in);
  (void)k->forward_many(ptrs);  // warm-up: context, workspace allocation
  for (auto _ : state) benchmark::DoNotOptimize(k->forward_many(ptrs));
  state.counters["instances_per_s"] = benchmark::Counter(double(count), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(k->name()) + " n=" + std::to_string(n) + " d=" + std::to_string(d));
}

void args(benchmark::internal::Benchmark* b) {
  for (int v : {int(Variant::kFa2), int(Variant::kPaperFixed)})
    for (int n : {16, 32, 64, 128})
      for (int d : {32, 64}) b->Args({n, d, n <= 32 ? 20000 : 5000, v});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}
BENCHMARK(bm_forward_many)->Apply(args);

}  // namespace
}  // namespace attncheck::cuda

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (attncheck::cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_forward_many: no CUDA device\n");
    return 0;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
