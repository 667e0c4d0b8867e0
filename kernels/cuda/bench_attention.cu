// bench_attention.cu — Google Benchmark program: CUDA flash attention forward and backward, baseline vs fixed
// max policy, for both numerics (fa2, paper), seq 1k–16k, head dim 64/128, causal and not.
//
// Shapes follow FlashAttention's benchmark: batch = 16384 / seq, heads = 2048 / d (16k tokens of a 2048-wide
// model fill the GPU). Inputs ~ N(0, 1) in bf16, made on the device. Timing (bench_timing.h): CUDA events around kBenchReps launches
// after two warm-up launches; the manual time per iteration is the mean launch time. FLOPs counted as
// FlashAttention does: forward 4·b·h·n_q·n_k·d (halved when causal), backward 2.5× forward. Counter TFLOPs.
// step/...: one training step's attention, the variant's forward then its backward (3.5× the forward's FLOPs), at
// seq 4096: the fix is forward-only (the backward kernel is shared), so this is what it costs where the paper's
// failure happens, in training; fwd/... is what it costs an inference forward.
// After the run a table with the fix overhead ((fixed − base) / base, in %) is printed, and a second one from the
// ovh/... benchmarks: the overhead measured in pairs (base and fixed timed back to back, 15 iterations; run_paired), the
// number to quote for the fix's cost (the first table's overhead joins two benchmarks run seconds apart).
// With ATTNCHECK_BENCH_TILINGS=1, fwdtile/<tiling>/... also runs the forward with the other work splits of
// FwdTiling (same numerics, bit for bit) on seq 4096, to compare them with the default one (off by default: the
// full run already takes minutes).
// A variant the filter did not select prints '-' in the table, and so does its overhead.
// Exit status (kernels/bench_main.h): 0 every selected benchmark measured; 1 without a CUDA device (said on
// standard error, nothing run) or when one could not run (cuDNN missing, a CUDA error); 2 a usage error.
// Run: build-e/kernels/cuda/bench_attention [--benchmark_filter=fwd/.*/d128/.*seq4096]
//      (ci/gpu.sh runs it; the cuDNN rows come from bench_cudnn_sdpa.cpp in the same program)
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kernels/bench_main.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/bench_timing.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/flash_fwd.h"

