// cuda_twin_test.cpp — host-only checks of the CPU twin of the CUDA forward (cuda_twin.h), of the
// tensor-core model it uses (mma_model.h), of the kernels' host packing (host_packing.h) and of the problems the
// CUDA kernels and their launch functions refuse before any CUDA call (cuda_kernels.cpp, flash_fwd.h), runnable
// without a GPU (label unit). The twin's agreement with the GPU itself is cuda_kernels_test's
// ForwardAgreesWithItsCpuTwin (label gpu).
// Run: ctest -R cuda_twin
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_twin.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/gpu_test_support.h"
#include "kernels/cuda/host_packing.h"
#include "kernels/cuda/mma_model.h"
#include "kernels/numerics_spec.h"

namespace attncheck::test {
namespace {

using cuda::Variant;

// The CUDA kernels pack doubles into bf16 rows. A value that is not a bf16 value is refused (it would be rounded
// behind the caller's back); a NaN is a bf16 value and goes in as the canonical 0x7FC0 (gpu_matches_cpu_model found
// the backward refusing its own forward's NaN O on large_logits, 2026-11-30); ±inf and −0 keep their bits.
// The GPU tests' agreement line: one flipped rounding at an exact value near 0 is ~1e33 ulps of that element (a GPU
// run printed "max diff 6.13e+33 ulp"); in ulps at the tensor's rms it is what it is, one ulp there.
TEST(GpuTestSupport, AgreementSaysTheDifferenceAtTheTensorsScaleToo) {
  Agreement a;
  a.add({1.0, -2.0, 0x1.0p-7 + 0x1.0p-100}, {1.0, -2.0, 0x1.0p-100}, Format::kBF16);  // rms ~1.3: its ulp 2^-7
  EXPECT_EQ(a.equal, 2u);
  EXPECT_GT(a.max_ulp, 1e20) << a.describe();
  EXPECT_DOUBLE_EQ(a.max_rms_ulp(), 1.0) << a.describe();
  EXPECT_NE(a.describe().find("1 ulp of the tensor's rms"), std::string::npos) << a.describe();
  Agreement same;
  same.add({1.0}, {1.0}, Format::kBF16);
  EXPECT_EQ(same.max_rms_ulp(), 0.0);
}

TEST(HostPacking, NanGoesInCanonicalAndNonBf16ValuesAreRefused) {
  const std::vector<double> row = {1.5, NAN, -INFINITY, -0.0, -NAN};
  std::uint16_t out[8];
  cuda::pack_rows(row, 5, 8, out, "test", "O");
  const std::uint16_t want[8] = {0x3fc0, 0x7fc0, 0xff80, 0x8000, 0x7fc0, 0, 0, 0};
  for (int c = 0; c < 8; ++c) EXPECT_EQ(out[c], want[c]) << "column " << c;
  const std::vector<double> bad = {1.5, 0.1, 2.0, 3.0, 4.0};
  try {
    cuda::pack_rows(bad, 5, 8, out, "test", "O");
    ADD_FAILURE() << "0.1 was packed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("O value 0.1"), std::string::npos) << e.what();
  }
}

// forward_many runs each group of one shape as one launch, whose batch is an int: a group past INT_MAX is refused
// before any CUDA call (it was cast to a negative batch). Only the problems are read: no tensors needed.
TEST(HostPacking, AGroupWhoseBatchPassesAnIntIsRefused) {
  Instance big;
  big.problem = Problem::of_shape(std::numeric_limits<int>::max(), 1, 1, 1, 1, 1, false);
  Instance one = big;
  one.problem.batch = 1;
  const auto key = [](const Problem& p) { return p.n_q; };
  EXPECT_EQ(cuda::group_for_launch({&big}, key)[0].total_batch(), std::size_t(std::numeric_limits<int>::max()));
  try {
    (void)cuda::group_for_launch({&big, &one}, key);
    ADD_FAILURE() << "a group of batch 2^31 was made";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("add up to a batch of 2147483648, more than a launch takes"), std::string::npos) << msg;
  }
}

// A problem the CUDA kernels cannot run is refused with an Error naming the cause and the problem before any CUDA
// call (so this runs without a GPU, and no message may be a CUDA error: a launch with a bad shape fails with CUDA's
// "invalid configuration argument", naming neither). heads_q past 65,535, the launches' gridDim.y, passed every host
// check and failed in the launch; the others are the caps' and Problem::validate's refusals, kept here.
TEST(HostChecks, CudaKernelsRefuseWhatTheyCannotRunBeforeAnyCudaCall) {
  struct Bad {
    int b, hq, hkv, nq, nk, d;
    const char* why;
  };
  const Bad kBad[] = {
      {1, 1, 1, 4, 4, 256, "head_dim 256 too large"},     {1, 1, 1, 4, 4, 0, "head_dim must be positive"},
      {1, 1, 1, 0, 4, 64, "n_q must be positive"},        {1, 1, 1, 4, 0, 64, "n_k must be positive"},
      {0, 1, 1, 4, 4, 64, "batch must be positive"},      {1, 3, 2, 4, 4, 64, "must divide heads_q"},
      {1, 65536, 1, 1, 1, 1, "heads_q 65536 is more than the 65535"},
  };
  auto expect_refused = [](const Kernel& k, const Instance& in, bool backward, const std::string& why) {
    try {
      if (backward) {
        ForwardOutput fwd;
        fwd.o.assign(in.q.size(), 0.0), fwd.lse.assign(in.problem.rows(), 0.0);
        (void)k.backward(in, fwd);
      } else {
        (void)k.forward(in);
      }
      ADD_FAILURE() << k.name() << (backward ? " backward" : " forward") << " ran " << in.problem.describe();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(why), std::string::npos) << k.name() << (backward ? " backward: " : " forward: ") << msg;
      EXPECT_EQ(msg.find("CUDA error"), std::string::npos) << k.name() << ": " << msg;
    }
  };
  for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
    const auto k = cuda::make_cuda_kernel(v);
    for (const Bad& x : kBad) {
      Instance in;
      in.problem = Problem::of_shape(x.b, x.hq, x.hkv, x.nq, x.nk, x.d, false);
      in.q.assign(in.problem.q_size(), 0.5), in.d_o = in.q;
      in.k.assign(in.problem.kv_size(), 0.5), in.v = in.k;
      for (bool backward : {false, true}) expect_refused(*k, in, backward, x.why);
    }
    // An input format the kernels do not take, and tensors of the wrong size.
    Instance in = random_instance(make_problem(1, 2, 1, 5, 7, 64, true), 3);
    Instance fp16 = in;
    fp16.problem.input_format = Format::kF16;
    Instance short_q = in;
    short_q.q.pop_back();
    Instance masked = in;
    masked.problem.has_mask = true;  // and no keep-mask given
    for (bool backward : {false, true}) {
      expect_refused(*k, fp16, backward, "no fp16 input");
      expect_refused(*k, short_q, backward, "Q, K, V sizes do not match");
      expect_refused(*k, masked, backward, "keep-mask has the wrong size");
    }
  }
}

