// planted_kernel.h — the test-only `planted` kernel: a deep defect with a ladder, for the feedback A/B test.
//
// `planted` is a base kernel (fa2 by default) whose O error grows by one step per input FEATURE present and
// which fails (throws std::logic_error, a crash to libFuzzer) only when all K features are present at once.
// Features (the first K of, in this order):
//   0 tie         some row's exact maximum score is reached by >= 2 visible keys
//   1 large       some visible exact score has |s| >= 16
//   2 masked      some key is invisible to some query (causal, keep-mask or a -inf bias)
//   3 long        n_k >= 28
//   4 odd_d       head_dim is odd
//   5 seed_odd    the instance's seed is odd (a hash bit of the family seed and generator: fa2 never reads it)
//   6 batch2      batch == 2
//   7 odd_q       n_q is odd
//   8 cool        scale < default_scale(head_dim) (the header's logit-scale byte below its default)
// With c < K features present, every O element of a row that sees a key is moved by 2^(2.25 + c/2) row-scaled
// ulps (o_error's unit) for c >= 1: 6.7, 9.5, ..., 76 ulps, the middle of half-log2 error buckets 16..23
// (feedback.h), one bucket per level; fa2's own error is ~1 ulp (more only where scores overflow),
// and not at all for c = 0. The error-guided counters see every level; code coverage sees none of them: this
// file is compiled without coverage instrumentation (CMakeLists.txt) and the features are computed the same way
// whatever the input, so a combination of features reaches no edge that its parts do not.
// What the A/B test built on it shows, and what it does not: that when a failure needs several independent
// input features at once and a partial combination shows up as a larger error, error-guided feedback keeps
// the partial combinations (a ladder) and reaches the failure in fewer executions than coverage alone. It is a
// planted ladder by construction; it is not evidence about how deep the real kernels' bugs are.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "harness/kernel.h"

namespace attncheck::fuzz {

constexpr int kPlantedFeatures = 9;
const char* planted_feature_name(int i);

// Which features instance `in` has (bit i = feature i) — for the kernel, its tests and the log line.
unsigned planted_features(const Instance& in);

// `features`: K in 1..kPlantedFeatures. `executions` (optional) is printed when the defect fires.
std::unique_ptr<Kernel> make_planted_kernel(const Kernel& base, int features,
                                            const std::uint64_t* executions = nullptr);

}  // namespace attncheck::fuzz