namespace attncheck::cuda {
namespace {


std::string tiling_name(FwdTiling t) {
  switch (t) {
    case FwdTiling::kDefault: return "default";
    case FwdTiling::kWarp16Q4: return "w16q4";
    case FwdTiling::kWarp16Q8: return "w16q8";
    case FwdTiling::kWarp32Smem: return "w32smem";
    case FwdTiling::kWarp32Regs: return "w32regs";
    case FwdTiling::kWgmma64: return "wgmma64";
    case FwdTiling::kWgmma128: return "wgmma128";
    case FwdTiling::kWgmma192: return "wgmma192";
  }
  return "?";
}

__global__ void fill_normal_bf16(std::uint16_t* x, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const double u1 = (double(mix64(seed ^ mix64(2 * i)) >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = double(mix64(seed ^ mix64(2 * i + 1)) >> 11) * 0x1.0p-53;
    const float z = float(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
    x[i] = std::uint16_t(__float_as_uint(round_bf16(z)) >> 16);
  }
}

enum class Pass { kFwd, kBwd, kStep };  // kStep: the forward, then the backward

const char* pass_name(Pass p) { return p == Pass::kFwd ? "fwd" : p == Pass::kBwd ? "bwd" : "step"; }

struct Config {
  Pass pass;
  Variant variant;
  int d, seq;
  bool causal;
  FwdTiling tiling = FwdTiling::kDefault;
  std::string key() const {  // the row of the summary table
    return std::string(pass_name(pass)) + " d" + std::to_string(d) + (causal ? " causal " : " full   ") +
           "seq" + std::to_string(seq) + (tiling == FwdTiling::kDefault ? "" : " " + tiling_name(tiling));
  }
};

std::map<std::string, std::map<std::string, double>> g_tflops;  // row -> variant -> TFLOP/s

// One configuration's device buffers (inputs ~ N(0, 1) in bf16) and launch parameters; O and LSE are the base
// variant's forward, for the backward.
struct Workload {
  int b, h;
  std::size_t n;
  DeviceBuffer<std::uint16_t> q, k, v, o, d_o, dq, dk, dv;
  DeviceBuffer<float> lse, delta;
  FwdParams f;
  BwdParams g;
  explicit Workload(const Config& c)
      : b(16384 / c.seq), h(2048 / c.d), n(std::size_t(b) * h * c.seq * c.d), q(n), k(n), v(n), o(n), d_o(n), dq(n),
        dk(n), dv(n), lse(std::size_t(b) * h * c.seq), delta(std::size_t(b) * h * c.seq) {
    fill_normal_bf16<<<1024, 256>>>(q.get(), n, 1);
    fill_normal_bf16<<<1024, 256>>>(k.get(), n, 2);
    fill_normal_bf16<<<1024, 256>>>(v.get(), n, 3);
    fill_normal_bf16<<<1024, 256>>>(d_o.get(), n, 4);
    ATTN_CUDA_CHECK(cudaGetLastError());
    f.q = q.get(), f.k = k.get(), f.v = v.get(), f.o = o.get(), f.lse = lse.get();
    f.batch = b, f.heads_q = h, f.heads_kv = h, f.n_q = c.seq, f.n_k = c.seq, f.causal = c.causal;
    f.scale = 1.0f / std::sqrt(float(c.d));
    f.scale_log2e = float(double(f.scale) * 1.4426950408889634);
    g.q = q.get(), g.k = k.get(), g.v = v.get(), g.o = o.get(), g.d_o = d_o.get(), g.lse = lse.get();
    g.delta = delta.get(), g.dq = dq.get(), g.dk = dk.get(), g.dv = dv.get();  // no GQA: no per-head dK, dV workspace
    g.batch = b, g.heads_q = h, g.heads_kv = h, g.n_q = c.seq, g.n_k = c.seq, g.causal = c.causal;
    g.scale = f.scale, g.scale_log2e = f.scale_log2e;
    launch_flash_fwd(c.variant, c.d, f, nullptr);  // O and LSE for the backward
  }
  // One launch of the configuration's pass(es) with `variant`'s numerics.
  void launch(const Config& c, Variant variant) {
    if (c.pass != Pass::kBwd) launch_flash_fwd(variant, c.d, f, nullptr, c.tiling);
    if (c.pass != Pass::kFwd) launch_flash_bwd(variant, c.d, g, nullptr);
  }
};

void run_config(benchmark::State& state, Config c) {
  Workload w(c);
  // The step's FLOPs are its two passes' (bench_timing.h counts each as FlashAttention does).
  const double flops = (c.pass != Pass::kBwd ? attention_flops(w.b, w.h, c.seq, c.seq, c.d, c.causal, false) : 0.0) +
                       (c.pass != Pass::kFwd ? attention_flops(w.b, w.h, c.seq, c.seq, c.d, c.causal, true) : 0.0);
  const double best_s = time_launches(state, [&] { w.launch(c, c.variant); });
  state.counters["TFLOPs"] = flops / best_s / 1e12;  // best of the iterations, in TFLOP/s
  g_tflops[c.key()][variant_name(c.variant)] = flops / best_s / 1e12;
}

// ovh/...: the fix's overhead measured in pairs. The fwd/ and step/ rows time base and fixed in two benchmarks run
// seconds apart, and the card's clock drifts between them: over sessions 28-34 one H100's step overhead read 1.2% to
// 5.8% while fa2's own step rate moved 3% between readings. Here each iteration times base, fixed, fixed, base back to
// back (kBenchReps launches each: the order is balanced within the iteration, so running first or second, warmer or
// cooler, cancels to first order), and its ratio is (fixed + fixed) / (base + base); the overhead is the median over
// the iterations (and over --benchmark_repetitions) of ratio - 1, given with its quartiles.
std::map<std::string, std::map<std::string, std::vector<double>>> g_paired;  // row -> base variant -> ratios

// c.variant names the pair: kFa2 (fa2 -> fa2-fixed), kPaper (paper -> paper-fixed) or kFa2Psum (fa2 -> fa2-psum,
// another fix: kernels/cpu/README.md).
void run_paired(benchmark::State& state, Config c) {
  Workload w(c);
  const Variant base = c.variant == Variant::kFa2Psum ? Variant::kFa2 : c.variant;
  const Variant fixed = c.variant == Variant::kFa2Psum ? Variant::kFa2Psum
                        : base == Variant::kFa2        ? Variant::kFa2Fixed
                                                       : Variant::kPaperFixed;
  for (Variant v : {base, fixed, base, fixed}) w.launch(c, v);  // warm-up
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  LaunchTimer timer;
  std::vector<double>& ratios = g_paired[c.key()][variant_name(c.variant)];
  for (auto _ : state) {
    double t_base = 0, t_fixed = 0;
    for (Variant v : {base, fixed, fixed, base}) (v == base ? t_base : t_fixed) += timer.seconds([&] { w.launch(c, v); });
    ratios.push_back(t_fixed / t_base);
    state.SetIterationTime(t_base + t_fixed);
  }
  // The median of this row's ratios so far, as print_paired's (the middle one as run read 5.4% for a median of 8.7%,
  // session 36); the quartiles are in the table print_paired writes at the end.
  if (!ratios.empty()) {
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    state.counters["ovh_pct"] = 100 * ((n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2])) - 1);
  }
}

// A CUDA error (attncheck::Error from ATTN_CUDA_CHECK) marks the row unmeasured instead of ending the program.
void run(benchmark::State& state, Config c, void (*measure)(benchmark::State&, Config) = run_config) {
  try {
    measure(state, c);
  } catch (const std::exception& e) {
    bench::skip(state, e.what());
  }
}

void print_summary() {
  if (g_tflops.empty()) return;
  // fa2-psum's two columns come last (its rows: seq 4096), so bench_table.py's first four numbers stay the same.
  std::printf("\n%-36s %9s %9s %9s %9s %10s %10s %9s %10s\n", "config (TFLOP/s)", "fa2", "fa2-fixed", "paper",
              "paper-fix", "fa2 ovh%", "paper ovh%", "fa2-psum", "psum ovh%");
  for (const auto& entry : g_tflops) {
    const std::string& row = entry.first;
    const std::map<std::string, double>& v = entry.second;
    auto at = [&](const char* n) { auto it = v.find(n); return it == v.end() ? 0.0 : it->second; };
    const double a = at("fa2"), af = at("fa2-fixed"), p = at("paper"), pf = at("paper-fixed"), ps = at("fa2-psum");
    // '-' where a variant did not run (filtered out; the backward has no fixed rows): never a 0 overhead
    auto cell = [](double x, int width, int prec) {
      char buf[32];
      if (x > 0) std::snprintf(buf, sizeof buf, "%*.*f", width, prec, x);
      else std::snprintf(buf, sizeof buf, "%*s", width, "-");
      return std::string(buf);
    };
    auto overhead = [&](double base, double fixed) {  // by time: time(fixed) / time(base) - 1, in %
      return base > 0 && fixed > 0 ? cell(100.0 * (base / fixed - 1.0), 10, 2) : cell(0, 10, 2);
    };
    std::printf("%-36s %s %s %s %s %s %s %s %s\n", row.c_str(), cell(a, 9, 1).c_str(), cell(af, 9, 1).c_str(),
                cell(p, 9, 1).c_str(), cell(pf, 9, 1).c_str(), overhead(a, af).c_str(), overhead(p, pf).c_str(),
                cell(ps, 9, 1).c_str(), overhead(a, ps).c_str());
  }
}

void print_paired() {
  if (g_paired.empty()) return;
  std::printf("\nfix overhead in pairs, %% by time (median [quartiles] over n iterations of time(fixed) / time(base) - 1, "
              "each iteration base, fixed, fixed, base)\n");
  std::printf("%-36s %-30s %-30s %-30s\n", "config", "fa2 -> fa2-fixed", "paper -> paper-fixed", "fa2 -> fa2-psum");
  for (const auto& entry : g_paired) {
    const std::string& row = entry.first;
    const std::map<std::string, std::vector<double>>& by_base = entry.second;
    auto cell = [&](const char* base) {
      const auto it = by_base.find(base);
      if (it == by_base.end() || it->second.empty()) return std::string("-");
      std::vector<double> r = it->second;
      std::sort(r.begin(), r.end());
      const auto quantile = [&](double p) {  // linear between the order statistics
        const double at = p * double(r.size() - 1);
        const std::size_t i = std::size_t(at);
        const double frac = at - double(i);
        return 100 * ((i + 1 < r.size() ? r[i] * (1 - frac) + r[i + 1] * frac : r[i]) - 1);
      };
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f [%.2f, %.2f] n=%zu", quantile(0.5), quantile(0.25), quantile(0.75),
                    r.size());
      return std::string(buf);
    };
    std::printf("ovh %-32s %-30s %-30s %-30s\n", row.c_str(), cell("fa2").c_str(), cell("paper").c_str(),
                cell("fa2-psum").c_str());
  }
}

}  // namespace
}  // namespace attncheck::cuda

