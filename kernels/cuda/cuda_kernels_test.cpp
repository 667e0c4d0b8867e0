// cuda_kernels_test.cpp — the CUDA kernels against their CPU models (bitwise-agreement rate, max ulp), against
// the fp64 reference under FlashAttention's rule, for determinism, batching, the NaN-poison guard check, and the
// forward's work splits (FwdTiling) against the default split, bit for bit.
// Label gpu: every test skips without a CUDA device. Run: ctest -L gpu   (or build-e/kernels/cuda/cuda_kernels_test)
// The agreement numbers are printed and recorded as gtest properties (ci/gpu.sh collects them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/plain_attention.h"
#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_twin.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/cuda/gpu_test_support.h"
#include "kernels/cuda/host_packing.h"
#include "kernels/numerics_spec.h"
#include "reference/accuracy.h"
#include "reference/reference.h"

namespace attncheck::test {
namespace {

using cuda::Variant;

std::vector<Instance> instances(bool with_d_o) { return gpu_test_instances(1000, with_d_o); }

class CudaKernel : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
  std::string name() const { return cuda::variant_name(GetParam()); }
  bool paper() const { return GetParam() == Variant::kPaper || GetParam() == Variant::kPaperFixed; }
};

TEST_P(CudaKernel, ForwardAgreesWithItsCpuModel) {
  auto k = cuda::make_cuda_kernel(GetParam());
  const NumericsSpec spec = builtin_spec(name());
  Agreement o, lse;
  LseBoundRatio lse_ratio;  // fa2, fa2-fixed: the largest |Δ LSE| / fa2_lse_bound
  for (const Instance& in : instances(false)) {
    const ForwardOutput got = k->forward(in), want = model_forward(spec, in);
    o.add(got.o, want.o, Format::kBF16);
    lse.add(got.lse, want.lse, spec.lse_fmt);
    if (!paper()) add_lse_bound_ratio(in, got.lse, want.lse, lse_ratio);
  }
  std::printf("[agreement] cuda:%s forward vs model: O %s; LSE %s\n", name().c_str(), o.describe().c_str(),
              lse.describe().c_str());
  RecordProperty("o_bitwise_rate", std::to_string(o.rate()));
  RecordProperty("o_max_ulp", std::to_string(o.max_ulp));
  // Differences come only from the order of fp32 additions inside the tensor cores and the quad reductions
  // (TENSOR_CORES.md) and from exp2f/expf/logf last-bit differences: each perturbs fp32 values by a few fp32
  // ulps (2^-24 relative), which flips a bf16 rounding (2^-8 relative) only near a rounding boundary: rarely,
  // and then by one bf16 ulp of the value that rounding produced. fa2 rounds once at the end (one ulp of O). The
  // paper re-rounds the running output and row sum in bf16 at every key tile (up to 4 tiles here), so one flipped
  // rounding can carry through each later one: up to about one ulp of the running partial per tile. Neither is
  // asserted: they are ulps of partials, not of the output element (below).
  // The rate is the contract (the goal is a CPU twin bit-identical on >= 99% of outputs); the paper's extra
  // roundings give more boundaries to flip: 95%. max_ulp is reported, not bounded: it is measured in ulps of
  // the expected element, and an output near 0 (cancellation in Σ p̄·v) has a tiny ulp, so one flipped
  // rounding of a large partial shows as many ulps there (measured: 10 ulp at 99.98% agreement, fa2).
  EXPECT_GE(o.rate(), paper() ? 0.95 : 0.99) << o.describe();
  // LSE, fp32 (fa2, fa2-fixed): within fa2_lse_bound of the model's, row by row (derived there). bf16 (paper): one
  // flipped rounding each of log l and of the sum, 2 ulps, doubled for the carry of the first into the second: 4.
  if (paper()) EXPECT_LE(lse.max_ulp, 4.0) << lse.describe();
  else EXPECT_LE(lse_ratio.worst, 1.0) << "largest |ΔLSE| / fa2_lse_bound; " << lse.describe();
  std::printf("[agreement] cuda:%s LSE: largest difference %.3g of its derived bound\n", name().c_str(),
              lse_ratio.worst);
}

TEST_P(CudaKernel, ForwardAgreesWithItsCpuTwin) {
  auto k = cuda::make_cuda_kernel(GetParam());
  Agreement o, lse;
  for (const Instance& in : instances(false)) {
    const ForwardOutput got = k->forward(in), want = cuda::twin_forward(GetParam(), in);
    o.add(got.o, want.o, Format::kBF16);
    lse.add(got.lse, want.lse, paper() ? Format::kBF16 : Format::kF32);
  }
  std::printf("[agreement] cuda:%s forward vs CPU twin (cuda_twin.h): O %s; LSE %s\n", name().c_str(),
              o.describe().c_str(), lse.describe().c_str());
  RecordProperty("twin_o_bitwise_rate", std::to_string(o.rate()));
  // The twin copies every operation but the GPU's exp2f/expf/logf (MUFU, <= 2 fp32 ulps vs the host's libm),
  // whose last-bit differences reach a bf16 output only near a rounding boundary: >= 99.9% (the goal is 99%).
  EXPECT_GE(o.rate(), 0.999) << o.describe();
}

TEST_P(CudaKernel, ForwardMeetsFlashAttentionRule) {
  auto k = cuda::make_cuda_kernel(GetParam());
  for (const Instance& in : instances(false)) {
    const ForwardOutput got = k->forward(in), plain = plain_forward(in);
    const ReferenceForward exact = reference_forward(in);
    // paper: kPaperFactorO and kPaperLseFloorScale derived in kernels/cpu/test_support.h (same numerics).
    const AccuracyCheck co = accuracy_rule(got.o, plain.o, exact.o, paper() ? kPaperFactorO : 2.0);
    const AccuracyCheck cl = accuracy_rule(got.lse, plain.lse, exact.lse, 2.0,
                                           paper() ? kPaperLseFloorScale : kDefaultFloorScale);
    EXPECT_TRUE(co.ok) << in.problem.describe() << " O: " << co.message;
    EXPECT_TRUE(cl.ok) << in.problem.describe() << " LSE: " << cl.message;
  }
}

// The GPU's backward against `want` (the CPU model or the twin), both from the GPU's own O and LSE.
template <class Want>
BackwardAgreement backward_agreement(const Kernel& k, Format delta_fmt, Want&& want) {
  BackwardAgreement a;
  for (const Instance& in : instances(true)) {
    const ForwardOutput fwd = k.forward(in);
    a.add(k.backward(in, fwd), want(in, fwd), delta_fmt);
  }
  return a;
}

TEST_P(CudaKernel, BackwardAgreesWithItsCpuModel) {
  auto k = cuda::make_cuda_kernel(GetParam());
  const NumericsSpec spec = builtin_spec(name());
  const BackwardAgreement a = backward_agreement(
      *k, spec.delta_fmt, [&](const Instance& in, const ForwardOutput& fwd) { return model_backward(spec, in, fwd); });
  std::printf("[agreement] cuda:%s backward vs model: %s\n", name().c_str(), a.describe().c_str());
  // δ is computed in the model's exact order (one thread per row): bit-identical.
  EXPECT_EQ(a.delta.rate(), 1.0) << a.delta.describe();
  // Gradients: the same few-fp32-ulp order differences as the forward, on sums with cancellation (dS has both
  // signs), so a flipped bf16 rounding is more frequent; still a minority of elements.
  EXPECT_GE(a.dv.rate(), 0.90) << a.dv.describe();
  EXPECT_GE(a.dq.rate(), 0.90) << a.dq.describe();
  EXPECT_GE(a.dk.rate(), 0.90) << a.dk.describe();
}

TEST_P(CudaKernel, BackwardAgreesWithItsCpuTwin) {
  auto k = cuda::make_cuda_kernel(GetParam());
  const BackwardAgreement a =
      backward_agreement(*k, builtin_spec(name()).delta_fmt, [&](const Instance& in, const ForwardOutput& fwd) {
        return cuda::twin_backward(GetParam(), in, fwd);
      });
  std::printf("[agreement] cuda:%s backward vs CPU twin (cuda_twin.h): %s\n", name().c_str(), a.describe().c_str());
  RecordProperty("twin_dq_bitwise_rate", std::to_string(a.dq.rate()));
  EXPECT_EQ(a.delta.rate(), 1.0) << a.delta.describe();
  // The twin has the kernel's sums (mma_model.h) and the model's steps; what remains is the GPU's exp2f/expf
  // (<= 2 fp32 ulps) moving a bf16 rounding of p or dS, then carried into a sum: >= 99.9%, as for the forward.
  EXPECT_GE(a.dq.rate(), 0.999) << a.dq.describe();
  EXPECT_GE(a.dk.rate(), 0.999) << a.dk.describe();
  EXPECT_GE(a.dv.rate(), 0.999) << a.dv.describe();
}

TEST_P(CudaKernel, BackwardMeetsFlashAttentionRule) {
  auto k = cuda::make_cuda_kernel(GetParam());
  for (const Instance& in : instances(true)) {
    const ForwardOutput fwd = k->forward(in);
    const BackwardOutput got = k->backward(in, fwd), plain = plain_backward(in);
    const ReferenceBackward exact = reference_backward(in);
    const Problem& p = in.problem;
    if (p.n_k == 1) {
      // Degenerate for the rule: with one key p = 1 and O = V exactly, so the exact dS = dP − δ = 0 and exact
      // dQ = dK = 0, as is plain's; the rule's floor (relative to max|exact| = 0) is 0. The kernel's dP comes
      // from the tensor cores and δ from a sequential fp32 sum (FA2 does the same), which differ by a few
      // fp32 ulps of Σ|dO_c·v_c|: measured dQ −2.7e-7 here. Bound that instead: |dP − δ| <= 2·d·2^-24·Σ|dO·v|
      // (two summation orders of d terms, Higham 4.4), |dQ| = scale·|dS|·|k|, plus one bf16 ulp of the result.
      double sum_abs = 0, max_k = 0;
      for (int c = 0; c < p.head_dim; ++c) sum_abs += std::fabs(in.d_o[c] * in.v[c]), max_k = std::max(max_k, std::fabs(in.k[c]));
      const double ds_bound = 2.0 * p.head_dim * 0x1.0p-24 * sum_abs;
      const double dq_bound = p.scale * ds_bound * max_k * (1 + 0x1.0p-7);
      for (double x : got.dq) EXPECT_LE(std::fabs(x), dq_bound) << p.describe() << " dQ with one key";
      continue;
    }
    // dK, dV are fp32 sums over n_q rows of every query head of the kv head's group, n_q·group terms
    // (fp32_accumulation_floor_scale derives the floor; builtin_kernels_test counts them the same); dQ over n_k keys.
    const double fq = fp32_accumulation_floor_scale(p.n_k);
    const double fkv = fp32_accumulation_floor_scale(std::size_t(p.n_q) * p.group());
    const double factor = paper() ? kPaperFactorGrad : 2.0;  // kernels/cpu/test_support.h
    const AccuracyCheck cq = accuracy_rule(got.dq, plain.dq, exact.dq, factor, fq);
    const AccuracyCheck ck = accuracy_rule(got.dk, plain.dk, exact.dk, factor, fkv);
    const AccuracyCheck cv = accuracy_rule(got.dv, plain.dv, exact.dv, factor, fkv);
    EXPECT_TRUE(cq.ok) << p.describe() << " dQ: " << cq.message;
    EXPECT_TRUE(ck.ok) << p.describe() << " dK: " << ck.message;
    EXPECT_TRUE(cv.ok) << p.describe() << " dV: " << cv.message;
  }
}

TEST_P(CudaKernel, SameInputSameBits) {
  auto k = cuda::make_cuda_kernel(GetParam());
  for (const Instance& in : instances(true)) {
    const ForwardOutput a = k->forward(in), b = k->forward(in);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.lse, b.lse);
    const BackwardOutput ga = k->backward(in, a), gb = k->backward(in, a);
    EXPECT_EQ(ga.dq, gb.dq);
    EXPECT_EQ(ga.dk, gb.dk);
    EXPECT_EQ(ga.dv, gb.dv);
  }
}

