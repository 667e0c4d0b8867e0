// reference.cpp — the fp64 Eigen reference for attention, forward and backward (contract: reference.h).
//
// Per (b, h) slice: S = scale·Q·Kᵀ + bias, masked entries -inf; per row m = max over visible keys,
// p̄ = exp(s − m) (subtracting the row max keeps every exponent ≤ 0: no overflow, no NaN from inf/inf),
// l = Σ p̄, O = p̄·V / l, LSE = m + log l. A row with no visible key (mask, causal with n_q > n_k, or a bias of
// -inf everywhere) gives O = 0, LSE = -inf and contributes nothing to any gradient.
// Backward: P = p̄ / l, dP = dO·Vᵀ, δ_i = dO_i·O_i from the exact (fp64) O, dS = P ∘ (dP − δ) (formed about
// each row's largest P: score_gradient), dQ = scale·dS·K, dK += scale·dSᵀ·Q, dV += Pᵀ·dO, summed over the query
// heads of a GQA group.
// O is clamped to the per-column range of the visible V rows (see outputs()). Layouts: harness/problem.h.
// Everything is fp64; nothing is rounded to a storage format.
// Non-finite inputs: a NaN score among a row's visible keys makes that row's outputs NaN.
// reference_forward/backward memoise their last small input per thread (memo.h): same bits in, same answer; a
// backward of the instance the forward memo holds reuses its P and O (the same values, computed once).
// Run its tests: ctest -R reference
#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "reference/memo.h"

namespace attncheck {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const Mat>;
using MutMap = Eigen::Map<Mat>;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

ConstMap q_slice(const Instance& in, const std::vector<double>& t, int b, int h) {
  const Problem& p = in.problem;
  return ConstMap(t.data() + p.q_at(b, h, 0, 0), p.n_q, p.head_dim);
}
ConstMap kv_slice(const Instance& in, const std::vector<double>& t, int b, int hk) {
  const Problem& p = in.problem;
  return ConstMap(t.data() + p.kv_at(b, hk, 0, 0), p.n_k, p.head_dim);
}

Mat scores(const Instance& in, int b, int h) {
  const Problem& p = in.problem;
  const int hk = h / p.group();
  Mat s = p.scale * (q_slice(in, in.q, b, h) * kv_slice(in, in.k, b, hk).transpose());
  for (int i = 0; i < p.n_q; ++i) {
    for (int j = 0; j < p.n_k; ++j) {
      if (!in.visible(b, h, i, j)) {
        s(i, j) = kNegInf;
      } else if (p.has_bias) {
        s(i, j) += in.bias[p.score_at(b, h, i, j)];
      }
    }
  }
  return s;
}

// Softmax of one slice's scores, row by row: P (rows of a fully masked query are 0) and LSE.
void softmax(const Mat& s, Mat* prob, std::vector<double>* lse) {
  prob->resize(s.rows(), s.cols());
  lse->assign(s.rows(), kNegInf);
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    double m = kNegInf;
    bool nan = false;
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      nan = nan || std::isnan(s(i, j));
      m = std::fmax(m, s(i, j));
    }
    if (nan || m == HUGE_VAL) {  // undefined: NaN in, or +inf scores (inf - inf)
      prob->row(i).setConstant(std::numeric_limits<double>::quiet_NaN());
      (*lse)[i] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    if (m == kNegInf) {  // no visible key
      prob->row(i).setZero();
      continue;
    }
    double l = 0;
    for (Eigen::Index j = 0; j < s.cols(); ++j) {
      const double e = std::exp(s(i, j) - m);  // exp(-inf) = 0 for masked keys
      (*prob)(i, j) = e;
      l += e;
    }
    prob->row(i) /= l;  // l >= 1: the max contributes exp(0)
    (*lse)[i] = m + std::log(l);
  }
}

