// bwd_regress.cu — the CUDA backward (flash_bwd.cu) against the first backward kernel (bwd_legacy.cuh), bit for
// bit, on every work split (BwdTiling), and the time of each split on the benchmark shapes.
//
// Part 1 (always): dQ, dK, dV and δ of launch_flash_bwd must equal the first kernel's bits on shapes with tails,
// n = 1, GQA, bottom-right causal with n_q > n_k (rows that see no key) and n_q < n_k, seq 4096, d 64 and 128, and
// on inputs that are normal, scaled ×4 and ×30 (exp2 arguments below −126), with tied keys, and with ±inf/NaN
// sprinkled in. O and LSE come from the current forward (the same for both backwards). Any difference: exit 1.
// Part 2 (ATTNCHECK_BWD_TIME=1): mean time of 10 back-to-back launches per split on bench_attention's seq-4096
// shapes (b = 4, h = 2048/d), in TFLOP/s as FlashAttention counts them. Not a claim: bench_attention is the benchmark.
// Run: build/kernels/cuda/bwd_regress   (needs a CUDA device)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/bwd_legacy.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/formats.h"

namespace attncheck::cuda {
namespace {

// mode 0 normal; 1 normal ×4; 2 normal ×30; 3 normal with every 4th row a copy of row 0 (ties); 4 normal with
// about one element in 3000 replaced by +inf, −inf or NaN.
__global__ void fill(std::uint16_t* x, std::size_t n, int kd, std::uint64_t seed, int mode) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    std::size_t src = i;
    if (mode == 3 && (i / kd) % 4 == 0) src = i % kd;
    const double u1 = (double(mix64(seed ^ mix64(2 * src)) >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = double(mix64(seed ^ mix64(2 * src + 1)) >> 11) * 0x1.0p-53;
    float z = float(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
    if (mode == 1) z *= 4.f;
    if (mode == 2) z *= 30.f;
    if (mode == 4) {
      const std::uint64_t r = mix64(seed ^ mix64(~i)) % 9000;
      if (r == 0) z = INFINITY;
      if (r == 1) z = -INFINITY;
      if (r == 2) z = NAN;
    }
    x[i] = std::uint16_t(__float_as_uint(round_bf16(z)) >> 16);
  }
}

struct Shape {
  int b, hq, hkv, nq, nk, d;
  bool causal;
};

struct Buffers {
  DeviceBuffer<std::uint16_t> q, k, v, o, d_o, dq, dk, dv, dkh, dvh;
  DeviceBuffer<float> lse, delta;
  Buffers(const Shape& s)
      : q(std::size_t(s.b) * s.hq * s.nq * s.d), k(std::size_t(s.b) * s.hkv * s.nk * s.d), v(k.size()), o(q.size()),
        d_o(q.size()), dq(q.size()), dk(k.size()), dv(k.size()), dkh(std::size_t(s.b) * s.hq * s.nk * s.d),
        dvh(dkh.size()), lse(std::size_t(s.b) * s.hq * s.nq), delta(lse.size()) {}
};

void params(const Shape& s, Buffers& m, FwdParams& f, BwdParams& g) {
  f.q = m.q.get(), f.k = m.k.get(), f.v = m.v.get(), f.o = m.o.get(), f.lse = m.lse.get();
  f.batch = s.b, f.heads_q = s.hq, f.heads_kv = s.hkv, f.n_q = s.nq, f.n_k = s.nk, f.causal = s.causal;
  f.scale = 1.0f / std::sqrt(float(s.d));
  f.scale_log2e = float(double(f.scale) * 1.4426950408889634);
  g.q = m.q.get(), g.k = m.k.get(), g.v = m.v.get(), g.o = m.o.get(), g.d_o = m.d_o.get(), g.lse = m.lse.get();
  g.delta = m.delta.get(), g.dq = m.dq.get(), g.dk = m.dk.get(), g.dv = m.dv.get();
  g.dk_head = m.dkh.get(), g.dv_head = m.dvh.get();
  g.batch = s.b, g.heads_q = s.hq, g.heads_kv = s.hkv, g.n_q = s.nq, g.n_k = s.nk, g.causal = s.causal;
  g.scale = f.scale, g.scale_log2e = f.scale_log2e;
}

// Elements whose bits differ (a NaN equals a NaN with the same bits).
template <class T>
std::size_t differ(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

int regress() {
  const std::vector<Shape> shapes = {
      {2, 4, 4, 1000, 1000, 128, false}, {2, 4, 2, 1000, 1000, 128, true}, {1, 4, 1, 333, 1111, 64, true},
      {1, 4, 4, 1111, 333, 64, true},    {3, 2, 2, 64, 64, 128, false},    {1, 2, 2, 1, 1, 64, false},
      {1, 2, 2, 1, 77, 128, true},       {1, 3, 1, 200, 77, 128, true},    {1, 2, 2, 130, 4000, 128, true},
      {1, 2, 2, 4096, 4096, 128, true},  {1, 2, 2, 4096, 4096, 64, false}, {1, 1, 1, 100, 260, 64, false}};
  std::size_t bad = 0, total = 0;
  std::uint64_t seed = 100;
  for (const Shape& s : shapes)
    for (int mode = 0; mode < 5; ++mode)
      for (Variant var : {Variant::kFa2, Variant::kPaper}) {
        Buffers m(s);
        ++seed;
        fill<<<1024, 256>>>(m.q.get(), m.q.size(), s.d, 11 * seed, mode);
        fill<<<1024, 256>>>(m.k.get(), m.k.size(), s.d, 13 * seed, mode);
        fill<<<1024, 256>>>(m.v.get(), m.v.size(), s.d, 17 * seed, mode == 3 ? 0 : mode);
        fill<<<1024, 256>>>(m.d_o.get(), m.d_o.size(), s.d, 19 * seed, mode == 3 ? 0 : mode);
        ATTN_CUDA_CHECK(cudaGetLastError());
        FwdParams f;
        BwdParams g;
        params(s, m, f, g);
        launch_flash_fwd(var, s.d, f, nullptr);
        legacy::launch_flash_bwd(var, s.d, g, nullptr);
        ATTN_CUDA_CHECK(cudaDeviceSynchronize());
        const auto dq0 = m.dq.download(), dk0 = m.dk.download(), dv0 = m.dv.download();
        const auto dl0 = m.delta.download();
        for (BwdTiling t : {BwdTiling::kDefault, BwdTiling::kKeys64Rows128, BwdTiling::kKeys128Rows128,
                              BwdTiling::kKeys64Rows64, BwdTiling::kKeys128Rows64, BwdTiling::kKeys64Rows128Ilp}) {
          ATTN_CUDA_CHECK(cudaMemset(m.dq.get(), 0xff, m.dq.size() * 2));
          ATTN_CUDA_CHECK(cudaMemset(m.dk.get(), 0xff, m.dk.size() * 2));
          ATTN_CUDA_CHECK(cudaMemset(m.dv.get(), 0xff, m.dv.size() * 2));
          g.tiling = t;
          launch_flash_bwd(var, s.d, g, nullptr);
          ATTN_CUDA_CHECK(cudaDeviceSynchronize());
          const std::size_t nq = differ(dq0, m.dq.download()), nk = differ(dk0, m.dk.download()),
                            nv = differ(dv0, m.dv.download()), nd = differ(dl0, m.delta.download());
          const std::size_t n = nq + nk + nv + nd;
          total += dq0.size() + dk0.size() + dv0.size() + dl0.size();
          if (n) {
            std::printf("DIFFER: dQ %zu dK %zu dV %zu delta %zu, b%d hq%d hkv%d nq%d nk%d d%d causal%d mode %d %s "
                        "tiling %d\n", nq, nk, nv, nd, s.b, s.hq, s.hkv, s.nq, s.nk, s.d, int(s.causal), mode,
                        variant_name(var), int(t));
            bad += n;
          }
        }
      }
  std::printf("bwd_regress: %zu of %zu outputs differ from the first kernel (%zu shapes x 5 inputs x 2 numerics x "
              "6 splits)\n", bad, total, shapes.size());
  return bad == 0 ? 0 : 1;
}

void time_splits() {
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (Variant var : {Variant::kFa2, Variant::kPaper}) {
        if (causal && (var != Variant::kFa2 || d != 128)) continue;
        const Shape s{4, 2048 / d, 2048 / d, 4096, 4096, d, causal};
        Buffers m(s);
        fill<<<1024, 256>>>(m.q.get(), m.q.size(), d, 1, 0);
        fill<<<1024, 256>>>(m.k.get(), m.k.size(), d, 2, 0);
        fill<<<1024, 256>>>(m.v.get(), m.v.size(), d, 3, 0);
        fill<<<1024, 256>>>(m.d_o.get(), m.d_o.size(), d, 4, 0);
        FwdParams f;
        BwdParams g;
        params(s, m, f, g);
        launch_flash_fwd(var, d, f, nullptr);
        // FlashAttention's count (bench_timing.h): backward = 2.5 × forward 4·b·h·n_q·n_k·d, halved when causal.
        const double flops = 2.5 * 4.0 * s.b * s.hq * double(s.nq) * s.nk * d * (causal ? 0.5 : 1.0);
        auto time = [&](auto fn) {
          fn(), fn();
          cudaEvent_t e0, e1;
          ATTN_CUDA_CHECK(cudaEventCreate(&e0));
          ATTN_CUDA_CHECK(cudaEventCreate(&e1));
          double best = 1e30;
          for (int it = 0; it < 3; ++it) {
            ATTN_CUDA_CHECK(cudaEventRecord(e0));
            for (int r = 0; r < 10; ++r) fn();
            ATTN_CUDA_CHECK(cudaEventRecord(e1));
            ATTN_CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0;
            ATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            best = std::min(best, ms / 1e3 / 10);
          }
          return flops / best / 1e12;
        };
        std::printf("time %s d%d %s: legacy %.1f", variant_name(var), d, causal ? "causal" : "full",
                    time([&] { legacy::launch_flash_bwd(var, d, g, nullptr); }));
        for (BwdTiling t : {BwdTiling::kKeys64Rows128, BwdTiling::kKeys128Rows128, BwdTiling::kKeys64Rows64,
                            BwdTiling::kKeys128Rows64, BwdTiling::kKeys64Rows128Ilp}) {
          g.tiling = t;
          std::printf("  split%d %.1f", int(t), time([&] { launch_flash_bwd(var, d, g, nullptr); }));
        }
        std::printf(" TFLOP/s\n");
      }
}

}  // namespace
}  // namespace attncheck::cuda

int main() {
  if (attncheck::cuda_device_count() == 0) {
    std::printf("bwd_regress: no CUDA device\n");
    return 0;
  }
  try {
    const int rc = attncheck::cuda::regress();
    if (std::getenv("ATTNCHECK_BWD_TIME")) attncheck::cuda::time_splits();
    return rc;
  } catch (const std::exception& e) {
    std::printf("bwd_regress: %s\n", e.what());
    return 2;
  }
}