// The launch functions themselves (bench_attention calls them without a Kernel) refuse heads_q past gridDim.y's
// 65,535 with the Kernels' words, before any CUDA call: they launched and failed with "invalid configuration
// argument" on a GPU, and with a CUDA error where there is none. Null pointers: nothing may be touched.
TEST(HostChecks, LaunchesRefuseTooManyQueryHeadsBeforeAnyCudaCall) {
  auto expect_refused = [](const char* who, auto launch) {
    try {
      launch();
      ADD_FAILURE() << who << " launched heads_q 65536";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(who) + ": heads_q 65536 is more than the 65535"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("CUDA error"), std::string::npos) << msg;
    }
  };
  cuda::FwdParams f;
  f.heads_q = 65536, f.heads_kv = 1;
  cuda::BwdParams b;
  b.heads_q = 65536, b.heads_kv = 1;
  for (int kd : {64, 128}) {
    expect_refused("launch_flash_fwd", [&] { cuda::launch_flash_fwd(Variant::kFa2, kd, f, nullptr); });
    expect_refused("launch_flash_bwd", [&] { cuda::launch_flash_bwd(Variant::kFa2, kd, b, nullptr); });
  }
}

// A k16 sum past fp32's range is ±inf on the H200, not the largest finite value a toward-zero rounding would give,
// and stays so: gpu_matches_cpu_model found the twin's row max at −FLT_MAX where the GPU's was −inf (large_logits:
// one key, q·k = −3·2^128), so the twin gave LSE = +inf (FA2's empty sum) and the GPU −inf (an empty row).
TEST(MmaModel, OverflowIsInfinite) {
  float a[16] = {}, b[16] = {};
  for (int k = 0; k < 3; ++k) a[k] = 0x1p64f, b[k] = -0x1p64f;
  EXPECT_EQ(mma_k16(a, b, 0.0f), -INFINITY);
  EXPECT_EQ(mma_k16(a, b, -INFINITY), -INFINITY);
  Instance in;
  in.problem = Problem::of_shape(1, 1, 1, 1, 1, 3);
  in.q = {0x1p64, 0x1p64, 0x1p64};
  in.k = {-0x1p64, -0x1p64, -0x1p64};
  in.v = {1, -1, -1};
  for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
    const ForwardOutput t = cuda::twin_forward(v, in);
    const ForwardOutput m = model_forward(builtin_spec(cuda::variant_name(v)), in);
    EXPECT_EQ(t.lse[0], m.lse[0]) << cuda::variant_name(v);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(t.o[c], m.o[c]) << cuda::variant_name(v) << " c" << c;
  }
}