TEST_P(CudaKernel, ForwardManyEqualsForward) {
  expect_forward_many_equals_forward(*cuda::make_cuda_kernel(GetParam()), instances(false));
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaKernel,
                         ::testing::Values(Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed,
                                           Variant::kFa2Psum),
                         [](const auto& info) { return gtest_name(cuda::variant_name(info.param)); });

// The fixed policy's "more than one score >= thr" is decided from the row's top two scores, except where
// thr = −inf (tolerance = inf): then keys past n_k (held as −inf) would pass too, and tail tiles count their
// existing keys instead. tol = inf shifts every tile with two or more keys in a row; the shapes include
// last tiles with a single key (n_k = 1, 129), where a wrong count would shift and change O.
TEST(CudaFixedPolicy, InfiniteToleranceCountsOnlyExistingKeys) {
  ATTN_SKIP_WITHOUT_GPU();
  for (Variant v : {Variant::kFa2Fixed, Variant::kPaperFixed}) {
    const auto k = cuda::make_cuda_kernel(v, 2.0f, INFINITY);
    NumericsSpec spec = builtin_spec(cuda::variant_name(v));
    spec.max_policy.tolerance = HUGE_VAL;
    Agreement o;
    for (const Instance& in : instances(false)) o.add(k->forward(in).o, model_forward(spec, in).o, Format::kBF16);
    std::printf("[agreement] %s tol=inf forward vs model: O %s\n", k->name().c_str(), o.describe().c_str());
    // Same derivation and bounds as ForwardAgreesWithItsCpuModel (only the tie rule's threshold changed).
    EXPECT_GE(o.rate(), v == Variant::kPaperFixed ? 0.95 : 0.99) << o.describe();
  }
}