int main(int argc, char** argv) {
  using namespace attncheck::cuda;
  if (!attncheck::bench::parse_flags(&argc, argv, "bench_attention")) return 2;
  if (std::string why; attncheck::cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "bench_attention: no usable CUDA device (%s): nothing measured, exit 1\n", why.c_str());
    return 1;
  }
  for (Pass pass : {Pass::kFwd, Pass::kBwd, Pass::kStep})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int seq : {1024, 2048, 4096, 8192, 16384})
          for (Variant v :
               {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
            const bool fixed = v == Variant::kFa2Fixed || v == Variant::kPaperFixed || v == Variant::kFa2Psum;
            if (pass == Pass::kBwd && fixed) continue;        // the same kernel as the base's
            if (v == Variant::kFa2Psum && seq != 4096) continue;  // another fix: the target's length only
            if (pass == Pass::kStep && seq != 4096) continue;  // the target's length: 16 more runs, not 80
            const Config c{pass, v, d, seq, causal};
            const std::string name = std::string(pass_name(pass)) + "/" + variant_name(v) + "/d" + std::to_string(d) +
                                     (causal ? "/causal" : "/full") + "/seq" + std::to_string(seq);
            benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) { run(s, c); })
                ->UseManualTime()
                ->Iterations(5)
                ->Unit(benchmark::kMillisecond);
          }
  for (Pass pass : {Pass::kFwd, Pass::kStep})  // the fix's overhead in pairs at the target's length
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (Variant v : {Variant::kFa2, Variant::kPaper, Variant::kFa2Psum}) {  // kFa2Psum: fa2 -> fa2-psum
          const Config c{pass, v, d, 4096, causal};
          const std::string name = std::string("ovh/") + pass_name(pass) + "/" + variant_name(v) + "/d" +
                                   std::to_string(d) + (causal ? "/causal" : "/full") + "/seq4096";
          benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) { run(s, c, run_paired); })
              ->UseManualTime()
              ->Iterations(15)
              ->Unit(benchmark::kMillisecond);
        }
  const bool tilings = std::getenv("ATTNCHECK_BENCH_TILINGS") != nullptr;
  for (FwdTiling t : {FwdTiling::kWarp16Q4, FwdTiling::kWarp16Q8, FwdTiling::kWarp32Smem, FwdTiling::kWarp32Regs,
                      FwdTiling::kWgmma64, FwdTiling::kWgmma128, FwdTiling::kWgmma192})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed}) {
          if (!tilings || (t >= FwdTiling::kWgmma64 && !fwd_has_wgmma())) break;
          Config c{Pass::kFwd, v, d, 4096, causal};
          c.tiling = t;
          const std::string name = "fwdtile/" + tiling_name(t) + "/" + variant_name(v) + "/d" + std::to_string(d) +
                                   (causal ? "/causal" : "/full") + "/seq4096";
          benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) { run(s, c); })
              ->UseManualTime()
              ->Iterations(5)
              ->Unit(benchmark::kMillisecond);
        }
  const int status = attncheck::bench::run_selected("bench_attention");
  print_summary();
  print_paired();
  return status;
}