// An infinite p̄ (exp2 past fp32's range, large_logits) enters a k16 step as IEEE adds it: ±inf times a finite
// nonzero value is ±inf whatever that value's exponent, inf·0 and inf − inf are NaN. The aligned path took
// ilogb(inf) = INT_MAX as an exponent: +inf · 0.5 gave NaN, +inf · 2 gave +inf (and an int overflow).
TEST(MmaModel, InfiniteInputsAddAsIeeeAdds) {
  for (float other : {0.5f, 2.0f, 0x1p-100f, 0x1p100f}) {
    float a[16] = {}, b[16] = {};
    a[0] = INFINITY, b[0] = other, a[1] = 1.0f, b[1] = -3.0f;
    EXPECT_EQ(mma_k16(a, b, 1.0f), INFINITY) << other;
    EXPECT_EQ(mma_k16_generic(a, b, 0.0f, kMeasuredMmaModel), INFINITY) << other;
    b[0] = -other;
    EXPECT_EQ(mma_k16(a, b, -5.0f), -INFINITY) << other;
    a[2] = INFINITY, b[2] = other;  // +inf + (−inf)
    EXPECT_TRUE(std::isnan(mma_k16(a, b, 0.0f))) << other;
  }
  float a[16] = {}, b[16] = {};
  a[3] = -INFINITY;  // times b[3] = 0
  EXPECT_TRUE(std::isnan(mma_k16(a, b, 1.0f)));
}

// Facts measured on the H200 (TENSOR_CORES.md), as single cases the model must reproduce.
TEST(MmaModel, ReproducesMeasuredFacts) {
  float a[16] = {}, b[16] = {};
  // 1 + 0.75·2^-23 truncates to 1 (the final rounding is toward zero).
  a[0] = 0.75f, b[0] = std::ldexp(1.0f, -23);
  EXPECT_EQ(mma_k16(a, b, 1.0f), 1.0f);
  // 1 − 0.75·2^-23 = 1 − 1.5·2^-24 truncates to 1 − 2^-23 (toward zero, below 1 the spacing is 2^-24).
  a[0] = -0.75f;
  EXPECT_EQ(mma_k16(a, b, 1.0f), 1.0f - std::ldexp(1.0f, -23));
  // A single product is exact.
  a[0] = 1.5f, b[0] = -1.5f;
  EXPECT_EQ(mma_k16(a, b, 0.0f), -2.25f);
  // Products far below the largest alignment exponent are cut away before the sum: with c = 1 (exponent 0)
  // the quantum is 2^(0−25), so sixteen products of 2^-26 each truncate to 0 and d = 1, although their exact
  // sum 1 + 2^-22 is an fp32 number.
  for (int k = 0; k < 16; ++k) a[k] = 1.0f, b[k] = std::ldexp(1.0f, -26);
  EXPECT_EQ(mma_k16(a, b, 1.0f), 1.0f);
  const float exact_sum = 1.0f + 16 * std::ldexp(1.0f, -26);
  EXPECT_NE(exact_sum, 1.0f);
}

