// reference_grad_test.cpp — unit tests of reference_backward (reference.h): gradients against central finite
// differences of the fp64 forward, GQA sums, the definition of δ; and the reference's input checks.
// Inputs are bf16 values in [-1, 1] (fixed seeds). Run: ctest --test-dir build -R reference
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/formats.h"
#include "reference/reference.h"

namespace attncheck {
namespace {

constexpr double kU64 = 0x1p-53;  // fp64 unit roundoff (kU in reference_test.cpp: one unity file)

Instance make(int hq, int hkv, int n_q, int n_k, int d, bool causal, bool mask_bias, std::uint64_t seed) {
  Instance in;
  Problem& p = in.problem;
  p.heads_q = hq, p.heads_kv = hkv, p.n_q = n_q, p.n_k = n_k, p.head_dim = d, p.causal = causal;
  p.scale = Problem::default_scale(d);
  p.has_mask = p.has_bias = mask_bias;
  auto fill = [&](std::vector<double>& t, std::size_t n, std::uint64_t stream) {
    t.resize(n);
    for (std::size_t i = 0; i < n; ++i) t[i] = round_to(2 * uniform01(seed * 8 + stream, i) - 1, Format::kBF16);
  };
  fill(in.q, p.q_size(), 0), fill(in.k, p.kv_size(), 1), fill(in.v, p.kv_size(), 2), fill(in.d_o, p.q_size(), 3);
  if (mask_bias) {
    fill(in.bias, p.scores_size(), 4);
    in.mask.resize(p.scores_size());
    for (std::size_t i = 0; i < in.mask.size(); ++i) in.mask[i] = uniform01(seed * 8 + 5, i) < 0.75;
  }
  return in;
}

// L = Σ dO ∘ O: its gradient with respect to Q, K, V is exactly what reference_backward returns for dO.
double loss(const Instance& in) {
  const ReferenceForward f = reference_forward(in);
  double l = 0;
  for (std::size_t i = 0; i < f.o.size(); ++i) l += in.d_o[i] * f.o[i];
  return l;
}

// Central differences (L(x + h) − L(x − h)) / 2h, h = 2^-16, on shapes with n_q ≤ 5, n_k ≤ 7, d = 4, two query
// heads (scale 0.5), inputs |x| ≤ 1. Error ≤ h²/6·M3 + ε_L/h:
//   M3, the third derivative of L along one input. L is linear in V (no truncation error there). A q or k entry
//   moves a row's scores by t·a with |a| ≤ A = scale = 0.5, and that row's term is a softmax mean E_P[w] of
//   w = dO·v, |w| ≤ W = d = 4. Its third t-derivative is the cumulant E[(w−w̄)(a−ā)³] − 3·Cov(w, a)·Var(a),
//   at most 16WA³ + 6WA³ = 22WA³ = 11. A k entry reaches n_q·2 ≤ 10 rows: M3 ≤ 110, h²/6·M3 ≤ 4.3e-9.
//   ε_L, the fp64 error of L: 40 products dO·O each ≤ 1, O accurate to 145u (see reference_test.cpp): ≤
//   (40 + 145)u·40 = 8.2e-13, so ε_L/h ≤ 5.4e-8.
// x ± h and the difference 2h are exact (bf16 x, power-of-two h). Total ≤ 6e-8; we allow 1e-6, a margin for
// the crude bounds. A wrong gradient (missing scale, missing δ, wrong GQA head) is off by > 1e-2.
TEST(reference, gradients_match_central_differences) {
  constexpr double kH = 0x1p-16, kTol = 1e-6;
  int case_no = 0;
  for (const Instance& base : {make(2, 1, 5, 7, 4, false, false, 1), make(2, 2, 5, 4, 4, true, true, 2),
                               make(2, 1, 3, 6, 4, true, false, 3)}) {
    Instance in = base;
    in.problem.input_format = Format::kF64;  // x ± h are not bf16 values
    const ReferenceBackward g = reference_backward(in);
    double largest = 0;
    auto check = [&](std::vector<double> Instance::*t, const std::vector<double>& grad, const char* name) {
      for (std::size_t i = 0; i < (in.*t).size(); ++i) {
        const double x = (in.*t)[i];
        (in.*t)[i] = x + kH;
        const double up = loss(in);
        (in.*t)[i] = x - kH;
        const double down = loss(in);
        (in.*t)[i] = x;
        const double fd = (up - down) / (2 * kH);
        largest = std::fmax(largest, std::fabs(fd));
        EXPECT_NEAR(grad[i], fd, kTol) << name << "[" << i << "], case " << case_no;
      }
    };
    check(&Instance::q, g.dq, "dQ");
    check(&Instance::k, g.dk, "dK");
    check(&Instance::v, g.dv, "dV");
    EXPECT_GT(largest, 0.05) << "case " << case_no << ": gradients too small for the check to mean anything";
    ++case_no;
  }
}

TEST(reference, gqa_gradients_are_sums_of_per_head_gradients) {
  // GQA (4 query heads on 2 kv heads) against the same problem with K, V copied per query head (MHA).
  const Instance gqa = make(4, 2, 6, 9, 4, true, true, 9);
  Instance mha = gqa;
  Problem& p = mha.problem;
  p.heads_kv = 4;
  mha.k.resize(p.kv_size()), mha.v.resize(p.kv_size());
  for (int h = 0; h < 4; ++h) {
    for (int j = 0; j < p.n_k; ++j) {
      for (int c = 0; c < p.head_dim; ++c) {
        mha.k[p.kv_at(0, h, j, c)] = gqa.k[gqa.problem.kv_at(0, h / 2, j, c)];
        mha.v[p.kv_at(0, h, j, c)] = gqa.v[gqa.problem.kv_at(0, h / 2, j, c)];
      }
    }
  }
  const ReferenceBackward a = reference_backward(gqa), b = reference_backward(mha);
  EXPECT_EQ(reference_forward(gqa).o, reference_forward(mha).o);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.delta, b.delta);
  // Each head's gradient is formed, then added to the kv head's: the GQA value is exactly the rounded sum.
  for (int hk = 0; hk < 2; ++hk) {
    for (int j = 0; j < p.n_k; ++j) {
      for (int c = 0; c < p.head_dim; ++c) {
        const std::size_t g = gqa.problem.kv_at(0, hk, j, c);
        const std::size_t h0 = p.kv_at(0, 2 * hk, j, c), h1 = p.kv_at(0, 2 * hk + 1, j, c);
        EXPECT_EQ(a.dk[g], b.dk[h0] + b.dk[h1]) << "dK " << hk << "," << j << "," << c;
        EXPECT_EQ(a.dv[g], b.dv[h0] + b.dv[h1]) << "dV " << hk << "," << j << "," << c;
      }
    }
  }
}

TEST(reference, delta_is_the_row_dot_of_d_o_and_the_exact_o) {
  const Instance in = make(2, 1, 7, 5, 8, true, true, 12);
  const ReferenceForward f = reference_forward(in);
  const ReferenceBackward g = reference_backward(in);
  const Problem& p = in.problem;
  for (std::size_t r = 0; r < p.rows(); ++r) {
    double dot = 0, mag = 0;
    for (int c = 0; c < p.head_dim; ++c) {
      dot += in.d_o[r * p.head_dim + c] * f.o[r * p.head_dim + c];
      mag += std::fabs(in.d_o[r * p.head_dim + c] * f.o[r * p.head_dim + c]);
    }
    // The same d products summed in two orders: each within γ_d·Σ|·| of the truth, so 2(d + 1)u·Σ|·| apart.
    EXPECT_NEAR(g.delta[r], dot, 2 * (p.head_dim + 1) * kU64 * mag) << "row " << r;
  }
  // And not from a rounded O: with O rounded to bf16, δ would move by ~2^-9·Σ|dO·O|.
  double moved = 0;
  for (std::size_t r = 0; r < p.rows(); ++r) {
    double dot = 0;
    for (int c = 0; c < p.head_dim; ++c)
      dot += in.d_o[r * p.head_dim + c] * round_to(f.o[r * p.head_dim + c], Format::kBF16);
    moved = std::fmax(moved, std::fabs(dot - g.delta[r]));
  }
  EXPECT_GT(moved, 1e-6);
}

TEST(reference, rejects_bad_input_with_an_error) {
  Instance in = make(2, 1, 3, 4, 4, false, false, 5);
  Instance no_d_o = in;
  no_d_o.d_o.clear();
  EXPECT_NO_THROW(reference_forward(no_d_o));
  EXPECT_THROW(reference_backward(no_d_o), Error);
  Instance not_bf16 = in;
  not_bf16.q[3] = 0.1;
  EXPECT_THROW(reference_forward(not_bf16), Error);
  Instance short_v = in;
  short_v.v.pop_back();
  EXPECT_THROW(reference_backward(short_v), Error);
  EXPECT_THROW(reference_scores(in, 0, 2), Error);
  EXPECT_THROW(reference_scores(in, 1, 0), Error);
}

TEST(reference, scores_are_scaled_dot_products_plus_bias) {
  const Instance in = make(2, 1, 4, 6, 8, true, true, 21);
  const Problem& p = in.problem;
  for (int h = 0; h < 2; ++h) {
    const std::vector<double> s = reference_scores(in, 0, h);
    for (int i = 0; i < p.n_q; ++i) {
      for (int j = 0; j < p.n_k; ++j) {
        const double got = s[i * p.n_k + j];
        if (!in.visible(0, h, i, j)) {
          EXPECT_EQ(got, -HUGE_VAL);
          continue;
        }
        double dot = 0, mag = 0;
        for (int c = 0; c < p.head_dim; ++c) {
          dot += in.q[p.q_at(0, h, i, c)] * in.k[p.kv_at(0, 0, j, c)];
          mag += std::fabs(in.q[p.q_at(0, h, i, c)] * in.k[p.kv_at(0, 0, j, c)]);
        }
        const double bias = in.bias[p.score_at(0, h, i, j)];
        // Two orders of d products, then the scale and the bias: 2(d + 2)u of the magnitude.
        EXPECT_NEAR(got, p.scale * dot + bias, 2 * (p.head_dim + 2) * kU64 * (p.scale * mag + std::fabs(bias)));
      }
    }
  }
}

}  // namespace
}  // namespace attncheck