// The fixed policy's threshold itself: thr = round(r − tolerance, S format), counted with >=. near_tie_ladder puts
// a runner-up 0.24 to 3.4 tolerances below each row's max, so the rows on either side of the threshold sit side by
// side; moving the threshold half a tolerance either way changes O in some rows of each head (TwinFixedPolicy in
// cuda_twin_test checks that on the twin, where it runs in CI). Here the GPU must give the twin's O with the rate
// ForwardAgreesWithItsCpuTwin holds (>= 99.9%: only exp2f differs). LSE is printed, not held: logf's last bits
// differ in ~10% of fa2's rows against the twin (CudaShapes). Before this test a threshold of r − tolerance/2
// (mutation testing, session 22) passed every GPU test and suite: none put a runner-up between half a tolerance and a
// tolerance below a row's max.
TEST(CudaFixedPolicy, TheThresholdSitsAtTheTolerance) {
  ATTN_SKIP_WITHOUT_GPU();
  for (int d : {64, 128}) {
    const Instance in = near_tie_ladder(d, 4242);
    for (Variant v : {Variant::kFa2Fixed, Variant::kPaperFixed}) {
      const ForwardOutput got = cuda::make_cuda_kernel(v)->forward(in), want = cuda::twin_forward(v, in);
      Agreement o, lse;
      o.add(got.o, want.o, Format::kBF16);
      lse.add(got.lse, want.lse, builtin_spec(cuda::variant_name(v)).lse_fmt);
      std::printf("[threshold] %s d%d near-tie ladder vs twin: O %s; LSE %s\n", cuda::variant_name(v), d,
                  o.describe().c_str(), lse.describe().c_str());
      EXPECT_GE(o.rate(), 0.999) << cuda::variant_name(v) << " d" << d << " O: " << o.describe();
    }
  }
}