// Edge facts measured on the tensor cores (mma_probe_test's EdgeInputsAsTheModelSays and
// MeasuredModelHoldsOverTheWholeRange, 2026-12-05; TENSOR_CORES.md rule 7 says which card showed which), that the
// model had wrong before: truncation at fp32's top, the sign of a zero, subnormals' alignment exponent, the finest cut.
TEST(MmaModel, ReproducesMeasuredEdgeFacts) {
  float a[16] = {}, b[16] = {};
  // FLT_MAX + 2^103 (half an ulp) truncates to FLT_MAX; FLT_MAX + 2^104 = 2^128 is +inf (H100, H200).
  a[0] = 0x1p52f, b[0] = 0x1p51f;
  EXPECT_EQ(mma_k16(a, b, FLT_MAX), FLT_MAX);
  b[0] = 0x1p52f;
  EXPECT_EQ(mma_k16(a, b, FLT_MAX), INFINITY);
  // c = −0 and sixteen −0 products: +0 (IEEE adds would give −0; H100, H200).
  for (int k = 0; k < 16; ++k) a[k] = -0.0f, b[k] = 1.0f;
  EXPECT_FALSE(std::signbit(mma_k16(a, b, -0.0f)));
  EXPECT_FALSE(std::signbit(mma_k16_generic(a, b, -0.0f, kMeasuredMmaModel)));
  // A negative sum that truncates to zero is +0: −1.5·2^-150, which the 2^-158 floor below leaves whole (H100, H200).
  std::fill(a, a + 16, 0.0f), std::fill(b, b + 16, 0.0f);
  a[0] = -0x1.8p-75f, b[0] = 0x1p-75f;
  EXPECT_FALSE(std::signbit(mma_k16(a, b, 0.0f)));
  EXPECT_FALSE(std::signbit(mma_k16_generic(a, b, 0.0f, kMeasuredMmaModel)));
  // A subnormal c aligns at −126 (H200, the sweep's bottom regime): −2^-149 + 2^-152 is −2^-149, the product cut at
  // 2^(−126−25); at c's own exponent (−149, the cut then 2^-158) it would stay and the sum, −0.875·2^-149, truncate to 0.
  a[0] = 0x1p-76f, b[0] = 0x1p-76f;
  EXPECT_EQ(mma_k16(a, b, -0x1p-149f), -0x1p-149f);
  EXPECT_EQ(mma_k16_generic(a, b, -0x1p-149f, kMeasuredMmaModel), -0x1p-149f);
  // A subnormal bf16 operand too (H200): 2^-130 · 2^100 aligns at 2^-26, so 2^-27 · 2^-26 = 2^-53 is cut (2^-30 +
  // 2^-53 is an fp32 number, and at 2^-30's own exponent it would be kept).
  a[0] = 0x1p-130f, b[0] = 0x1p100f, a[1] = 0x1p-27f, b[1] = 0x1p-26f;
  EXPECT_EQ(mma_k16(a, b, 0.0f), 0x1p-30f);
  EXPECT_EQ(mma_k16_generic(a, b, 0.0f, kMeasuredMmaModel), 0x1p-30f);
  // No cut is finer than 2^-158, whatever emax (H200, fitted from the sweep), and none is coarser either; two cases
  // pin it from both sides. (1) −1.125·2^-127 · 1.5234375·2^-25 (exact −0.2142…·2^-149) is cut to −109·2^-158 and
  // 1.5·2^-132 · 1.6171875·2^-18 = 621·2^-158 is exact: the sum is 512·2^-158 = 2^-149; cut at 2^(emax − 25) =
  // 2^-169 (emax = −126 − 18) or at 2^-159 it would be 0.9987·2^-149, truncated to 0.
  std::fill(a, a + 16, 0.0f), std::fill(b, b + 16, 0.0f);
  a[0] = -0x1.2p-127f, b[0] = 0x1.86p-25f, a[1] = -0x1.8p-132f, b[1] = -0x1.9ep-18f;
  EXPECT_EQ(mma_k16(a, b, -0.0f), 0x1p-149f);
  EXPECT_EQ(mma_k16_generic(a, b, -0.0f, kMeasuredMmaModel), 0x1p-149f);
  // (2) 7·2^-80 · 73·2^-78 = 511·2^-158 and 2^-79 · 2^-79 = 2^-158 are exact at 2^-158: the sum is 2^-149; cut at
  // 2^-157 they would be 510·2^-158 and 0, truncated to 0.
  std::fill(a, a + 16, 0.0f), std::fill(b, b + 16, 0.0f);
  a[0] = 0x1.cp-78f, b[0] = 0x1.24p-72f, a[1] = 0x1p-79f, b[1] = 0x1p-79f;
  EXPECT_EQ(mma_k16(a, b, 0.0f), 0x1p-149f);
  EXPECT_EQ(mma_k16_generic(a, b, 0.0f, kMeasuredMmaModel), 0x1p-149f);
}

