// bench_cudnn_sdpa.cpp — cuDNN's fused SDPA (cudnn_sdpa.h, backend graph API) as the vendor anchor inside the
// bench_attention program: the same shapes, inputs, timing and FLOP counting as bench_attention.cu.
//
// Shapes: batch = 16384 / seq, heads = 2048 / d (so every config has 16384·2048 elements per tensor), bf16
// N(0, 1) inputs (generated once on the host, Box–Muller from formats.h's uniform01, uploaded once). Timing: CUDA
// events around kBenchReps calls (bench_timing.h) after two warm-ups (which also build and cache the plan); best of the iterations.
// FLOPs as FlashAttention counts them: forward 4·b·h·n²·d, halved when causal; backward 2.5× the forward.
// The backward is timed from the forward's own O and stats and includes the memset of cuDNN's fp32 dQ
// accumulator (0.2% at seq 4096). Names: fwd|bwd/cudnn/d<d>/full|causal/seq<n>, counter TFLOPs; a table of
// the cuDNN numbers is printed when the program exits.
// Run: build-gpu-cudnn/kernels/cuda/bench_attention --benchmark_filter='cudnn/.*/seq4096'
#if defined(ATTNCHECK_HAVE_CUDNN)
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/bench_main.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/cuda/bench_timing.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/formats.h"

namespace attncheck::cuda {
namespace {

constexpr std::size_t kElements = std::size_t(16384) * 2048;  // b·h·seq·d of every config

// Q, K, V, dO: N(0, 1) rounded to bf16, made once.
struct Inputs {
  DeviceBuffer<std::uint16_t> q{kElements}, k{kElements}, v{kElements}, d_o{kElements};
  Inputs() {
    std::vector<std::uint16_t> h(kElements);
    DeviceBuffer<std::uint16_t>* bufs[] = {&q, &k, &v, &d_o};
    for (int t = 0; t < 4; ++t) {
      for (std::size_t i = 0; i < kElements; i += 2) {
        const std::uint64_t seed = 0x5eed0000u + t;
        const double u1 = uniform01(seed, i) + 0x1.0p-54, u2 = uniform01(seed, i + 1);
        const double r = std::sqrt(-2.0 * std::log(u1));
        const float z0 = round_bf16(float(r * std::cos(2 * M_PI * u2)));
        const float z1 = round_bf16(float(r * std::sin(2 * M_PI * u2)));
        h[i] = std::uint16_t(float_to_bits(z0) >> 16), h[i + 1] = std::uint16_t(float_to_bits(z1) >> 16);
      }
      bufs[t]->upload(h);
    }
  }
};

// Never destroyed: the summary below reads it after main returns, from a destructor that may run after the
// destructors of function-local statics constructed later (a destroyed map there hung the program on exit).
std::map<std::string, double>& results() {  // row -> TFLOP/s
  static auto* r = new std::map<std::string, double>;
  return *r;
}

void run(benchmark::State& state, bool backward, int d, int seq, bool causal) {
  std::string why;
  if (cuda_device_count() == 0 || !cudnn::available(&why)) {
    bench::skip(state, "cuDNN unavailable: " + why);  // a row not measured: the program exits 1
    return;
  }
  static Inputs& in = *new Inputs;  // made once, kept to the end (no device frees during exit)
  const int b = 16384 / seq, h = 2048 / d;
  cudnn::SdpaShape s;
  s.batch = b, s.heads_q = h, s.heads_kv = h, s.n_q = seq, s.n_k = seq, s.head_dim = d, s.causal = causal;
  s.scale = 1.0f / std::sqrt(float(d));
  DeviceBuffer<std::uint16_t> o(kElements), dq(kElements), dk(kElements), dv(kElements);
  DeviceBuffer<float> stats(std::size_t(b) * h * seq), delta(std::size_t(b) * h * seq);
  try {
    cudnn::sdpa_forward(s, in.q.get(), in.k.get(), in.v.get(), nullptr, o.get(), stats.get(), nullptr);  // O, stats
    auto once = [&] {
      if (backward)
        cudnn::sdpa_backward(s, in.q.get(), in.k.get(), in.v.get(), nullptr, o.get(), in.d_o.get(), stats.get(),
                             dq.get(), dk.get(), dv.get(), delta.get(), nullptr);
      else
        cudnn::sdpa_forward(s, in.q.get(), in.k.get(), in.v.get(), nullptr, o.get(), stats.get(), nullptr);
    };
    const double flops = attention_flops(b, h, seq, seq, d, causal, backward);
    const double best_s = time_launches(state, once);  // the first warm-up call builds the plan
    state.counters["TFLOPs"] = flops / best_s / 1e12;  // best of the iterations, in TFLOP/s
    results()[std::string(backward ? "bwd" : "fwd") + " d" + std::to_string(d) + (causal ? " causal " : " full   ") +
              "seq" + std::to_string(seq)] = flops / best_s / 1e12;
  } catch (const std::exception& e) {
    bench::skip(state, e.what());
  }
}

struct Summary {  // printed after main returns (bench_attention's main prints its own table first)
  ~Summary() {
    if (results().empty()) return;
    std::printf("\n%-28s %9s   (cuDNN %ld, backend graph API)\n", "config (TFLOP/s)", "cudnn", cudnn::version());
    for (const auto& [row, tflops] : results()) std::printf("%-28s %9.1f\n", row.c_str(), tflops);
  }
};
Summary g_summary;

const bool g_registered = [] {
  for (bool bwd : {false, true})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int seq : {1024, 2048, 4096, 8192, 16384}) {
          const std::string name = std::string(bwd ? "bwd/" : "fwd/") + "cudnn/d" + std::to_string(d) +
                                   (causal ? "/causal" : "/full") + "/seq" + std::to_string(seq);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run(st, bwd, d, seq, causal); })
              ->UseManualTime()
              ->Iterations(5)
              ->Unit(benchmark::kMillisecond);
        }
  return true;
}();

}  // namespace
}  // namespace attncheck::cuda
#endif  // ATTNCHECK_HAVE_CUDNN