// A launch's shape, scale and causal flag for problem p (the tests below fill in the device pointers).
cuda::FwdParams fwd_params_of(const Problem& p) {
  cuda::FwdParams f;
  f.batch = p.batch, f.heads_q = p.heads_q, f.heads_kv = p.heads_kv, f.n_q = p.n_q, f.n_k = p.n_k;
  f.scale = static_cast<float>(p.scale);
  f.scale_log2e = static_cast<float>(static_cast<double>(f.scale) * 1.4426950408889634);
  f.causal = p.causal;
  return f;
}

// Every work split of the forward (FwdTiling) runs each row through the same per-tile steps in the same order
// (only which warp holds a row differs), so O and LSE must equal the default split's bit for bit: no tolerance.
// Shapes: the GPU test instances, plus long key sequences (runs of unmasked tiles between masked diagonal and tail
// tiles, fa2's causal tile skip, GQA, n_q != n_k); each also with Q ×32 (exact in bf16), which drives exp2
// arguments below −126 (exp2f's subnormal fix-up) and makes α = 1 rare. A new split (FwdTiling) belongs in the list.
std::string split_name(cuda::FwdTiling t) {
  static const char* const kNames[] = {"default", "w16q4", "w16q8", "w32smem", "w32regs", "wgmma64", "wgmma128",
                                       "wgmma192"};
  return kNames[static_cast<int>(t)];
}

class CudaFwdTiling : public ::testing::TestWithParam<cuda::FwdTiling> {
 protected:
  void SetUp() override {
    ATTN_SKIP_WITHOUT_GPU();
    const bool wgmma = GetParam() >= cuda::FwdTiling::kWgmma64;
    if (wgmma && !cuda::fwd_has_wgmma()) GTEST_SKIP() << "built without sm_90a: no wgmma splits";
  }
};