// Inputs for the tensor-core model's own tests: bf16 values of four kinds — 0: any finite bf16 (subnormals, sums
// past fp32's range); 1: one binade's worth around 1, random signs (cancellation); 2: wide but moderate exponents
// with ±0 among them; 3: mostly +0 — and running values c: ±0, ±inf, NaN, any fp32 value, or near the kind's values.
struct MmaInputs {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  static float bf16_bits(std::uint32_t hi) { return std::bit_cast<float>(hi << 16); }
  float value(int kind) {
    for (;;) {
      const auto r = static_cast<std::uint32_t>(next());
      const float moderate = bf16_bits((r & 0x807fu) | ((110u + (r >> 16) % 30) << 7));
      float x;
      if (kind == 0) x = bf16_bits(r & 0xffffu);
      else if (kind == 1) x = bf16_bits((r & 0x807fu) | ((124u + (r >> 16) % 8) << 7));  // |x| in [2^-3, 2^5)
      else if (kind == 2) x = (r & 7) == 0 ? ((r & 8) ? -0.0f : 0.0f) : moderate;
      else x = (r & 31) != 0 ? 0.0f : moderate;
      if (std::isfinite(x)) return x;
    }
  }
  float running(int kind) {
    const auto r = next();
    switch (r % 16) {
      case 0: return 0.0f;
      case 1: return -0.0f;
      case 2: return (r & 16) ? INFINITY : -INFINITY;
      case 3: return std::numeric_limits<float>::quiet_NaN();
      case 4: case 5: case 6: case 7: return std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32));  // any
      default: return value(kind) * (1.0f + std::ldexp(static_cast<float>(r >> 40 & 0xffff), -17));
    }
  }
  static bool same(float x, float y) {  // the same bits (any NaN for a NaN)
    return std::isnan(x) ? std::isnan(y) : std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
  }
};

// mma_k16 takes a shorter path for kMeasuredMmaModel (integer cuts, exponents from the bits): it must give the
// generic model's bits on every kind of input the twin meets (MmaInputs), with products that are all -0 (p̄ = +0
// against negative v, and c = -0), sums below or among fp32's subnormals (truncated to zero; cut no finer than
// 2^-158), subnormal operands and c whose exponents set emax, and an infinite p̄ or a NaN among the inputs
// (overflow). A path that rounds a cut term to nearest, forgets c's own exponent, takes a subnormal's exponent other
// than as the generic path does (first at case ~7·10^4), drops the 2^-158 floor (~1.3·10^5: it needs sums near
// 2^-149) or gives a zero the sign of its terms fails here. On a host with AVX2 the eight-lane form (session 32,
// what mma_k16 takes there) is held to the scalar path's bits on the same cases.
TEST(MmaModel, TheMeasuredPathIsTheGenericModel) {
  MmaInputs gen;
  int differ = 0, nonzero = 0, infinite = 0, overflow = 0, zero = 0, truncated = 0, negative_zero = 0, avx2_steps = 0;
  for (int i = 0; i < 300000 && differ < 5; ++i) {
    const int kind = i % 4;  // 3: a mostly +0, b negative: often every product is -0
    float a[16], b[16];
    for (int k = 0; k < 16; ++k) a[k] = gen.value(kind), b[k] = gen.value(kind);
    if (kind == 3)  // p̄ = +0 against negative v, as in the twin's P̄V: -0 products (+0 out, c = -0 or not)
      for (float& x : b) x = -std::fabs(x);
    if (i % 64 == 1) a[gen.next() % 16] = (i & 128) ? INFINITY : -INFINITY;  // an overflowed p̄ (large_logits)
    if (i % 64 == 2) b[gen.next() % 16] = std::numeric_limits<float>::quiet_NaN();
    if (i % 64 == 3 || i % 64 == 4)  // subnormal a against b near 1: the products' exponents set emax
      for (int k = 0; k < 16; ++k) {
        a[k] = MmaInputs::bf16_bits(static_cast<std::uint32_t>(gen.next()) & 0x807fu);
        b[k] = gen.value(1);
      }
    if (i % 64 == 5 || i % 64 == 6) {  // products below fp32's subnormals (about 2^-160): sums that truncate to ±0;
      const int at = i % 64 == 5 ? -80 : -72;  // or among them (2^-150..2^-134), where the 2^-158 floor of cuts shows
      for (int k = 0; k < 16; ++k) a[k] = std::ldexp(gen.value(1), at), b[k] = std::ldexp(gen.value(1), at);
    }
    float c = gen.running(kind);
    if (i % 64 == 5 || i % 64 == 6) c = (i & 64) ? -0.0f : 0.0f;
    if (i % 64 == 4) {  // a subnormal c beside two products below it with bits finer than its quantum
      std::fill(a + 2, a + 16, 0.0f);
      for (int k = 0; k < 2; ++k) b[k] = std::ldexp(gen.value(1), -20);
      c = std::bit_cast<float>((static_cast<std::uint32_t>(gen.next()) & 0x807fffffu) | 1u);
    }
    bool inputs_finite = std::isfinite(c);
    for (int k = 0; k < 16; ++k) inputs_finite = inputs_finite && std::isfinite(a[k]) && std::isfinite(b[k]);
    // mma_k16_measured itself: through mma_k16's dispatch, a dispatch that lost the fast path would test nothing
    const float fast = mma_k16_measured(a, b, c), slow = mma_k16_generic(a, b, c, kMeasuredMmaModel);
    EXPECT_TRUE(MmaInputs::same(mma_k16(a, b, c), fast)) << "mma_k16 dispatches to the measured path";
#if defined(ATTNCHECK_MMA_AVX2)
    // The AVX2 form (what mma_k16 takes on such hosts) against the scalar one, called directly: it takes every finite
    // step and leaves the non-finite ones to the scalar path's IEEE step.
    if (mma_detail::host_has_avx2()) {
      float lanes = -1.0f;
      const bool took = mma_detail::k16_measured_avx2(a, b, c, lanes);
      EXPECT_EQ(took, inputs_finite) << "case " << i;
      avx2_steps += took;
      if (took && !MmaInputs::same(lanes, fast) && ++differ <= 5)
        ADD_FAILURE() << "case " << i << ": AVX2 path " << lanes << ", scalar path " << fast << " (c = " << c << ")";
    }
#endif
    nonzero += fast != 0.0f;
    infinite += std::isinf(fast);
    overflow += inputs_finite && std::isinf(fast);
    zero += fast == 0.0f;
    truncated += i % 64 == 5 && fast == 0.0f;
    negative_zero += fast == 0.0f && std::signbit(fast);
    if (!MmaInputs::same(fast, slow)) {
      ++differ;
      ADD_FAILURE() << "case " << i << ": measured path " << fast << ", generic model " << slow << " (c = " << c << ")";
    }
  }
  EXPECT_GT(nonzero, 150000);      // the cases exercise sums,
  EXPECT_GT(infinite, 1000);       // infinite inputs,
  EXPECT_GT(overflow, 1000);       // finite sums past fp32's range,
  EXPECT_GT(zero, 20000);          // zero sums,
  EXPECT_GT(truncated, 1000);      // and sums that truncate to zero;
  EXPECT_EQ(negative_zero, 0);     // neither is ever -0 (the H100: EdgeInputsAsTheModelSays)
#if defined(ATTNCHECK_MMA_AVX2)
  if (mma_detail::host_has_avx2()) {
    EXPECT_GT(avx2_steps, 250000);  // the AVX2 form took the finite steps
  }
#endif
}

