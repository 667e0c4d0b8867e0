// flash_model_bench.cpp — calls per second of model_forward (and model_backward) at fuzzing sizes.
// The fuzzer needs >= 2,000 model_forward calls/s for n <= 32, d <= 32 on one core. In a build with CUDA, the CPU
// twins of the CUDA kernels (kernels/cuda/cuda_twin.h: the tensor cores' sums emulated, mma_model.h) beside them,
// and one emulated k16 tensor-core step (mma_k16, kMeasuredMmaModel) on normal bf16 inputs.
// Run: build/kernels/cpu/flash_model_bench   (items_per_second = calls/s; exit status: kernels/bench_main.h)
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/bench_main.h"
#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/test_support.h"
#if defined(ATTNCHECK_HAVE_CUDA)
#include "kernels/cuda/cuda_twin.h"
#include "kernels/cuda/mma_model.h"
#endif

namespace attncheck {
namespace {

// One head of n queries and n keys, head dim d: the benchmark's arguments (n, d).
Instance square_instance(const benchmark::State& state, bool causal = false) {
  const int n = static_cast<int>(state.range(0)), d = static_cast<int>(state.range(1));
  return test::random_instance(test::make_problem(1, 1, 1, n, n, d, causal), 7);
}

void run_forward(benchmark::State& state, const char* spec_name, bool causal, int tile) {
  NumericsSpec spec = builtin_spec(spec_name);
  spec.tile_q = spec.tile_k = tile;
  const Instance in = square_instance(state, causal);
  for (auto _ : state) benchmark::DoNotOptimize(model_forward(spec, in));
  state.SetItemsProcessed(state.iterations());
}

void run_backward(benchmark::State& state, const char* spec_name) {
  const NumericsSpec spec = builtin_spec(spec_name);
  const Instance in = square_instance(state);
  const ForwardOutput fwd = model_forward(spec, in);
  for (auto _ : state) benchmark::DoNotOptimize(model_backward(spec, in, fwd));
  state.SetItemsProcessed(state.iterations());
}

// 150 x 64: the long suite's gqa entry per head (its `accurate` dominates --suite long); 256 x 128: a long fuzz input.
BENCHMARK_CAPTURE(run_forward, fa2, "fa2", false, 64)
    ->Args({32, 32})
    ->Args({16, 16})
    ->Args({150, 64})
    ->Args({256, 128});
BENCHMARK_CAPTURE(run_forward, paper, "paper", false, 64)->Args({32, 32})->Args({16, 16})->Args({150, 64});
BENCHMARK_CAPTURE(run_forward, paper_fixed, "paper-fixed", false, 64)->Args({32, 32});
BENCHMARK_CAPTURE(run_forward, paper_causal_tile8, "paper", true, 8)->Args({32, 32});
BENCHMARK_CAPTURE(run_forward, fa2_tile1, "fa2", false, 1)->Args({32, 32});
BENCHMARK_CAPTURE(run_backward, fa2, "fa2")->Args({32, 32})->Args({150, 64});
BENCHMARK_CAPTURE(run_backward, paper, "paper")->Args({32, 32})->Args({150, 64});

#if defined(ATTNCHECK_HAVE_CUDA)
void run_twin_forward(benchmark::State& state, cuda::Variant v) {
  const Instance in = square_instance(state);
  for (auto _ : state) benchmark::DoNotOptimize(cuda::twin_forward(v, in));
  state.SetItemsProcessed(state.iterations());
}

void run_twin_backward(benchmark::State& state, cuda::Variant v) {
  const Instance in = square_instance(state);
  const ForwardOutput fwd = cuda::twin_forward(v, in);
  for (auto _ : state) benchmark::DoNotOptimize(cuda::twin_backward(v, in, fwd));
  state.SetItemsProcessed(state.iterations());
}

// One k16 step per item: a chain over 1,024 random (a, b) rows of 16 normal bf16 values, c carried along.
void run_mma_k16(benchmark::State& state) {
  std::vector<float> a(1024 * 16), b(1024 * 16);
  const Instance in = test::random_instance(test::make_problem(1, 1, 1, 1024, 1024, 16, false), 7);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(in.q[i]), b[i] = static_cast<float>(in.k[i]);
  float c = 0.0f;
  for (auto _ : state) {
    for (int r = 0; r < 1024; ++r) c = mma_k16(&a[16 * r], &b[16 * r], c * 0x1p-4f);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
}

BENCHMARK_CAPTURE(run_twin_forward, fa2, cuda::Variant::kFa2)->Args({32, 32})->Args({150, 64});
BENCHMARK_CAPTURE(run_twin_forward, paper_fixed, cuda::Variant::kPaperFixed)->Args({32, 32})->Args({150, 64});
BENCHMARK_CAPTURE(run_twin_backward, fa2, cuda::Variant::kFa2)->Args({32, 32})->Args({150, 64});
BENCHMARK(run_mma_k16);
#endif

}  // namespace
}  // namespace attncheck

int main(int argc, char** argv) {
  if (!attncheck::bench::parse_flags(&argc, argv, "flash_model_bench")) return 2;
  return attncheck::bench::run_selected("flash_model_bench");
}
