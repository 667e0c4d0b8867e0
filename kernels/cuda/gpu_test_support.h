// gpu_test_support.h — helpers for the GPU tests (label gpu): skip without a device, bitwise-agreement and ulp
// statistics between two output tensors (and a backward pass's four), instances with tied maxima (the paper's failure needs ties), and the
// shapes every CUDA kernel's tests run (gpu_test_instances).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/kernel.h"
#include "harness/problem.h"
#include "kernels/formats.h"
#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_check.h"

namespace attncheck::test {

// Skips, saying why: no device, or one this build has no code for (cuda_check.h).
#define ATTN_SKIP_WITHOUT_GPU()                                                                          \
  do {                                                                                                   \
    if (std::string why_; ::attncheck::cuda_device_count(&why_) == 0) GTEST_SKIP() << "no usable CUDA device: " << why_; \
  } while (0)

// A kernel's name as a gtest parameter name ("fa2-fixed" -> "fa2_fixed": gtest allows letters, digits and '_').
inline std::string gtest_name(std::string n) {
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

// How often two tensors agree bit for bit, and their largest difference in ulps of `fmt` at the expected
// value (NaN == NaN and equal infinities count as agreement; a NaN/inf mismatch counts as an infinite ulp). An expected
// value near 0 (cancellation) has a tiny ulp, so one flipped rounding there reads as ~1e33 ulps: describe() also gives
// the largest difference in ulps of `fmt` at the expected tensor's rms, the scale the bias properties use.
struct Agreement {
  std::size_t total = 0, equal = 0;
  double max_ulp = 0;
  double max_abs = 0;                  // the largest |got − want| among finite pairs
  double sum_sq = 0;                   // Σ want² over finite want, for the rms
  std::size_t finite = 0;
  Format fmt = Format::kBF16;          // the last add()'s, for describe()
  void add(const std::vector<double>& got, const std::vector<double>& want, Format f) {
    EXPECT_EQ(got.size(), want.size());
    fmt = f;
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      ++total;
      const double a = got[i], b = want[i];
      if (std::isfinite(b)) sum_sq += b * b, ++finite;
      if (a == b || (std::isnan(a) && std::isnan(b))) {
        ++equal;
        continue;
      }
      if (!std::isfinite(a) || !std::isfinite(b)) {
        max_ulp = HUGE_VAL;
        continue;
      }
      max_ulp = std::max(max_ulp, std::fabs(a - b) / ulp(b, f));
      max_abs = std::max(max_abs, std::fabs(a - b));
    }
  }
  double rate() const { return total ? double(equal) / double(total) : 1.0; }
  // The largest finite difference in ulps of `fmt` at the expected tensor's rms (0 when all agree).
  double max_rms_ulp() const {
    const double rms = finite ? std::sqrt(sum_sq / double(finite)) : 0.0;
    return max_abs == 0 ? 0.0 : rms > 0 ? max_abs / ulp(rms, fmt) : HUGE_VAL;
  }
  std::string describe() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%zu/%zu bitwise equal (%.4f%%), max diff %.3g ulp of the element, %.3g ulp of the "
                  "tensor's rms", equal, total, 100.0 * rate(), max_ulp, max_rms_ulp());
    return buf;
  }
};

// Agreement of a backward pass's four outputs (dQ, dK, dV in bf16; δ in `delta_fmt`).
struct BackwardAgreement {
  Agreement dq, dk, dv, delta;
  void add(const BackwardOutput& got, const BackwardOutput& want, Format delta_fmt) {
    dq.add(got.dq, want.dq, Format::kBF16);
    dk.add(got.dk, want.dk, Format::kBF16);
    dv.add(got.dv, want.dv, Format::kBF16);
    delta.add(got.delta, want.delta, delta_fmt);
  }
  std::string describe() const {
    return "dQ " + dq.describe() + "; dK " + dk.describe() + "; dV " + dv.describe() + "; delta " + delta.describe();
  }
};

// Repeats the first `distinct` key rows over all keys: every query row then has exact ties at its max score.
inline Instance with_tied_keys(Instance in, int distinct) {
  const Problem& p = in.problem;
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk)
      for (int j = distinct; j < p.n_k; ++j)
        for (int c = 0; c < p.head_dim; ++c) in.k[p.kv_at(b, hk, j, c)] = in.k[p.kv_at(b, hk, j % distinct, c)];
  return in;
}