// The twin skips the k16 steps of the kernels' +0 padding to 64 or 128 (head dim, a tile's rows or keys: mma_dot
// over the unpadded length): the same bits as the whole chain, on every kind of input, with exact zero sums (a
// cancelling pair, all zero operands), a sum truncated to zero before the padding (below fp32's subnormals), an
// infinite or NaN running value reached before the padding, and lengths on and off multiples of 16.
TEST(MmaModel, ThePaddingStepsChangeNoBit) {
  MmaInputs gen;
  int differ = 0, zero = 0, truncated = 0, not_finite = 0;
  for (int i = 0; i < 40000 && differ < 5; ++i) {
    const int kind = i % 4, padded = (i & 4) ? 128 : 64, n = 1 + static_cast<int>(gen.next() % padded);
    std::vector<float> a(padded, 0.0f), b(padded, 0.0f);
    for (int k = 0; k < n; ++k) a[k] = gen.value(kind), b[k] = gen.value(kind);
    if (i % 16 == 5 && n >= 2) a[1] = a[0], b[1] = -b[0], std::fill(a.begin() + 2, a.begin() + n, 0.0f);  // 0 exactly
    if (i % 64 == 9) a[gen.next() % n] = INFINITY;
    if (i % 16 == 7)  // -1.5·2^-150 truncates to +0 (H100, H200)
      a[0] = 0x1.8p-75f, b[0] = -0x1p-75f, std::fill(a.begin() + 1, a.begin() + n, 0.0f);
    const float unpadded = mma_dot(a.data(), b.data(), n), whole = mma_dot(a.data(), b.data(), padded);
    zero += unpadded == 0.0f;
    truncated += i % 16 == 7 && unpadded == 0.0f;
    not_finite += !std::isfinite(unpadded);
    if (!MmaInputs::same(unpadded, whole)) {
      ++differ;
      ADD_FAILURE() << "case " << i << ": over " << n << " " << unpadded << ", over " << padded << " " << whole;
    }
  }
  EXPECT_GT(zero, 2000);
  EXPECT_GT(truncated, 100);
  EXPECT_GT(not_finite, 500);
}

