// cuda_shapes_test.cpp — the CUDA kernels against their CPU twins (cuda_twin.h) on the shapes the other GPU tests leave
// out: lengths at the edges of the 64-wide tiles (63, 64, 65, 127, 128, 129) and very short ones (1, 3, 5, 7);
// n_q != n_k both ways with causal on (bottom-right: rows that see no key, one query row seeing every key); the
// forward's query blocks (128 rows at d 64, 192 at d 128 in the sm_90a build) and its 4-stage K/V ring (5 and 7 key
// tiles); head dims 64 and 128 and padded ones (1, 32 -> 64; 80, 96 -> 128); GQA groups of 1, 2, 4, 8 and one kv head;
// batch 1 and 3; a keep-mask and a bias at the edges. All four variants, forward and backward, through the Kernel
// interface: every output lands in NaN-poisoned buffers whose guards are checked after each launch (device_buffer.h;
// an untouched element or a write past the end is an Error, so the test fails).
//
// Per instance, gpu_matches_one (properties/props_gpu_twin.cpp, the property gpu_matches_cpu_model): δ bitwise, every
// other output bitwise equal to the twin's or within the bound derived there from the one thing the twin cannot copy
// (the GPU's exp2f/expf/logf; the tensor cores' sums are the twin's over the whole range). Per variant over the
// sweep, the bitwise rates of O and of dQ, dK, dV against the twin: >= 99.9%, the contract of
// ForwardAgreesWithItsCpuTwin and BackwardAgreesWithItsCpuTwin (cuda_kernels_test.cpp). And forward_many (one launch
// per shape) gives each instance forward's bits.
// Label gpu: skips without a device. Run: build-gpu/kernels/cuda/cuda_kernels_test --gtest_filter='*CudaShapes*'
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/test_support.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gpu_test_support.h"
#include "kernels/numerics_spec.h"
#include "properties/props.h"

namespace attncheck::test {
namespace {

using cuda::Variant;

struct EdgeShape {
  int b, hq, hkv, nq, nk, d;
  bool causal, keep_mask = false, bias = false;
};

// One line each: what it reaches that gpu_test_instances (and the gpu suite's d <= 16, n <= 40 families) do not.
const EdgeShape kEdgeShapes[] = {
    // very short, square and not
    {1, 1, 1, 1, 1, 128, true},
    {1, 1, 1, 3, 3, 64, true},
    {1, 1, 1, 5, 7, 128, true},
    {1, 1, 1, 7, 5, 64, true},  // rows 0, 1 see no key
    {1, 1, 1, 7, 3, 128, false},
    // one query row against a tail of keys (decoding), and the reverse: only the last row sees key 0
    {1, 1, 1, 1, 129, 64, true},
    {1, 1, 1, 129, 1, 128, true},
    {1, 1, 1, 1, 64, 128, true},
    {1, 1, 1, 64, 1, 64, true},
    // square at the tile edges
    {1, 1, 1, 63, 63, 128, true},
    {1, 1, 1, 64, 64, 64, true},
    {1, 1, 1, 65, 65, 128, true},
    {1, 1, 1, 127, 127, 64, true},
    {1, 1, 1, 128, 128, 128, false},
    {1, 1, 1, 129, 129, 64, true},
    // unequal at the tile edges, both ways, causal
    {1, 1, 1, 63, 65, 64, true},
    {1, 1, 1, 65, 63, 128, true},
    {1, 1, 1, 127, 129, 128, true},
    {1, 1, 1, 129, 127, 64, true},
    {1, 1, 1, 64, 129, 64, true},
    {1, 1, 1, 129, 64, 128, true},
    {1, 1, 1, 3, 128, 64, true},
    {1, 1, 1, 128, 3, 128, true},
    {1, 1, 1, 63, 127, 128, false},
    {1, 1, 1, 129, 65, 64, false},
    // the forward's 192-row block at d 128 (one row past, one short) and the K/V ring wrapping (5, 7 key tiles)
    {1, 1, 1, 193, 65, 128, true},
    {1, 1, 1, 191, 320, 128, true},
    {1, 1, 1, 129, 385, 64, false},
    // GQA groups 1, 2, 4, 8 (n_kv = 1 at 2, 4 and 8), batch 3
    {3, 2, 2, 65, 63, 64, true},
    {3, 4, 2, 63, 65, 128, true},
    {1, 8, 2, 65, 127, 64, false},
    {3, 8, 1, 9, 65, 128, true},
    {1, 4, 1, 64, 64, 64, true},
    {3, 2, 1, 1, 65, 64, true},
    {1, 16, 2, 17, 33, 128, false},
    {3, 4, 1, 65, 1, 128, true},
    // padded head dims: 1 and 32 run in the d 64 kernel, 80 and 96 in the d 128 one
    {1, 1, 1, 7, 9, 1, false},
    {3, 1, 1, 127, 63, 32, false},
    {1, 4, 1, 63, 64, 80, true},
    {1, 2, 1, 65, 129, 96, true},
    // keep-mask and bias at the edges (the default split alone takes them), the ring wrapping with both
    {1, 2, 1, 129, 385, 64, true, true, true},
    {3, 1, 1, 1, 65, 128, false, true},
    {1, 2, 2, 65, 1, 64, false, false, true},
    {1, 1, 1, 64, 192, 128, true, true, true},
};

// Each shape as a random instance (Q, K, V, dO ~ N(0, 1) in bf16; keep probability 0.8; bias N(0, 1) rounded to bf16,
// as gpu_test_instances), every other one with exact ties at the row max (the fixed policy's case); seeds 3001, ...
std::vector<Instance> cuda_shape_sweep() {
  std::vector<Instance> out;
  std::uint64_t seed = 3000;
  for (const EdgeShape& s : kEdgeShapes) {
    Problem p = make_problem(s.b, s.hq, s.hkv, s.nq, s.nk, s.d, s.causal);
    p.has_mask = s.keep_mask;
    p.has_bias = s.bias;
    Instance in = random_instance(p, ++seed);
    for (double& x : in.bias) x = round_to(x, Format::kBF16);
    out.push_back(out.size() % 2 && s.nk > 3 ? with_tied_keys(in, 3) : in);
  }
  return out;
}

// A Kernel that runs `inner` and keeps its last outputs, so the rates come from the very outputs gpu_matches_one
// judged (the twin, the expensive part, runs once). Its twin (cpu_twin) is the inner one's, recorded the same way.
struct Record {
  ForwardOutput fwd;
  BackwardOutput bwd;
};
class Recording final : public Kernel {
 public:
  Recording(std::shared_ptr<const Kernel> inner, Record* rec, Record* twin_rec)
      : inner_(std::move(inner)), rec_(rec), twin_rec_(twin_rec) {}
  std::string name() const override { return inner_->name(); }
  std::string summary() const override { return inner_->summary(); }
  KernelCaps caps() const override { return inner_->caps(); }
  ForwardOutput forward(const Instance& in) const override { return rec_->fwd = inner_->forward(in); }
  BackwardOutput backward(const Instance& in, const ForwardOutput& f) const override {
    return rec_->bwd = inner_->backward(in, f);
  }
  CpuTwin cpu_twin() const override {
    CpuTwin t = inner_->cpu_twin();
    if (!twin_rec_ || !t.kernel) return {};
    return {std::make_unique<Recording>(std::shared_ptr<const Kernel>(std::move(t.kernel)), twin_rec_, nullptr),
            t.spec};
  }