// A ladder of near ties about the fixed policy's threshold thr = round(r − tolerance, S format) (numerics_spec.h):
// every score is exact in bf16 and in fp32 (scale 1; each query row is one unit vector times 1 or 2, so a score is
// one key element, or twice it), so fa2's fp32 S and the paper's bf16 S are the same numbers. Row i of head h
// (q = (h + 1)·e_c, c = i mod 7) has its tile max r = (h + 1)·2^-4 at two keys of tile 0 (5, 40) and of the tail
// tile (128, 129): one at r, the other (h + 1)·(c + 1)·2^-12 below it, 0.24 to 3.4 tolerances of 1e-3, which is
// c + 1 bf16 steps of the binade just below r (2^-12 below 2^-4, 2^-11 below 2^-3), i.e. (c + 1)/2 ulps of r in
// both heads; every other key is −(j + 1)·2^-4 (a tile max with no runner-up within 8
// tolerances). So rows at gaps just inside and just outside the tolerance sit side by side, and a threshold moved
// by half a tolerance either way moves whether a row's max is shifted (TwinFixedPolicy checks that the twin's O
// then differs). n_q 70, n_k 130 (three key tiles, the last a tail), GQA 2:1, V ~ N(0, 1) in bf16.
inline Instance near_tie_ladder(int d, std::uint64_t seed) {
  Problem p = make_problem(1, 2, 1, 70, 130, d, false);
  p.scale = 1.0;
  Instance in = random_instance(p, seed);
  std::fill(in.q.begin(), in.q.end(), 0.0);
  for (int h = 0; h < p.heads_q; ++h)
    for (int i = 0; i < p.n_q; ++i) in.q[p.q_at(0, h, i, i % 7)] = h + 1.0;
  for (int j = 0; j < p.n_k; ++j)
    for (int c = 0; c < p.head_dim; ++c) {
      double k = -(j + 1) * 0x1.0p-4;
      if (c < 7 && (j == 5 || j == 128)) k = 0x1.0p-4;
      if (c < 7 && (j == 40 || j == 129)) k = 0x1.0p-4 - (c + 1) * 0x1.0p-12;
      in.k[p.kv_at(0, 0, j, c)] = k;
    }
  return in;
}

// How far the fp32 LSE of fa2 and fa2-fixed on the GPU may lie from their CPU model's, for row i of `in` whose model
// LSE is `lse`. ε = 2^-23 bounds one fp32 ulp relative to the value. Each side is bounded against the exact LSE of
// its own scores, and the two sets of scores against each other:
//  - Scores: the GPU's q·k runs on the tensor cores (terms cut toward zero, TENSOR_CORES.md), the model's in fp32 in
//    head-dimension order; each lies within d·ε·Σ_c|q_c k_c| of the exact dot product, so they differ by at most
//    2·d·ε·Σ_c|q_c k_c|, and LSE (log-sum-exp of the scaled scores) moves by at most scale times the largest of them.
//  - Given the scores: each p̄ and rescale α is within 2 ulps of exact on the GPU (MUFU exp2f; cuda_twin.h) and 1 on
//    the host: 3ε apart. A key tile's row sum adds <= 64 positive terms, each side within 63·ε/2 of the exact sum:
//    63ε apart. l = round(round(α·l) + b) at each of T <= ⌈n_k/64⌉ tiles: <= 2ε apart per tile, and α's 3ε reaches
//    every earlier tile's share. All terms are positive, so Δl/l <= (63 + 3 + 3(T − 1) + 2T)ε = (63 + 5T)ε, and
//    |Δ log l| <= Δl/l (first order; +1ε for the second).
//  - log: GPU logf within 2 ulps, the host's within 1: 3ε·|log l|. log l = LSE − m'·scale with m' the row max r,
//    or for fa2-fixed's shift 2r or 0; r·scale lies in [LSE − ln n_k, LSE], so |log l| <= |LSE| + 2 ln n_k.
//  - LSE = fmaf(m', scale, log l): one rounding on each side, <= ulp(LSE) apart.
// A worst case, and a loose one: the scores' term alone is ~2d·ε·scale·Σ|q_c k_c|, hundreds of fp32 ulps of LSE at
// d = 128, where the sums' errors mostly cancel; measured (2026-12-05, H200): <= 6 ulps, 0.07 of an earlier form of
// this bound that left the scores out. It catches a wrong rescale, tile or log, not a last-bits change. The CPU twin
// (which does the GPU's sums in the GPU's order, with the host's exp2f and logf) is held to it too, on the CPU:
// CudaTwin.LseWithinTheGpuBoundOfTheModel (cuda_twin_test.cpp).
inline double fa2_lse_bound(const Instance& in, std::size_t row, double lse) {
  const Problem& p = in.problem;
  const double eps = std::ldexp(1.0, -23), tiles = std::ceil(p.n_k / 64.0);
  const int b = static_cast<int>(row / (std::size_t(p.heads_q) * p.n_q)), h = static_cast<int>(row / p.n_q % p.heads_q),
            i = static_cast<int>(row % p.n_q), hk = h / p.group();
  double dot_abs = 0;  // max over keys of Σ_c |q_c k_c|
  for (int j = 0; j < p.n_k; ++j) {
    double a = 0;
    for (int c = 0; c < p.head_dim; ++c)
      a += std::fabs(in.q[p.q_at(b, h, i, c)] * in.k[p.kv_at(b, hk, j, c)]);
    dot_abs = std::max(dot_abs, a);
  }
  return p.scale * 2 * p.head_dim * eps * dot_abs + (64 + 5 * tiles) * eps +
         3 * eps * (std::fabs(lse) + 2 * std::log(double(p.n_k))) + ulp(lse, Format::kF32);
}