// O = P·V, then each element clamped to the range of its column over the row's visible keys. The exact O is a
// convex combination of those values, so the clamp never moves O away from it; it makes V = c·1 give O = c
// exactly (Σ_j P_j·c is c·(1 ± a few ulps) in fp64) and keeps O inside the per-column range of attended V.
Mat outputs(const Problem& p, const Mat& s, const Mat& prob, const ConstMap& v) {
  Mat o = prob * v;
  auto clamp_row = [&](Eigen::Index i, const auto& lo, const auto& hi) {
    for (Eigen::Index c = 0; c < v.cols(); ++c) {
      if (o(i, c) < lo[c]) o(i, c) = lo[c];  // comparisons are false for NaN: a NaN row stays NaN
      if (o(i, c) > hi[c]) o(i, c) = hi[c];
    }
  };
  if (!p.has_mask && !p.has_bias) {
    // Row i sees keys 0..last (all of them without causality): the ranges of prefixes of V, O(n_k·d) per slice.
    // One running range, advanced key by key as `last` grows with i: the prefix range at `last` is the fold
    // lo = min(v_j, lo) over j = 0..last in key order, exactly the recurrence of a table of all prefixes
    // (std::min(a, b) = b < a ? b : a, as Eigen's cwiseMin), so the same values, ±0 and NaN included.
    std::vector<double> lo(v.cols()), hi(v.cols());
    Eigen::Index folded = -1;  // keys 0..folded are in lo, hi
    for (Eigen::Index i = 0; i < s.rows(); ++i) {
      const Eigen::Index last = p.causal ? std::min<Eigen::Index>(i + p.n_k - p.n_q, p.n_k - 1) : p.n_k - 1;
      if (last < 0) continue;
      for (; folded < last; ++folded) {
        const double* vj = v.data() + (folded + 1) * v.cols();
        for (Eigen::Index c = 0; c < v.cols(); ++c) {
          lo[c] = folded < 0 ? vj[c] : std::min(vj[c], lo[c]);
          hi[c] = folded < 0 ? vj[c] : std::max(vj[c], hi[c]);
        }
      }
      clamp_row(i, lo, hi);
    }
    return o;
  }
  // Per row, the range over its visible keys, folded in key order (lo = min(lo, v_j), as Eigen's cwiseMin of the
  // running row and v_j). A row whose visible keys are the previous row's (every row, without causality, a mask
  // or -inf biases) has the previous row's range: the same fold over the same rows, so it is not redone.
  const Eigen::Index n = s.cols(), d = v.cols();
  std::vector<double> lo(d), hi(d);
  std::vector<char> seen(n), prev(n);
  bool any = false, have_prev = false;
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    bool same = have_prev;  // compared here, not with vector's operator!= (libFuzzer hooks every unequal memcmp)
    for (Eigen::Index j = 0; j < n; ++j) {
      seen[j] = s(i, j) != kNegInf;  // masked: not part of the combination
      same = same && seen[j] == prev[j];
    }
    if (!same) {
      std::fill(lo.begin(), lo.end(), HUGE_VAL);
      std::fill(hi.begin(), hi.end(), -HUGE_VAL);
      any = false;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (!seen[j]) continue;
        const double* vj = v.data() + j * d;  // V is row-major
        for (Eigen::Index c = 0; c < d; ++c) {
          lo[c] = std::min(lo[c], vj[c]);
          hi[c] = std::max(hi[c], vj[c]);
        }
        any = true;
      }
      prev.swap(seen);
      have_prev = true;
    }
    if (any) clamp_row(i, lo, hi);  // no visible key: O stays 0
  }
  return o;
}

void check(const Instance& in, bool need_d_o) {
  memo::validate_once(in);  // = in.validate(), once per bit-identical instance (memo.h)
  if (need_d_o && in.d_o.empty()) throw Error("reference_backward: instance has no d_o");
}

}  // namespace

std::vector<double> reference_scores(const Instance& in, int b, int h) {
  const Problem& p = in.problem;
  if (b < 0 || b >= p.batch || h < 0 || h >= p.heads_q)
    throw Error("reference_scores: slice (" + std::to_string(b) + ", " + std::to_string(h) + ") is out of range");
  const Mat s = scores(in, b, h);
  return std::vector<double>(s.data(), s.data() + s.size());
}

// The forward pass; with `slices_p`, each (b, h) slice's P as well (b-major, then h), for a backward on the same
// instance to reuse (reference_backward_uncached): P and O are the same function of the same inputs there.
static ReferenceForward reference_forward_uncached(const Instance& in, std::vector<Mat>* slices_p = nullptr) {
  check(in, false);
  const Problem& p = in.problem;
  ReferenceForward out;
  out.o.assign(p.q_size(), 0.0);
  out.lse.assign(p.rows(), kNegInf);
  Mat prob;
  std::vector<double> lse;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const Mat s = scores(in, b, h);
      softmax(s, &prob, &lse);
      MutMap(out.o.data() + p.q_at(b, h, 0, 0), p.n_q, p.head_dim) =
          outputs(p, s, prob, kv_slice(in, in.v, b, h / p.group()));
      for (int i = 0; i < p.n_q; ++i) out.lse[p.row_at(b, h, i)] = lse[i];
      if (slices_p) slices_p->push_back(prob);
    }
  }
  return out;
}

// The forward memo's value: the answer and each slice's P (see above).
struct ForwardMemo {
  ReferenceForward out;
  std::vector<Mat> slices_p;
};
using ForwardMemoEntry = memo::InstanceEntry<struct ForwardTag, ForwardMemo>;

// The forward memo's entry for a small instance (memo.h), computed and remembered when it holds another.
static const ForwardMemo& forward_memo(const Instance& in) {
  auto& m = ForwardMemoEntry::mine();
  if (const auto* v = m.find(in, [&](const Instance& k) { return memo::same_reference_inputs(in, k, false); }))
    return *v;
  ForwardMemo fresh;
  fresh.out = reference_forward_uncached(in, &fresh.slices_p);  // throws before anything is remembered
  m.remember(in, std::move(fresh));
  return m.value;
}

