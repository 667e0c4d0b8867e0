// bench_forward_many.cpp — Google Benchmark: how many small attention instances per second a CUDA kernel runs
// through Kernel::forward_many, the path fuzzing and the property suites use on the GPU (issue #5's target:
// >= 50,000 instances/s for n <= 128, d <= 64 on an H200).
//
// What is timed: the whole call as a caller sees it — packing doubles to bf16 on the host (parallel), copies
// in and out, NaN-poisoning and checking the outputs, one batched launch per shape, unpacking to doubles.
// Inputs: one random instance (1 head, n_q = n_k = n, head dim d) repeated `count` times; the values do not
// change the work. Counter `instances_per_s` = count / time of one call.
// bm_host_pack and bm_host_unpack time forward_many's two host passes alone, with its parallel_for and the same
// per-instance work (host_packing.h): packing Q, K, V from doubles into bf16 staging, and unpacking O into fresh
// ForwardOutputs, their allocation and their release by the caller included. They need no GPU, so they also run
// where there is none, and say how much of forward_many's time the host's memory traffic takes.
// Without a CUDA device every bm_forward_many row is `ERROR OCCURRED: 'no usable CUDA device'` and the program exits 1
// (2 for a usage error; kernels/bench_main.h): a script must not read the host passes' rows as forward_many's.
// Run: build-gpu/kernels/cuda/bench_forward_many [--benchmark_filter=128/64]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/bench_main.h"
#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/host_packing.h"

namespace attncheck::cuda {
namespace {

void bm_forward_many(benchmark::State& state) {
  if (cuda_device_count() == 0) {
    bench::skip(state, "no usable CUDA device");
    return;
  }
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  const int count = static_cast<int>(state.range(2));
  auto k = make_cuda_kernel(static_cast<Variant>(state.range(3)));
  const Problem p = test::make_problem(1, 1, 1, n, n, d, false);
  const std::vector<Instance> ins(count, test::random_instance(p, 7000 + n));
  std::vector<const Instance*> ptrs;
  for (const Instance& in : ins) ptrs.push_back(&in);
  try {
    (void)k->forward_many(ptrs);  // warm-up: context, workspace allocation
    for (auto _ : state) benchmark::DoNotOptimize(k->forward_many(ptrs));
  } catch (const std::exception& e) {  // a CUDA error: this row is not measured, the program goes on and exits 1
    bench::skip(state, e.what());
    return;
  }
  state.counters["instances_per_s"] = benchmark::Counter(double(count), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(k->name()) + " n=" + std::to_string(n) + " d=" + std::to_string(d));
}

// The instances of bm_forward_many (count copies of one), as the host passes below see them.
std::vector<Instance> host_instances(const benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  return std::vector<Instance>(state.range(2), test::random_instance(test::make_problem(1, 1, 1, n, n, d, false), 7000 + n));
}

// forward_many's first host pass: Q, K, V of every instance to bf16 rows of the padded head dim.
void bm_host_pack(benchmark::State& state) {
  const std::vector<Instance> ins = host_instances(state);
  const Problem& p = ins[0].problem;
  const int d = p.head_dim, kd = padded_dim(d);
  const std::size_t q_per = p.rows() * kd, kv_per = std::size_t(p.batch) * p.heads_kv * p.n_k * kd;
  std::vector<std::uint16_t> hq(ins.size() * q_per), hk(ins.size() * kv_per), hv(ins.size() * kv_per);
  for (auto _ : state)
    parallel_for(ins.size(), [&](std::size_t g) {
      pack_rows(ins[g].q, d, kd, hq.data() + g * q_per, "bench", "Q");
      pack_rows(ins[g].k, d, kd, hk.data() + g * kv_per, "bench", "K");
      pack_rows(ins[g].v, d, kd, hv.data() + g * kv_per, "bench", "V");
    });
  state.counters["instances_per_s"] = benchmark::Counter(double(ins.size()), benchmark::Counter::kIsIterationInvariantRate);
}

// Its last host pass: O (bf16 rows, no poison) into fresh ForwardOutputs, which the caller then frees.
void bm_host_unpack(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  const std::size_t count = state.range(2), rows = n;
  const int kd = padded_dim(d);
  const std::vector<std::uint16_t> ho(count * rows * kd, 0x3f80);  // 1.0
  const std::vector<float> hl(count * rows, 0.5f);
  for (auto _ : state) {
    std::vector<ForwardOutput> out(count);
    std::vector<char> untouched(count, 0);
    parallel_for(count, [&](std::size_t g) {
      bool poisoned = false;
      unpack_rows(ho.data() + g * rows * kd, rows, d, kd, out[g].o, &poisoned);
      untouched[g] = poisoned;
      out[g].lse.assign(hl.begin() + g * rows, hl.begin() + (g + 1) * rows);
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["instances_per_s"] = benchmark::Counter(double(count), benchmark::Counter::kIsIterationInvariantRate);
}

void args(benchmark::internal::Benchmark* b) {
  for (int v : {int(Variant::kFa2), int(Variant::kPaperFixed)})
    for (int n : {16, 32, 64, 128})
      for (int d : {32, 64}) b->Args({n, d, n <= 32 ? 20000 : 5000, v});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}
BENCHMARK(bm_forward_many)->Apply(args);
void host_args(benchmark::internal::Benchmark* b) {
  for (int n : {16, 128}) b->Args({n, 64, n <= 32 ? 20000 : 5000});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}
BENCHMARK(bm_host_pack)->Apply(host_args);
BENCHMARK(bm_host_unpack)->Apply(host_args);

}  // namespace
}  // namespace attncheck::cuda

int main(int argc, char** argv) {
  if (!attncheck::bench::parse_flags(&argc, argv, "bench_forward_many")) return 2;
  if (std::string why; attncheck::cuda_device_count(&why) == 0)
    std::fprintf(stderr, "bench_forward_many: no usable CUDA device (%s): bm_forward_many measures nothing, the host passes run\n",
                 why.c_str());
  return attncheck::bench::run_selected("bench_forward_many");
}