// The largest |got − want| / fa2_lse_bound over the rows of `in` (equal LSEs skipped: −inf on both included; a NaN
// ratio counts as infinite), and the largest difference in fp32 ulps of `want`.
struct LseBoundRatio {
  double worst = 0, worst_ulps = 0;
  std::size_t differ = 0;
};
inline void add_lse_bound_ratio(const Instance& in, const std::vector<double>& got, const std::vector<double>& want,
                                LseBoundRatio& r) {
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] == want[i]) continue;
    ++r.differ;
    const double x = std::fabs(got[i] - want[i]) / fa2_lse_bound(in, i, want[i]);
    r.worst = std::isnan(x) ? HUGE_VAL : std::max(r.worst, x);
    r.worst_ulps = std::max(r.worst_ulps, std::fabs(got[i] - want[i]) / ulp(want[i], Format::kF32));
  }
}

// The GPU tests' shapes: tails (n not a multiple of 64), n = 1, GQA, bottom-right causal with n_q > n_k (rows that
// see no key) and n_q < n_k, a padded head dim (40 -> 64), both kernel head dims, a keep-mask (80% kept, two rows
// of every head with no key kept) with and without causal, an additive bias (standard normal, rounded to bf16 as
// cuDNN takes it) with and without a keep-mask. Each as a random instance and the same instance with exact ties
// at the row max (the fixed policy's case); seeds seed+1, seed+2, ...
inline std::vector<Instance> gpu_test_instances(std::uint64_t seed, bool with_d_o) {
  struct Shape {
    int b, hq, hkv, nq, nk, d;
    bool causal, keep_mask = false, bias = false;
  };
  static const Shape kShapes[] = {
      {1, 1, 1, 1, 1, 64, false},     {1, 1, 1, 64, 64, 64, false},    {2, 4, 2, 37, 100, 64, true},
      {1, 2, 1, 130, 67, 128, false}, {1, 2, 2, 200, 130, 128, true},  {1, 1, 1, 77, 33, 128, true},
      {2, 2, 1, 65, 129, 40, false},  {1, 1, 1, 256, 256, 128, true}, {1, 3, 3, 128, 192, 64, false},
      {2, 2, 1, 70, 150, 64, false, true}, {1, 2, 2, 130, 200, 128, true, true},
      {1, 2, 1, 90, 140, 64, true, false, true}, {1, 1, 1, 100, 70, 128, false, true, true},
  };
  std::vector<Instance> out;
  for (const Shape& s : kShapes) {
    Problem p = make_problem(s.b, s.hq, s.hkv, s.nq, s.nk, s.d, s.causal);
    p.has_mask = s.keep_mask;
    p.has_bias = s.bias;
    Instance in = random_instance(p, ++seed);
    for (double& b : in.bias) b = round_to(b, Format::kBF16);  // cuDNN's bias has the input type (bf16)
    if (s.keep_mask)  // rows 3 and 5 of every head see no key: the empty-row rule with a finite running max
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_q; ++h)
          for (int i : {3, 5})
            for (int j = 0; j < p.n_k; ++j) in.mask[p.score_at(b, h, i, j)] = 0;
    if (!with_d_o) in.d_o.clear();
    out.push_back(in);
    out.push_back(with_tied_keys(in, 3));
  }
  return out;
}

// forward_many (one batched launch per shape) must give each instance exactly what forward gives it alone.
inline void expect_forward_many_equals_forward(const Kernel& k, const std::vector<Instance>& ins) {
  std::vector<const Instance*> ptrs;
  for (const Instance& in : ins) ptrs.push_back(&in);
  const std::vector<ForwardOutput> many = k.forward_many(ptrs);
  ASSERT_EQ(many.size(), ins.size());
  for (std::size_t i = 0; i < ins.size(); ++i) {
    const ForwardOutput one = k.forward(ins[i]);
    EXPECT_EQ(many[i].o, one.o) << ins[i].problem.describe();
    EXPECT_EQ(many[i].lse, one.lse) << ins[i].problem.describe();
  }
}

}  // namespace attncheck::test