// dS = P ∘ (dP − δ) with δ_i = Σ_j P_ij dP_ij (= dO_i·O_i), formed about each row's pivot key j* (its largest
// P): dP_ij − δ_i = (dP_ij − dP_ij*) − Σ_j' P_ij' (dP_ij' − dP_ij*), since Σ_j' P_ij' = 1. The plain form cancels
// where one key holds nearly all the weight: dP_ij* − δ_i ≈ (1 − P_ij*)·(…) came out of two numbers of size |dP|,
// off by u·|dP|, and dQ, dK with it, by up to ~10^3 bf16 ulps of the head's rms on `sink` (a helper's MPFR
// probe; the unbiased property measures 0.05 ulp). Here the j* term is 0 exactly and every other term carries
// its own small P: the error is relative to the value. Equal dP across a row (V = c·1, when the product gives
// equal rows of V equal bits, as Eigen's does: reference_test pins it) gives dS = 0 exactly.
// Masked keys have P = 0, so dS = 0 there.
static Mat score_gradient(const Mat& prob, const Mat& dp) {
  Mat diff(dp.rows(), dp.cols());
  for (Eigen::Index i = 0; i < dp.rows(); ++i) {
    Eigen::Index pivot = 0;
    prob.row(i).maxCoeff(&pivot);
    diff.row(i) = dp.row(i).array() - dp(i, pivot);
  }
  const Eigen::VectorXd shifted_delta = (prob.array() * diff.array()).rowwise().sum();
  return prob.array() * (diff.colwise() - shifted_delta).array();
}

static ReferenceBackward reference_backward_uncached(const Instance& in) {
  check(in, true);
  const Problem& p = in.problem;
  // A small instance takes the forward's P and O from the forward memo (whichever is asked for first); a large one
  // forms each slice's P and O here, one slice at a time, rather than holding every slice's P.
  const ForwardMemo* fwd = memo::small(in) ? &forward_memo(in) : nullptr;
  ReferenceBackward out;
  out.dq.assign(p.q_size(), 0.0);
  out.dk.assign(p.kv_size(), 0.0);
  out.dv.assign(p.kv_size(), 0.0);
  out.delta.assign(p.rows(), 0.0);
  Mat prob_here;
  std::vector<double> lse;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      const ConstMap q = q_slice(in, in.q, b, h), d_o = q_slice(in, in.d_o, b, h);
      const ConstMap k = kv_slice(in, in.k, b, hk), v = kv_slice(in, in.v, b, hk);
      Mat o;  // the exact O (fp64, as reference_forward gives it), not a kernel's
      if (fwd) {
        o = ConstMap(fwd->out.o.data() + p.q_at(b, h, 0, 0), p.n_q, p.head_dim);
      } else {
        const Mat s = scores(in, b, h);
        softmax(s, &prob_here, &lse);
        o = outputs(p, s, prob_here, v);
      }
      const Mat& prob = fwd ? fwd->slices_p[std::size_t(b) * p.heads_q + h] : prob_here;
      const Eigen::VectorXd delta = (d_o.array() * o.array()).rowwise().sum();
      const Mat dp = d_o * v.transpose();
      const Mat ds = score_gradient(prob, dp);
      MutMap(out.dq.data() + p.q_at(b, h, 0, 0), p.n_q, p.head_dim) = p.scale * (ds * k);
      // Each head's dK, dV is formed first and then added: a GQA sum is then exactly the rounded sum of the
      // per-head gradients (tested), not a product fused into the accumulator in some other order.
      const Mat dk_h = p.scale * (ds.transpose() * q), dv_h = prob.transpose() * d_o;
      MutMap(out.dk.data() + p.kv_at(b, hk, 0, 0), p.n_k, p.head_dim) += dk_h;
      MutMap(out.dv.data() + p.kv_at(b, hk, 0, 0), p.n_k, p.head_dim) += dv_h;
      for (int i = 0; i < p.n_q; ++i) out.delta[p.row_at(b, h, i)] = delta[i];
    }
  }
  return out;
}

// One-entry memos (memo.h): the properties checked on one input each ask for the reference of the same
// instance; the answer for a bit-identical input is the same, so it is computed once.
ReferenceForward reference_forward(const Instance& in) {
  if (!memo::small(in)) return reference_forward_uncached(in);
  return forward_memo(in).out;
}

ReferenceBackward reference_backward(const Instance& in) {
  if (!memo::small(in)) return reference_backward_uncached(in);
  auto& m = memo::InstanceEntry<struct BackwardTag, ReferenceBackward>::mine();
  if (const auto* v = m.find(in, [&](const Instance& k) { return memo::same_reference_inputs(in, k, true); }))
    return *v;
  ReferenceBackward out = reference_backward_uncached(in);
  m.remember(in, out);
  return out;
}

}  // namespace attncheck
