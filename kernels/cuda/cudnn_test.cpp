// cudnn_test.cpp — cuDNN's fused SDPA (`cuda:cudnn`, cudnn_sdpa.h): a step-by-step diagnostic of the graph
// build for a few shapes (every backend call printed), then forward and backward against the fp64 reference
// under FlashAttention's 2× rule (reference/accuracy.h), against cuda:fa2, determinism, batching and registration.
// Label gpu: every test skips without a CUDA device or without libcudnn 9 (or in a build without cuDNN).
// Run: ctest -L gpu -R cudnn   or   build-gpu-cudnn/kernels/cuda/cudnn_test [--gtest_filter='*Diagnostic*']
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "kernels/cpu/plain_attention.h"
#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_kernel.h"
#include "kernels/cuda/gpu_test_support.h"
#include "reference/accuracy.h"
#include "reference/reference.h"
#if defined(ATTNCHECK_HAVE_CUDNN)
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/cuda/device_buffer.h"
#endif

namespace attncheck::test {
namespace {

#if defined(ATTNCHECK_HAVE_CUDNN)
#define ATTN_SKIP_WITHOUT_CUDNN()                                                    \
  do {                                                                               \
    ATTN_SKIP_WITHOUT_GPU();                                                         \
    std::string why;                                                                 \
    if (!cuda::cudnn::available(&why)) GTEST_SKIP() << "cuDNN unavailable: " << why; \
  } while (0)
#else
#define ATTN_SKIP_WITHOUT_CUDNN() GTEST_SKIP() << "built without cuDNN"
#endif

// gpu_test_instances' shapes (as cuda_kernels_test), plus a keep-mask and a bias.
std::vector<Instance> instances(bool with_d_o) {
  std::vector<Instance> out = gpu_test_instances(2000, true);
  std::uint64_t seed = 2000 + out.size() / 2;
  // A keep-mask (keep probability 0.8), and a bf16 bias with a mask and causal: both reach cuDNN as its bias.
  Problem pm = make_problem(1, 2, 1, 70, 90, 64, false);
  pm.has_mask = true;
  out.push_back(random_instance(pm, ++seed));
  Problem pb = make_problem(1, 2, 2, 64, 80, 128, true);
  pb.has_mask = pb.has_bias = true;
  Instance ib = random_instance(pb, ++seed);
  for (double& x : ib.bias) x = round_to(x, Format::kBF16);  // cuDNN's bias tensor is bf16 (others declined)
  out.push_back(ib);
  for (Instance& in : out)
    if (!with_d_o) in.d_o.clear();
  return out;
}

std::unique_ptr<Kernel> cudnn_kernel() { return cuda::make_cudnn_kernel(); }

#if defined(ATTNCHECK_HAVE_CUDNN)
// One device call should tell everything: for each shape, the forward and backward graphs are built with every
// backend step printed (descriptor, attribute, finalize, heuristics, engines tried), then run once; the time
// to build each plan is printed (cuDNN may compile engines at run time). Fails when any graph fails.
TEST(CudnnDiagnostic, BuildsAndRunsForwardAndBackwardGraphsStepByStep) {
  ATTN_SKIP_WITHOUT_CUDNN();
  std::printf("cuDNN version %ld\n", cuda::cudnn::version());
  const cuda::cudnn::SdpaShape shapes[] = {
      {1, 1, 1, 128, 128, 64, false, 0.125f},  {1, 2, 1, 96, 160, 128, true, 0.088388f},
      {2, 4, 2, 64, 64, 128, false, 0.088388f}, {3, 1, 1, 128, 128, 64, false, 0.125f},  // another batch: a new plan
      {1, 2, 1, 80, 100, 64, true, 0.125f, true},  // with a bias tensor (keep-mask and bias go in through it)
  };
  int failures = 0;
  for (const auto& s : shapes) {
    for (bool bwd : {false, true}) {
      std::printf("==== %s %s ====\n", bwd ? "backward" : "forward", s.describe().c_str());
      const std::size_t nq = std::size_t(s.batch) * s.heads_q * s.n_q, nk = std::size_t(s.batch) * s.heads_kv * s.n_k;
      cuda::DeviceBuffer<std::uint16_t> q(nq * s.head_dim), k(nk * s.head_dim), v(nk * s.head_dim), o(nq * s.head_dim),
          d_o(nq * s.head_dim), dq(nq * s.head_dim), dk(nk * s.head_dim), dv(nk * s.head_dim);
      cuda::DeviceBuffer<float> stats(nq), delta(nq);
      cuda::DeviceBuffer<std::uint16_t> bias(s.bias ? nq * s.n_k : 0);  // zeros: +0 in bf16
      if (s.bias) ATTN_CUDA_CHECK(cudaMemset(bias.get(), 0, bias.size() * 2));
      const void* bias_ptr = s.bias ? bias.get() : nullptr;
      for (auto* b : {&q, &k, &v, &d_o}) ATTN_CUDA_CHECK(cudaMemset(b->get(), 0x3c, b->size() * 2));  // 0.0115
      cuda::cudnn::set_trace(stdout);
      try {
        const auto t0 = std::chrono::steady_clock::now();
        cuda::cudnn::sdpa_forward(s, q.get(), k.get(), v.get(), bias_ptr, o.get(), stats.get(), nullptr);
        if (bwd)
          cuda::cudnn::sdpa_backward(s, q.get(), k.get(), v.get(), bias_ptr, o.get(), d_o.get(), stats.get(), dq.get(),
                                     dk.get(), dv.get(), delta.get(), nullptr);
        ATTN_CUDA_CHECK(cudaDeviceSynchronize());
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("==== ok: plan(s) built and run in %.1f ms\n", ms);
      } catch (const std::exception& e) {
        ++failures;
        std::printf("==== FAILED: %s\n", e.what());
      }
      cuda::cudnn::set_trace(nullptr);
    }
  }
  EXPECT_EQ(failures, 0);
}
#endif

TEST(CudnnKernel, ForwardMeetsFlashAttentionRule) {
  ATTN_SKIP_WITHOUT_CUDNN();
  auto k = cudnn_kernel();
  for (const Instance& in : instances(false)) {
    const ForwardOutput got = k->forward(in), plain = plain_forward(in);
    const ReferenceForward exact = reference_forward(in);
    // FlashAttention's own rule (factor 2 on the plain bf16 attention's error, fp32 floor): accuracy.h.
    const AccuracyCheck co = accuracy_rule(got.o, plain.o, exact.o, 2.0, kDefaultFloorScale, Format::kBF16);
    const AccuracyCheck cl = accuracy_rule(got.lse, plain.lse, exact.lse, 2.0, kDefaultFloorScale, Format::kF32);
    EXPECT_TRUE(co.ok) << in.problem.describe() << " O: " << co.message;
    EXPECT_TRUE(cl.ok) << in.problem.describe() << " LSE: " << cl.message;
  }
}

// cuDNN and cuda:fa2 compute the same function with different tilings and instruction orders: both must meet
// the rule (above and cuda_kernels_test); how often they agree bit for bit is measured and reported.
TEST(CudnnKernel, ForwardAgreementWithCudaFa2IsReported) {
  ATTN_SKIP_WITHOUT_CUDNN();
  auto k = cudnn_kernel();
  auto fa2 = cuda::make_cuda_kernel(cuda::Variant::kFa2);
  Agreement o, lse;
  for (const Instance& in : instances(false)) {
    if (!fa2->caps().unsupported_reason(in.problem, false).empty()) continue;  // cuda:fa2 has no mask or bias
    const ForwardOutput a = k->forward(in), b = fa2->forward(in);
    o.add(a.o, b.o, Format::kBF16);
    lse.add(a.lse, b.lse, Format::kF32);
    const ReferenceForward exact = reference_forward(in);
    const ForwardOutput plain = plain_forward(in);
    EXPECT_TRUE(accuracy_rule(b.o, plain.o, exact.o, 2.0, kDefaultFloorScale, Format::kBF16).ok)
        << "cuda:fa2 " << in.problem.describe();
  }
  std::printf("[agreement] cuda:cudnn vs cuda:fa2 forward: O %s; LSE %s\n", o.describe().c_str(),
              lse.describe().c_str());
  RecordProperty("o_bitwise_rate_vs_fa2", std::to_string(o.rate()));
  EXPECT_GT(o.total, 0u);
}

TEST(CudnnKernel, BackwardMeetsFlashAttentionRule) {
  ATTN_SKIP_WITHOUT_CUDNN();
  auto k = cudnn_kernel();
  for (const Instance& in : instances(true)) {
    const Problem& p = in.problem;
    if (p.n_k == 1) continue;  // exact dQ = dK = 0 with one key: the rule's floor is 0 (cuda_kernels_test bounds it)
    const ForwardOutput fwd = k->forward(in);
    const BackwardOutput got = k->backward(in, fwd), plain = plain_backward(in);
    const ReferenceBackward exact = reference_backward(in);
    // dK, dV are fp32 sums over the n_q rows of every query head of the group (n_q·group terms), dQ over n_k keys:
    // the floor of accuracy.h's fp32_accumulation_floor_scale (two summation orders of n terms).
    const double fq = fp32_accumulation_floor_scale(p.n_k);
    const double fkv = fp32_accumulation_floor_scale(std::size_t(p.n_q) * p.group());
    const AccuracyCheck cq = accuracy_rule(got.dq, plain.dq, exact.dq, 2.0, fq, Format::kBF16);
    const AccuracyCheck ck = accuracy_rule(got.dk, plain.dk, exact.dk, 2.0, fkv, Format::kBF16);
    const AccuracyCheck cv = accuracy_rule(got.dv, plain.dv, exact.dv, 2.0, fkv, Format::kBF16);
    // δ is cuDNN's rowsum(dO∘O) over the bf16 O it was given (fwd.o), not the exact O, so the 2× rule does not
    // apply (that O's rounding is the point of the paper); its products of bf16 values are exact in fp32 and
    // only the summation order errs: |δ − Σ dO·O| <= 2·d·2^-24·Σ|dO·O| (two orders of d terms, Higham 4.4).
    ASSERT_EQ(got.delta.size(), p.rows());
    for (std::size_t r = 0; r < p.rows(); ++r) {
      double sum = 0, sum_abs = 0;
      for (int c = 0; c < p.head_dim; ++c) {
        const double t = in.d_o[r * p.head_dim + c] * fwd.o[r * p.head_dim + c];
        sum += t, sum_abs += std::fabs(t);
      }
      EXPECT_LE(std::fabs(got.delta[r] - sum), 2.0 * p.head_dim * 0x1.0p-24 * sum_abs)
          << p.describe() << " delta row " << r << ": " << got.delta[r] << " vs " << sum;
    }
    EXPECT_TRUE(cq.ok) << p.describe() << " dQ: " << cq.message;
    EXPECT_TRUE(ck.ok) << p.describe() << " dK: " << ck.message;
    EXPECT_TRUE(cv.ok) << p.describe() << " dV: " << cv.message;
  }
}

TEST(CudnnKernel, ForwardIsDeterministicAndBackwardDeterminismIsReported) {
  ATTN_SKIP_WITHOUT_CUDNN();
  auto k = cudnn_kernel();
  int bwd_same = 0, bwd_total = 0;
  for (const Instance& in : instances(true)) {
    const ForwardOutput a = k->forward(in), b = k->forward(in);
    EXPECT_EQ(a.o, b.o) << in.problem.describe();
    EXPECT_EQ(a.lse, b.lse) << in.problem.describe();
    const BackwardOutput ga = k->backward(in, a), gb = k->backward(in, a);
    ++bwd_total;
    bwd_same += ga.dq == gb.dq && ga.dk == gb.dk && ga.dv == gb.dv;
  }
  // The backward accumulates dQ across key blocks in fp32 in memory (possibly atomically): repeated runs may
  // differ in the last bits; the property suite's `deterministic` decides whether that is a finding.
  std::printf("[determinism] cuda:cudnn backward bitwise repeatable on %d of %d instances\n", bwd_same, bwd_total);
}

TEST(CudnnKernel, ForwardManyEqualsForward) {
  ATTN_SKIP_WITHOUT_CUDNN();
  expect_forward_many_equals_forward(*cudnn_kernel(), instances(false));
}

// A bias that is not a bf16 value cannot be handed to cuDNN exactly: the kernel declines (the check skips).
TEST(CudnnKernel, DeclinesANonBf16Bias) {
  ATTN_SKIP_WITHOUT_CUDNN();
  Problem p = make_problem(1, 1, 1, 8, 8, 64, false);
  p.has_bias = true;
  Instance in = random_instance(p, 7);
  in.bias[3] = 0.1;  // not a bf16 value
  EXPECT_THROW(cudnn_kernel()->forward(in), Unsupported);
}

TEST(CudnnKernel, RegistersWithADeviceAndCudnn) {
  ATTN_SKIP_WITHOUT_CUDNN();
  Registry r;
  EXPECT_EQ(register_cudnn_kernels(r), 1);
  ASSERT_NE(r.find("cuda:cudnn"), nullptr);
  EXPECT_TRUE(r.find("cuda:cudnn")->caps().backward);
}

}  // namespace
}  // namespace attncheck::test