// The twin differs from the CPU model only in the order of fp32 additions (tensor-core sums, lane order),
// so their bf16 outputs agree except near rounding boundaries (the GPU measured 99.98% against the model).
// With a bias (added as the model adds it) too. With a keep-mask, a row that sees no key is empty in both
// (O = 0, LSE = −inf), the paper's finite mask value notwithstanding.
TEST(CudaTwin, CloseToTheCpuModel) {
  for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
    const NumericsSpec spec = builtin_spec(cuda::variant_name(v));
    Agreement o;
    std::uint64_t seed = 77;
    int empty_rows = 0;
    for (const auto& [n_q, n_k, d, causal, keep_mask, bias] :
         {std::tuple{37, 100, 64, true, false, false}, std::tuple{130, 67, 128, false, false, false},
          std::tuple{64, 64, 40, false, false, false}, std::tuple{70, 150, 64, false, true, false},
          std::tuple{90, 130, 128, true, true, true}, std::tuple{80, 100, 64, false, false, true}}) {
      Problem p = make_problem(1, 2, 1, n_q, n_k, d, causal);
      p.has_mask = keep_mask;
      p.has_bias = bias;
      Instance in = random_instance(p, ++seed);
      if (keep_mask)
        for (int h = 0; h < p.heads_q; ++h)
          for (int j = 0; j < p.n_k; ++j) in.mask[p.score_at(0, h, 3, j)] = 0;  // row 3 sees no key
      for (const Instance& x : {in, with_tied_keys(in, 3)}) {
        const ForwardOutput tw = cuda::twin_forward(v, x), mo = model_forward(spec, x);
        o.add(tw.o, mo.o, Format::kBF16);
        if (!keep_mask) continue;
        for (int h = 0; h < p.heads_q; ++h) {
          ++empty_rows;
          EXPECT_EQ(tw.lse[p.row_at(0, h, 3)], -HUGE_VAL) << cuda::variant_name(v);
          EXPECT_EQ(mo.lse[p.row_at(0, h, 3)], -HUGE_VAL) << cuda::variant_name(v);
          for (int c = 0; c < d; ++c) EXPECT_EQ(tw.o[p.q_at(0, h, 3, c)], 0.0) << cuda::variant_name(v);
        }
      }
    }
    EXPECT_EQ(empty_rows, 8);
    std::printf("[twin] %s twin vs model: O %s\n", cuda::variant_name(v), o.describe().c_str());
    EXPECT_GE(o.rate(), 0.99) << cuda::variant_name(v) << ": " << o.describe();
  }
}

// fa2_lse_bound (gpu_test_support.h) holds the GPU's fp32 LSE of fa2 and fa2-fixed against the CPU model's, row by
// row, on the GPU tests' instances (CudaKernel.ForwardAgreesWithItsCpuModel, label gpu). The twin does the GPU's
// sums in the GPU's order (the tensor cores' k16 chains, the lanes' order), so its LSE differs from the model's as the
// GPU's does, up to the last bits of exp2f and logf (host's against MUFU's, which the bound allows for). Here, on the
// same instances, without a GPU: a bound that the twin breaks would fail on the GPU too, and the ratio printed
// predicts the GPU's (2026-12-05: the twin's largest differences, 6 and 4 fp32 ulps, are the H200's of session 26).
TEST(CudaTwin, LseWithinTheGpuBoundOfTheModel) {
  for (Variant v : {Variant::kFa2, Variant::kFa2Fixed}) {
    const NumericsSpec spec = builtin_spec(cuda::variant_name(v));
    LseBoundRatio r;
    std::size_t rows = 0;
    for (const Instance& in : gpu_test_instances(1000, false)) {
      const ForwardOutput tw = cuda::twin_forward(v, in), mo = model_forward(spec, in);
      ASSERT_EQ(tw.lse.size(), mo.lse.size());
      rows += tw.lse.size();
      add_lse_bound_ratio(in, tw.lse, mo.lse, r);
    }
    std::printf("[twin] %s twin vs model LSE: %zu of %zu rows differ, at most %.0f fp32 ulps, %.3f of fa2_lse_bound\n",
                cuda::variant_name(v), r.differ, rows, r.worst_ulps, r.worst);
    EXPECT_GT(r.differ, 0u) << "the twin's sums differ from the model's somewhere (else this test checks nothing)";
    EXPECT_LE(r.worst, 1.0) << cuda::variant_name(v);
  }
}