TEST_P(CudaFwdTiling, GivesTheDefaultSplitsBits) {
  std::vector<Instance> ins = instances(false);
  const std::vector<Problem> longer = {make_problem(1, 2, 1, 300, 1000, 128, true),
                                       make_problem(1, 2, 2, 257, 777, 128, false),
                                       make_problem(2, 2, 1, 190, 1100, 64, true),
                                       make_problem(1, 1, 1, 129, 1024, 64, false),
                                       make_problem(1, 1, 1, 300, 10, 64, true)};  // blocks with no key tile
  std::uint64_t seed = 77;
  for (const Problem& p : longer) ins.push_back(random_instance(p, ++seed));
  const std::size_t n_plain = ins.size();
  for (std::size_t i = 0; i < n_plain; ++i) {
    Instance hot = ins[i];
    for (double& x : hot.q) x *= 32.0;
    ins.push_back(hot);
  }
  std::size_t compared = 0, differ = 0;
  for (const Instance& in : ins) {
    const Problem& p = in.problem;
    const int d = p.head_dim, kd = cuda::padded_dim(d);
    std::vector<std::uint16_t> hq(p.q_size() / d * kd), hk(p.kv_size() / d * kd), hv(hk.size());
    cuda::pack_rows(in.q, d, kd, hq.data(), "test", "Q");
    cuda::pack_rows(in.k, d, kd, hk.data(), "test", "K");
    cuda::pack_rows(in.v, d, kd, hv.data(), "test", "V");
    cuda::DeviceBuffer<std::uint16_t> dq(hq.size()), dk(hk.size()), dv(hv.size()), o(hq.size());
    cuda::DeviceBuffer<float> lse(p.rows());
    dq.upload(hq), dk.upload(hk), dv.upload(hv);
    cuda::FwdParams f = fwd_params_of(p);
    f.q = dq.get(), f.k = dk.get(), f.v = dv.get(), f.o = o.get(), f.lse = lse.get();
    for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
      auto run = [&](cuda::FwdTiling t) {
        ATTN_CUDA_CHECK(cudaMemset(o.get(), 0xff, hq.size() * 2));  // poison: an unwritten element differs
        ATTN_CUDA_CHECK(cudaMemset(lse.get(), 0xff, p.rows() * 4));
        cuda::launch_flash_fwd(v, kd, f, nullptr, t);
        ATTN_CUDA_CHECK(cudaDeviceSynchronize());
        return std::make_pair(o.download(), lse.download());
      };
      const auto want = run(cuda::FwdTiling::kDefault), got = run(GetParam());
      std::size_t bad = 0;
      for (std::size_t r = 0; r < p.rows(); ++r)
        for (int c = 0; c < d; ++c) bad += got.first[r * kd + c] != want.first[r * kd + c];
      for (std::size_t r = 0; r < p.rows(); ++r)
        bad += std::memcmp(&got.second[r], &want.second[r], sizeof(float)) != 0;
      compared += p.rows() * (d + 1), differ += bad;
      EXPECT_EQ(bad, 0u) << cuda::variant_name(v) << " " << p.describe();
    }
  }
  std::printf("[tiling] %s vs default: %zu of %zu O/LSE values differ\n", split_name(GetParam()).c_str(), differ,
              compared);
}

INSTANTIATE_TEST_SUITE_P(Splits, CudaFwdTiling,
                         ::testing::Values(cuda::FwdTiling::kWarp16Q4, cuda::FwdTiling::kWarp16Q8,
                                           cuda::FwdTiling::kWarp32Smem, cuda::FwdTiling::kWarp32Regs,
                                           cuda::FwdTiling::kWgmma64, cuda::FwdTiling::kWgmma128,
                                           cuda::FwdTiling::kWgmma192),
                         [](const auto& info) { return split_name(info.param); });

// The backward's work splits (BwdTiling) promise the default split's bits (flash_bwd.h: the per-element order of
// operations does not depend on the split), as the forward's do; until session 22 no test, benchmark or caller ran a
// split other than the default. Each split's δ, dQ, dK, dV against the default's, bit for bit, from the default
// forward's O and LSE, every variant, on the GPU test shapes without a keep-mask or bias (the splits share the mask
// code with the default; those shapes run through the Kernel interface, which takes the default) plus two longer
// ones; the outputs poisoned (0xFF bytes) before each launch, so an element a split leaves unwritten differs.
std::string bwd_split_name(cuda::BwdTiling t) {
  static const char* const kNames[] = {"default", "k64r128", "k128r128", "k64r64", "k128r64", "k64r128ilp"};
  return kNames[static_cast<int>(t)];
}

