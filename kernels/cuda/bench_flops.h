// bench_flops.h — the FLOP count behind the benchmarks' TFLOP/s (bench_timing.h; bench_attention.cu and
// bench_cudnn_sdpa.cpp). Host only, no CUDA: bench_flops_test.cpp checks it without a GPU (ctest -R BenchFlops).
//
// FlashAttention's count: a score and its share of P·V cost 4·d FLOPs per (query, key) pair, so a forward pass
// is 4·b·h·pairs·d and a backward 2.5× that. Full attention scores every pair, n_q·n_k.
#pragma once

#include <algorithm>
#include <cstdint>

namespace attncheck::cuda {

// The (query, key) pairs a causal pass scores. Causal masking is bottom-right aligned (harness/problem.h, the
// fp64 reference and the CPU models): query i sees key j iff j <= i + n_k − n_q, so row i sees
// max(0, i + n_k − n_q + 1) keys: one more per row, up to n_k on the last. Summed, the positive counts are
// m+1 … n_k with m = max(0, n_k − n_q), so T(n_k) − T(m), T(x) = x(x+1)/2; the first n_q − n_k rows of a
// query block longer than the keys see nothing and count nothing.
//
// Square (n_q = n_k = n) is the exception, kept as FlashAttention counts it: n²/2, half a diagonal (n/2 pairs,
// a relative 1/(n+1): 0.1% at n = 1024) below the n(n+1)/2 scored, so that square TFLOP/s stay comparable with
// FlashAttention's published numbers and with the README's tables, measured with this count.
inline double causal_pairs(int n_q, int n_k) {
  if (n_q == n_k) return 0.5 * double(n_q) * n_k;
  const auto triangle = [](std::int64_t x) { return x * (x + 1) / 2; };  // x <= 2^31: x(x+1) < 2^63
  return double(triangle(n_k) - triangle(std::max(0, n_k - n_q)));
}

inline double attention_flops(int b, int h, int n_q, int n_k, int d, bool causal, bool backward) {
  const double pairs = causal ? causal_pairs(n_q, n_k) : double(n_q) * n_k;
  return 4.0 * b * h * pairs * d * (backward ? 2.5 : 1.0);
}

}  // namespace attncheck::cuda