 private:
  std::shared_ptr<const Kernel> inner_;
  Record *rec_, *twin_rec_;
};

// The check of MatchTheirCpuTwin for any kernel with a CPU twin (`spec`: the numerics both follow).
void expect_sweep_matches_twin(const std::shared_ptr<const Kernel>& k, const NumericsSpec& spec) {
  const std::string name = k->name();
  Record gpu, twin;
  const Recording rk(k, &gpu, &twin);
  Agreement o, lse;
  BackwardAgreement a;
  int judged = 0;
  for (const Instance& in : cuda_shape_sweep()) {
    gpu = twin = Record{};
    nlohmann::json stats;
    const std::string why = gpu_matches_one(rk, in, stats);
    EXPECT_EQ(why, "") << name << " " << in.problem.describe();
    if (!why.empty()) continue;  // the outputs of a failed check may be partial
    ++judged;
    o.add(gpu.fwd.o, twin.fwd.o, Format::kBF16);
    lse.add(gpu.fwd.lse, twin.fwd.lse, spec.lse_fmt);
    ASSERT_FALSE(gpu.bwd.dq.empty() || twin.bwd.dq.empty()) << "gpu_matches_one ran no backward: " << in.problem.describe();
    a.add(gpu.bwd, twin.bwd, spec.delta_fmt);
  }
  std::printf("[shapes] %s vs CPU twin over %d instances: O %s; LSE %s; %s\n", name.c_str(), judged,
              o.describe().c_str(), lse.describe().c_str(), a.describe().c_str());
  ::testing::Test::RecordProperty("shapes_o_bitwise_rate", std::to_string(o.rate()));
  ::testing::Test::RecordProperty("shapes_dq_bitwise_rate", std::to_string(a.dq.rate()));
  // The rates cuda_kernels_test holds on its shapes (derivations there): only exp/log differ, rarely moving a rounding.
  EXPECT_GE(o.rate(), 0.999) << name << " O: " << o.describe();
  EXPECT_EQ(a.delta.rate(), 1.0) << name << " delta: " << a.delta.describe();
  EXPECT_GE(a.dq.rate(), 0.999) << name << " dQ: " << a.dq.describe();
  EXPECT_GE(a.dk.rate(), 0.999) << name << " dK: " << a.dk.describe();
  EXPECT_GE(a.dv.rate(), 0.999) << name << " dV: " << a.dv.describe();
}

class CudaShapes : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { ATTN_SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaShapes, MatchTheirCpuTwin) {
  expect_sweep_matches_twin(cuda::make_cuda_kernel(GetParam()), builtin_spec(cuda::variant_name(GetParam())));
}

TEST_P(CudaShapes, ForwardManyEqualsForward) {
  expect_forward_many_equals_forward(*cuda::make_cuda_kernel(GetParam()), cuda_shape_sweep());
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaShapes,
                         ::testing::Values(Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed,
                                           Variant::kFa2Psum),
                         [](const auto& info) { return gtest_name(cuda::variant_name(info.param)); });

}  // namespace
}  // namespace attncheck::test