class CudaBwdTiling : public ::testing::TestWithParam<cuda::BwdTiling> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaBwdTiling, GivesTheDefaultSplitsBits) {
  std::vector<Instance> ins;
  for (const Instance& in : instances(true))
    if (!in.problem.has_mask && !in.problem.has_bias) ins.push_back(in);
  std::uint64_t seed = 91;
  for (const Problem& p : {make_problem(1, 4, 1, 300, 257, 128, true), make_problem(2, 2, 2, 190, 333, 64, false)})
    ins.push_back(random_instance(p, ++seed));
  std::size_t compared = 0, differ = 0;
  for (const Instance& in : ins) {
    const Problem& p = in.problem;
    const int d = p.head_dim, kd = cuda::padded_dim(d);
    const std::size_t q_rows = p.q_size() / d, kv_rows = p.kv_size() / d;
    std::vector<std::uint16_t> hq(q_rows * kd), hdo(hq.size()), hk(kv_rows * kd), hv(hk.size());
    cuda::pack_rows(in.q, d, kd, hq.data(), "test", "Q");
    cuda::pack_rows(in.d_o, d, kd, hdo.data(), "test", "dO");
    cuda::pack_rows(in.k, d, kd, hk.data(), "test", "K");
    cuda::pack_rows(in.v, d, kd, hv.data(), "test", "V");
    cuda::DeviceBuffer<std::uint16_t> dq_in(hq.size()), ddo(hq.size()), dk_in(hk.size()), dv_in(hv.size()), o(hq.size());
    const std::size_t per_head_kv = std::size_t(p.batch) * p.heads_q * p.n_k * kd;  // GQA's dK, dV per query head
    cuda::DeviceBuffer<std::uint16_t> dq(hq.size()), dk(hk.size()), dv(hv.size()), dkh(per_head_kv), dvh(per_head_kv);
    cuda::DeviceBuffer<float> lse(p.rows()), delta(p.rows());
    dq_in.upload(hq), ddo.upload(hdo), dk_in.upload(hk), dv_in.upload(hv);
    cuda::FwdParams f = fwd_params_of(p);
    f.q = dq_in.get(), f.k = dk_in.get(), f.v = dv_in.get(), f.o = o.get(), f.lse = lse.get();
    cuda::BwdParams b;
    b.q = f.q, b.k = f.k, b.v = f.v, b.o = f.o, b.d_o = ddo.get(), b.lse = f.lse, b.delta = delta.get();
    b.dq = dq.get(), b.dk = dk.get(), b.dv = dv.get(), b.dk_head = dkh.get(), b.dv_head = dvh.get();
    b.batch = p.batch, b.heads_q = p.heads_q, b.heads_kv = p.heads_kv, b.n_q = p.n_q, b.n_k = p.n_k;
    b.scale = f.scale, b.scale_log2e = f.scale_log2e, b.causal = p.causal;
    for (Variant v : {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed, Variant::kFa2Psum}) {
      cuda::launch_flash_fwd(v, kd, f, nullptr);
      struct Grads {
        std::vector<std::uint16_t> dq, dk, dv;
        std::vector<float> delta;
      };
      auto run = [&](cuda::BwdTiling t) {
        for (cuda::DeviceBuffer<std::uint16_t>* g : {&dq, &dk, &dv})
          ATTN_CUDA_CHECK(cudaMemset(g->get(), 0xff, g->size() * 2));
        ATTN_CUDA_CHECK(cudaMemset(delta.get(), 0xff, p.rows() * 4));
        cuda::BwdParams bt = b;
        bt.tiling = t;
        cuda::launch_flash_bwd(v, kd, bt, nullptr);
        ATTN_CUDA_CHECK(cudaDeviceSynchronize());
        return Grads{dq.download(), dk.download(), dv.download(), delta.download()};
      };
      const Grads want = run(cuda::BwdTiling::kDefault), got = run(GetParam());
      std::size_t bad = 0;
      for (std::size_t r = 0; r < q_rows; ++r)
        for (int c = 0; c < d; ++c) bad += got.dq[r * kd + c] != want.dq[r * kd + c];
      for (std::size_t r = 0; r < kv_rows; ++r)
        for (int c = 0; c < d; ++c)
          bad += (got.dk[r * kd + c] != want.dk[r * kd + c]) + (got.dv[r * kd + c] != want.dv[r * kd + c]);
      bad += std::memcmp(got.delta.data(), want.delta.data(), p.rows() * sizeof(float)) != 0;
      compared += q_rows * d + 2 * kv_rows * d + 1, differ += bad;
      EXPECT_EQ(bad, 0u) << cuda::variant_name(v) << " " << p.describe();
    }
  }
  std::printf("[bwd tiling] %s vs default: %zu of %zu dQ/dK/dV values (and δ per shape) differ\n",
              bwd_split_name(GetParam()).c_str(), differ, compared);
}

INSTANTIATE_TEST_SUITE_P(Splits, CudaBwdTiling,
                         ::testing::Values(cuda::BwdTiling::kKeys128Rows128, cuda::BwdTiling::kKeys64Rows64,
                                           cuda::BwdTiling::kKeys128Rows64, cuda::BwdTiling::kKeys64Rows128Ilp),
                         [](const auto& info) { return bwd_split_name(info.param); });

// forward_many's throughput is a benchmark, not a test: kernels/cuda/bench_forward_many.cpp.

