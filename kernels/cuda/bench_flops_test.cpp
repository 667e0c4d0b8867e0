// bench_flops_test.cpp — attention_flops (bench_flops.h) against the pairs the causal rule lets through,
// counted one by one with Instance::visible (the rule the reference and the CPU models use). Host only.
// Run: ctest -R BenchFlops
#include <gtest/gtest.h>

#include "harness/problem.h"
#include "kernels/cuda/bench_flops.h"

namespace attncheck::cuda {
namespace {

double visible_pairs(int n_q, int n_k) {
  Instance in;
  in.problem.n_q = n_q, in.problem.n_k = n_k, in.problem.causal = true;
  double pairs = 0;
  for (int i = 0; i < n_q; ++i)
    for (int j = 0; j < n_k; ++j) pairs += in.visible(0, 0, i, j);
  return pairs;
}

TEST(BenchFlops, CausalCountsTheVisiblePairsWhenNqDiffersFromNk) {
  for (int n_q = 1; n_q <= 9; ++n_q)
    for (int n_k = 1; n_k <= 9; ++n_k) {
      if (n_q == n_k) continue;
      SCOPED_TRACE(testing::Message() << "n_q " << n_q << " n_k " << n_k);
      EXPECT_EQ(attention_flops(1, 1, n_q, n_k, 1, true, false), 4 * visible_pairs(n_q, n_k));
      EXPECT_EQ(attention_flops(2, 3, n_q, n_k, 8, true, true), 2.5 * 4 * 2 * 3 * 8 * visible_pairs(n_q, n_k));
    }
  // One query sees every key; 4 queries over 2 keys: the first two rows see none, then 1 and 2.
  EXPECT_EQ(causal_pairs(1, 4096), 4096);
  EXPECT_EQ(causal_pairs(4, 2), 3);
}

TEST(BenchFlops, SquareCausalIsHalfAsFlashAttentionCountsIt) {
  // n²/2, not the n(n+1)/2 visible pairs: the README's square numbers use this count.
  for (int n : {1, 2, 7, 1024, 4096}) EXPECT_EQ(causal_pairs(n, n), 0.5 * n * n);
  EXPECT_EQ(attention_flops(4, 16, 4096, 4096, 128, true, false), 4.0 * 4 * 16 * 4096 * 4096 * 128 / 2);
}

TEST(BenchFlops, FullCountsEveryPair) {
  EXPECT_EQ(attention_flops(2, 3, 5, 7, 8, false, false), 4.0 * 2 * 3 * 5 * 7 * 8);
  EXPECT_EQ(attention_flops(2, 3, 5, 7, 8, false, true), 2.5 * 4 * 2 * 3 * 5 * 7 * 8);
}

}  // namespace
}  // namespace attncheck::cuda