// near_tie_ladder (gpu_test_support.h) is what CudaFixedPolicy.TheThresholdSitsAtTheTolerance (label gpu) runs to
// pin the GPU's threshold: it can pin it only if moving the tolerance by half either way changes O. Here, in the
// twin: the rows whose shift decision (runner-up >= round(r − tol, S format), worked out from the ladder's exact
// scores) differs between 1e-3 and 0.5e-3, or 1e-3 and 1.5e-3, are exactly the rows whose O differs, and there are
// such rows on both sides, in both heads, for both fixed variants and both kernel head dims.
TEST(TwinFixedPolicy, TheNearTieLadderDecidesTheThreshold) {
  for (int d : {64, 128}) {
    const Instance in = near_tie_ladder(d, 4242);
    const Problem& p = in.problem;
    for (Variant v : {Variant::kFa2Fixed, Variant::kPaperFixed}) {
      const Format s_fmt = builtin_spec(cuda::variant_name(v)).s_fmt;
      const ForwardOutput at = cuda::twin_forward(v, in, 2.0f, 1e-3f);
      for (float other : {0.5e-3f, 1.5e-3f}) {
        const ForwardOutput moved = cuda::twin_forward(v, in, 2.0f, other);
        int decided[2] = {0, 0};
        for (int h = 0; h < p.heads_q; ++h)
          for (int i = 0; i < p.n_q; ++i) {
            const int c = i % 7;
            const double r = (h + 1) * 0x1.0p-4, runner = (h + 1) * (0x1.0p-4 - (c + 1) * 0x1.0p-12);
            const auto shifted = [&](double tol) { return runner >= round_to(r - static_cast<float>(tol), s_fmt); };
            const bool differs_by_rule = shifted(1e-3f) != shifted(other);
            bool o_differs = false;
            for (int x = 0; x < d; ++x) o_differs |= at.o[p.q_at(0, h, i, x)] != moved.o[p.q_at(0, h, i, x)];
            EXPECT_EQ(o_differs, differs_by_rule) << cuda::variant_name(v) << " d" << d << " tol " << other << " head "
                                                  << h << " row " << i;
            decided[h] += differs_by_rule;
          }
        EXPECT_GT(decided[0], 0) << cuda::variant_name(v) << " d" << d << " tol " << other;
        EXPECT_GT(decided[1], 0) << cuda::variant_name(v) << " d" << d << " tol " << other;
      }
    }
  }
}

// The twin's backward is the CPU model's with the tensor cores' sums (cuda_twin.h): δ is the model's bit for bit
// (no sum of the tensor cores in it), and the gradients differ only where a sum's order moved a bf16 rounding:
// rarely (a few fp32 ulps against a bf16 ulp, 2^-8: well under 1% of elements; >= 98% asserted, a broken stride or
// tile in the twin's sums would leave far fewer). Its agreement with the GPU: cuda_kernels_test (label gpu).
TEST(CudaTwin, BackwardCloseToTheCpuModel) {
  for (Variant v : {Variant::kFa2, Variant::kPaperFixed}) {
    const NumericsSpec spec = builtin_spec(cuda::variant_name(v));
    BackwardAgreement a;
    std::uint64_t seed = 91;
    for (const auto& [n_q, n_k, d, causal] : {std::tuple{37, 100, 64, true}, std::tuple{130, 67, 128, false},
                                              std::tuple{64, 64, 40, false}}) {
      const Instance in = random_instance(make_problem(1, 2, 1, n_q, n_k, d, causal), ++seed);
      const ForwardOutput fw = model_forward(spec, in);
      a.add(cuda::twin_backward(v, in, fw), model_backward(spec, in, fw), spec.delta_fmt);
    }
    std::printf("[twin] %s backward twin vs model: %s\n", cuda::variant_name(v), a.describe().c_str());
    EXPECT_EQ(a.delta.rate(), 1.0) << a.delta.describe();
    EXPECT_GE(a.dq.rate(), 0.98);
    EXPECT_GE(a.dk.rate(), 0.98);
    EXPECT_GE(a.dv.rate(), 0.98);
    EXPECT_LT(a.dq.rate() * a.dk.rate() * a.dv.rate(), 1.0)
        << "the twin's sums should differ from sequential fp32 somewhere";
  }
}

}  // namespace
}  // namespace attncheck::test