// An LCG's next value in [−1, 1), truncated to bf16 bits (the long-batch tests' inputs).
std::uint16_t lcg_bf16_in_pm1(std::uint32_t& state) {
  state = state * 1664525u + 1013904223u;
  const float f = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

// Batches past gridDim.z's 65,535 run in slices, and each slice must read its own keep-mask and bias (regression:
// the slices after the first read the first slice's). The last batch hides key 0 and biases key 1 in every row;
// it, and batch 0, must give in the long launch exactly what they give launched alone.
TEST(CudaLaunch, LongBatchSlicesCarryMaskAndBias) {
  ATTN_SKIP_WITHOUT_GPU();
  const int batch = 65535 + 2, n = 4, kd = 64;
  const std::size_t per_b = std::size_t(n) * kd, per_s = std::size_t(n) * n;
  std::vector<std::uint16_t> hq(batch * per_b), hk(hq.size()), hv(hq.size());
  std::uint32_t state = 12345;
  for (std::vector<std::uint16_t>* h : {&hq, &hk, &hv})
    for (std::uint16_t& e : *h) e = lcg_bf16_in_pm1(state);
  std::vector<std::uint8_t> hm(batch * per_s, 1);
  std::vector<float> hb(batch * per_s, 0.f);
  for (int i = 0; i < n; ++i) hm[(batch - 1) * per_s + i * n] = 0, hb[(batch - 1) * per_s + i * n + 1] = 3.f;
  cuda::DeviceBuffer<std::uint16_t> dq(hq.size()), dk(hk.size()), dv(hv.size()), o(hq.size());
  cuda::DeviceBuffer<std::uint8_t> dm(hm.size());
  cuda::DeviceBuffer<float> db(hb.size()), lse(std::size_t(batch) * n);
  dq.upload(hq), dk.upload(hk), dv.upload(hv), dm.upload(hm), db.upload(hb);
  cuda::FwdParams f;
  f.q = dq.get(), f.k = dk.get(), f.v = dv.get(), f.o = o.get(), f.lse = lse.get();
  f.mask = dm.get(), f.bias = db.get();
  f.batch = batch, f.n_q = f.n_k = n, f.scale = 0.125f, f.scale_log2e = 0.125f * 1.44269504f;
  cuda::launch_flash_fwd(Variant::kFa2, kd, f, nullptr);
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<std::uint16_t> all_o = o.download();
  const std::vector<float> all_lse = lse.download();
  for (const int b : {0, batch - 1}) {
    cuda::DeviceBuffer<std::uint16_t> o1(per_b);
    cuda::DeviceBuffer<float> lse1(n);
    cuda::FwdParams g = f;
    g.batch = 1, g.o = o1.get(), g.lse = lse1.get();
    g.q += b * per_b, g.k += b * per_b, g.v += b * per_b, g.mask += b * per_s, g.bias += b * per_s;
    cuda::launch_flash_fwd(Variant::kFa2, kd, g, nullptr);
    ATTN_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<std::uint16_t> one_o = o1.download();
    const std::vector<float> one_lse = lse1.download();
    EXPECT_TRUE(std::equal(one_o.begin(), one_o.end(), all_o.begin() + b * per_b)) << "batch " << b;
    EXPECT_EQ(std::memcmp(one_lse.data(), all_lse.data() + std::size_t(b) * n, n * sizeof(float)), 0) << "batch " << b;
  }
}

// The backward slices long batches the same way: every tensor of a slice (Q, K, V, O, dO, LSE, δ, the gradients,
// keep-mask, bias) is that slice's; the workspaces are reused. Two query heads share one K/V head (GQA); the
// last batch hides key 0 and biases key 1. Batch 0 and the last batch must give in the long launch exactly what
// they give launched alone (δ, dQ, dK, dV bitwise).
TEST(CudaLaunch, LongBatchBackwardSlices) {
  ATTN_SKIP_WITHOUT_GPU();
  const int batch = 65535 + 2, n = 4, kd = 64, hq = 2;
  const std::size_t q_b = std::size_t(hq) * n * kd, kv_b = std::size_t(n) * kd, s_b = std::size_t(hq) * n * n;
  std::uint32_t state = 777;
  std::vector<std::uint16_t> hqv(batch * q_b), hdo(batch * q_b), hk(batch * kv_b), hv(batch * kv_b);
  for (std::vector<std::uint16_t>* h : {&hqv, &hdo, &hk, &hv})
    for (std::uint16_t& e : *h) e = lcg_bf16_in_pm1(state);
  std::vector<std::uint8_t> hm(batch * s_b, 1);
  std::vector<float> hb(batch * s_b, 0.f);
  for (std::size_t r = 0; r < std::size_t(hq) * n; ++r) hm[(batch - 1) * s_b + r * n] = 0, hb[(batch - 1) * s_b + r * n + 1] = 3.f;
  cuda::DeviceBuffer<std::uint16_t> q(hqv.size()), d_o(hdo.size()), k(hk.size()), v(hv.size()), o(hqv.size());
  cuda::DeviceBuffer<std::uint16_t> dq(hqv.size()), dk(hk.size()), dv(hv.size()), dkh(batch * q_b), dvh(batch * q_b);
  cuda::DeviceBuffer<std::uint8_t> m(hm.size());
  cuda::DeviceBuffer<float> bias(hb.size()), lse(std::size_t(batch) * hq * n), delta(std::size_t(batch) * hq * n);
  q.upload(hqv), d_o.upload(hdo), k.upload(hk), v.upload(hv), m.upload(hm), bias.upload(hb);
  cuda::FwdParams f;
  f.q = q.get(), f.k = k.get(), f.v = v.get(), f.o = o.get(), f.lse = lse.get(), f.mask = m.get(), f.bias = bias.get();
  f.batch = batch, f.heads_q = hq, f.heads_kv = 1, f.n_q = f.n_k = n;
  f.scale = 0.125f, f.scale_log2e = 0.125f * 1.44269504f;
  cuda::launch_flash_fwd(Variant::kFa2, kd, f, nullptr);
  cuda::BwdParams bp;
  bp.q = f.q, bp.k = f.k, bp.v = f.v, bp.o = f.o, bp.d_o = d_o.get(), bp.lse = f.lse, bp.delta = delta.get();
  bp.dq = dq.get(), bp.dk = dk.get(), bp.dv = dv.get(), bp.dk_head = dkh.get(), bp.dv_head = dvh.get();
  bp.mask = f.mask, bp.bias = f.bias, bp.batch = batch, bp.heads_q = hq, bp.heads_kv = 1, bp.n_q = bp.n_k = n;
  bp.scale = f.scale, bp.scale_log2e = f.scale_log2e;
  cuda::launch_flash_bwd(Variant::kFa2, kd, bp, nullptr);
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<std::uint16_t> all_dq = dq.download(), all_dk = dk.download(), all_dv = dv.download();
  const std::vector<float> all_delta = delta.download();
  for (const int b : {0, batch - 1}) {
    cuda::DeviceBuffer<std::uint16_t> dq1(q_b), dk1(kv_b), dv1(kv_b), dkh1(q_b), dvh1(q_b);
    cuda::DeviceBuffer<float> delta1(std::size_t(hq) * n);
    cuda::BwdParams g = bp;
    g.batch = 1, g.dq = dq1.get(), g.dk = dk1.get(), g.dv = dv1.get(), g.dk_head = dkh1.get(), g.dv_head = dvh1.get();
    g.delta = delta1.get();
    g.q += b * q_b, g.o += b * q_b, g.d_o += b * q_b, g.k += b * kv_b, g.v += b * kv_b;
    g.lse += std::size_t(b) * hq * n, g.mask += b * s_b, g.bias += b * s_b;
    cuda::launch_flash_bwd(Variant::kFa2, kd, g, nullptr);
    ATTN_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<std::uint16_t> one_dq = dq1.download(), one_dk = dk1.download(), one_dv = dv1.download();
    const std::vector<float> one_delta = delta1.download();
    EXPECT_TRUE(std::equal(one_dq.begin(), one_dq.end(), all_dq.begin() + b * q_b)) << "dQ, batch " << b;
    EXPECT_TRUE(std::equal(one_dk.begin(), one_dk.end(), all_dk.begin() + b * kv_b)) << "dK, batch " << b;
    EXPECT_TRUE(std::equal(one_dv.begin(), one_dv.end(), all_dv.begin() + b * kv_b)) << "dV, batch " << b;
    EXPECT_EQ(std::memcmp(one_delta.data(), all_delta.data() + std::size_t(b) * hq * n, hq * n * sizeof(float)), 0)
        << "delta, batch " << b;
  }
}

// The poison check itself: an untouched payload element and a write into the guard are both reported.
TEST(CudaPoison, DetectsUntouchedAndGuardWrites) {
  ATTN_SKIP_WITHOUT_GPU();
  {
    cuda::PoisonedOutput<float> out(100, "test buffer");
    std::vector<float> ones(99, 1.0f);
    ATTN_CUDA_CHECK(cudaMemcpy(out.get(), ones.data(), 99 * sizeof(float), cudaMemcpyHostToDevice));
    EXPECT_THROW(out.fetch_checked(), Error);  // element 99 untouched
  }
  {
    cuda::PoisonedOutput<float> out(100, "test buffer");
    std::vector<float> ones(101, 1.0f);
    ATTN_CUDA_CHECK(cudaMemcpy(out.get(), ones.data(), 101 * sizeof(float), cudaMemcpyHostToDevice));
    EXPECT_THROW(out.fetch_checked(), Error);  // one element past the end
  }
  {
    cuda::PoisonedOutput<float> out(100, "test buffer");
    std::vector<float> ones(100, 1.0f);
    ATTN_CUDA_CHECK(cudaMemcpy(out.get(), ones.data(), 100 * sizeof(float), cudaMemcpyHostToDevice));
    EXPECT_EQ(out.fetch_checked(), ones);
  }
}

TEST(CudaRegistry, RegistersFiveKernelsWithADevice) {
  ATTN_SKIP_WITHOUT_GPU();
  Registry r;
  EXPECT_EQ(register_cuda_kernels(r), 5);
  EXPECT_NE(r.find("cuda:fa2"), nullptr);
  EXPECT_NE(r.find("cuda:fa2-psum"), nullptr);
  EXPECT_EQ(r.get("cuda:fa2-fixed[beta=4]").name(), "cuda:fa2-fixed[beta=4]");
}

}  // namespace
}  // namespace attncheck::test
