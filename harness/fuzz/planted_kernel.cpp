// planted_kernel.cpp — the test-only planted kernel (planted_kernel.h). Compiled WITHOUT libFuzzer coverage
// instrumentation (harness/fuzz/CMakeLists.txt), so nothing here is a coverage edge: only the error it adds
// to O can tell the fuzzer that an input got closer to the defect.
#include "harness/fuzz/planted_kernel.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "reference/reference.h"

namespace attncheck::fuzz {

namespace {

constexpr double kLargeScore = 16;  // |s| >= 16: e^16 ~ 9e6, where bf16/fp32 score rounding starts to show
constexpr int kLongRow = 28;        // n_k >= 28 of at most 32 (fuzz_input.h)

class PlantedKernel : public Kernel {
 public:
  PlantedKernel(const Kernel& base, int k, const std::uint64_t* executions)
      : base_(base), k_(k), executions_(executions) {}
  std::string name() const override { return "planted"; }
  std::string summary() const override {
    return "test only: " + base_.name() + " with an error ladder over " + std::to_string(k_) + " input features";
  }
  KernelCaps caps() const override { return base_.caps(); }
  ForwardOutput forward(const Instance& in) const override {
    ForwardOutput out = base_.forward(in);
    const unsigned mask = planted_features(in) & ((1u << k_) - 1u);
    const int c = std::popcount(mask);
    if (c == k_) {
      const unsigned long long at = executions_ ? static_cast<unsigned long long>(*executions_) : 0ull;
      std::fprintf(stderr, "attncheck-fuzz: planted defect reached at execution %llu\n", at);
      throw std::logic_error("planted deep defect: all " + std::to_string(k_) + " features present");
    }
    // 2^(2.25 + c/2) ulps for c >= 1 (the middle of half-log2 error bucket 15 + c: 6.7, 9.5, 13, ..., 76 ulps),
    // 0 for c = 0, at each row's scale max(|exact|, row rms) as o_error measures.
    const double level = static_cast<double>(c > 0) * std::exp2(2.25 + 0.5 * c);
    const ReferenceForward ref = reference_forward(in);
    const Problem& p = in.problem;
    const Format of = base_.caps().output_format;
    const std::size_t d = static_cast<std::size_t>(p.head_dim);
    for (std::size_t r = 0; r < p.rows(); ++r) {
      double ss = 0;
      for (std::size_t col = 0; col < d; ++col) ss += ref.o[r * d + col] * ref.o[r * d + col];
      const double rms = std::sqrt(ss / static_cast<double>(d));
      const double seen = static_cast<double>(std::isfinite(rms) && rms > 0);  // a row with no key stays 0
      for (std::size_t col = 0; col < d; ++col) {
        const double x = ref.o[r * d + col];
        const double u = std::isfinite(x) ? ulp(std::fmax(std::fabs(x), rms), of) : 0.0;
        double& o = out.o[r * d + col];
        o = round_to(o + seen * level * u, of);
      }
    }
    return out;
  }

 private:
  const Kernel& base_;
  int k_;
  const std::uint64_t* executions_;
};

}  // namespace

const char* planted_feature_name(int i) {
  static const char* const kNames[kPlantedFeatures] = {"tie", "large", "masked", "long", "odd_d", "seed_odd", "batch2", "odd_q", "cool"};
  return (i >= 0 && i < kPlantedFeatures) ? kNames[i] : "?";
}

unsigned planted_features(const Instance& in) {
  const Problem& p = in.problem;
  unsigned tie = 0, large = 0, masked = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const std::vector<double> s = reference_scores(in, b, h);
      for (int i = 0; i < p.n_q; ++i) {
        const double* row = &s[static_cast<std::size_t>(i) * p.n_k];
        double best = -HUGE_VAL;
        for (int j = 0; j < p.n_k; ++j) best = std::fmax(best, row[j]);
        unsigned at_best = 0;
        for (int j = 0; j < p.n_k; ++j) {
          at_best += row[j] == best;
          masked |= row[j] == -HUGE_VAL;
          large |= std::isfinite(row[j]) && std::fabs(row[j]) >= kLargeScore;
        }
        tie |= (at_best >= 2) & std::isfinite(best);
      }
    }
  const unsigned lng = p.n_k >= kLongRow, odd = p.head_dim & 1, seed_odd = in.seed & 1u, two = p.batch >= 2;
  const unsigned odd_q = p.n_q & 1, cool = p.scale < Problem::default_scale(p.head_dim);
  return tie | large << 1 | masked << 2 | lng << 3 | odd << 4 | seed_odd << 5 | two << 6 | odd_q << 7 | cool << 8;
}

std::unique_ptr<Kernel> make_planted_kernel(const Kernel& base, int features, const std::uint64_t* executions) {
  if (features < 1 || features > kPlantedFeatures)
    throw Error("planted kernel: features must be in 1.." + std::to_string(kPlantedFeatures) + ", got " +
                std::to_string(features));
  return std::make_unique<PlantedKernel>(base, features, executions);
}

}  // namespace attncheck::fuzz
