// props_invariance.cpp — per-instance properties that run the kernel twice, on an instance and on a
// transformed copy whose exact answer is known from the first: key_permutation, logit_shift (derived
// tolerance: property_util.h's envelope), masked_value and causal_prefix (bitwise: see each).
// key_permutation and logit_shift compare the forward outputs (O, LSE). masked_value and causal_prefix compare
// O and LSE and, when the kernel has a backward pass (caps().backward), the backward outputs the transform
// provably leaves unchanged: dQ and δ of the compared rows, dK and dV of the keys that only compared rows see
// (compare_backward derives the rule). Run the tests: ctest -L property -R properties_test
#include <algorithm>
#include <cmath>
#include <numeric>

#include "properties/property_util.h"
#include "properties/props.h"

namespace attncheck {

namespace {

// The unchanged exact value rounded twice: bitwise equal (±0 alike) for a kernel whose rounding is a function of
// the row, at most one ulp apart (of format f at the larger magnitude) for one whose rounding stream is drawn from
// the whole input (`one_rounding`: KernelCaps::rounding_seeded_by_input, the null control `stochastic`): two
// faithful roundings of one exact value are neighbours. NaN matches only NaN (unchanged; `finite` judges NaN
// itself); ±inf must match.
bool unchanged_value(double a, double b, Format f, bool one_rounding) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (!std::isfinite(a) || !std::isfinite(b)) return a == b;
  return std::fabs(a - b) <= (one_rounding ? ulp(std::max(std::fabs(a), std::fabs(b)), f) : 0.0);
}

// A very different value of the same format: −2^16·v (−1 for v = 0), or −v where that overflows: always finite.
double amplified(double v, Format f) {
  const double r = round_to(v == 0 ? -1.0 : -65536.0 * v, f);
  return std::isfinite(r) ? r : round_to(-v, f);
}
// Another value of the same format for a changed Q or K entry: −2v + 1, or −v where that overflows. Always finite,
// as the backward needs: a masked pair's dS = 0 multiplies the changed q or k in dQ's and dK's sums, and 0·inf
// would be NaN (review, session 7: |q|, |k| ~ 2^127 in large_logits).
double other_value(double v, Format f) {
  const double r = round_to(-2 * v + 1, f);
  return std::isfinite(r) ? r : round_to(-v, f);
}

// One pair of outputs against its tolerance t. Non-finite values are compared exactly, never through the
// tolerance: equal infinities pass (LSE = +inf when fp32 scores overflow, −inf for a fully masked row, a ±inf O
// that is the correct rounding), an infinity against anything else fails, and NaN matches only NaN (`finite`
// judges NaN itself). Inf − inf is NaN and |finite − inf| <= an infinite tolerance would pass, so neither may
// reach the arithmetic. For two finite values the tolerance decides; where the envelope itself is not finite
// (an exact value that is not finite, or a bound past fp64's range) it bounds nothing: the pair is counted as
// unbounded (stats "unbounded") and passes, as any finite pair is within an unbounded envelope (the row length alone
// gets there only past ~1.45M keys in 16-key tiles since session 39, from 977 before). A huge σ alone
// does not get there: output_envelope caps e^{2σ} − 1 at 1e300, so such a pair is judged against a tolerance of
// ~1e300·M_c, which only an output far outside V's range fails (`within_v_range` is the sharper check there:
// very_negative_rows at level 1e9 has σ ~ 10^3, where O's envelope bounds nothing useful and LSE's still does).
enum class Pair { kPass, kFail, kUnbounded };
Pair judge_pair(double a, double b, double t) {
  if (!std::isfinite(a) || !std::isfinite(b)) return same_value(a, b) ? Pair::kPass : Pair::kFail;
  if (!std::isfinite(t)) return Pair::kUnbounded;
  return std::fabs(a - b) <= t ? Pair::kPass : Pair::kFail;
}

// One side of an LSE comparison near fp32's edge: the side's exact LSE, its envelope, and the infinity a kernel
// within that envelope may return there (±inf, the sign of the edge reached; 0 = none): edge_side below.
struct EdgeSide {
  double exact = 0, tol = 0, inf = 0;
};
struct EdgeRow {
  EdgeSide a, b;  // b in b's own frame, before lse_shift
};

// |a − b| <= tol_a + tol_b elementwise, for O (Q layout) and LSE (rows); `lse_shift` is subtracted from b's LSE.
// With `edges` (one per row): where exactly one of the two LSEs is infinite, the pair passes (counted, stats
// "lse_overflow") if that infinity is the one its side may return (EdgeSide::inf) and the other LSE is finite and
// within its own side's envelope (|x − exact| <= tol + one fp32 ulp of x, its rounding); otherwise it is judged as
// any pair (and fails). Whether +inf is acceptable for an exact LSE below fp32's largest value at all is `finite`'s
// question, not an invariance's: `finite` allows it only where the exact value itself overflows.
std::string compare_within(const Problem& p, const ForwardOutput& a, const ForwardOutput& b,
                           const std::vector<double>& tol_o, const std::vector<double>& tol_lse,
                           const std::vector<double>& lse_shift, nlohmann::json& stats,
                           const std::vector<EdgeRow>& edges = {}) {
  double worst = 0;
  int unbounded = 0;
  auto ratio = [&](double x, double y, double t) {  // finite parts only: the stats stay numbers
    if (t > 0 && std::isfinite(t) && std::isfinite(x) && std::isfinite(y)) worst = std::max(worst, std::fabs(x - y) / t);
  };
  for (std::size_t x = 0; x < a.o.size(); ++x) {
    const double t = 2 * tol_o[x];
    ratio(a.o[x], b.o[x], t);
    const Pair v = judge_pair(a.o[x], b.o[x], t);
    unbounded += v == Pair::kUnbounded;
    if (v == Pair::kFail)
      return std::string("O") + where(p, x) + ": " + fmt_num(a.o[x]) + " vs " + fmt_num(b.o[x]) + " (tolerance " + fmt_num(t) + ")";
  }
  int overflowed = 0;
  for (std::size_t r = 0; r < a.lse.size(); ++r) {
    const double lb = b.lse[r] - lse_shift[r];  // ±inf stays ±inf (the shift is finite)
    if (r < edges.size() && std::isinf(a.lse[r]) != std::isinf(b.lse[r])) {
      const EdgeRow& e = edges[r];
      auto within = [](double x, const EdgeSide& s) {
        return std::isfinite(x) && std::fabs(x - s.exact) <= s.tol + ulp(x, Format::kF32);
      };
      const bool allowed = std::isinf(a.lse[r]) ? a.lse[r] == e.a.inf && within(b.lse[r], e.b)
                                                : b.lse[r] == e.b.inf && within(a.lse[r], e.a);
      if (allowed) {
        ++overflowed;
        continue;
      }
    }
    // + b's own fp32 rounding before the shift (2^-23·|b.lse|: one fp32 ulp at most); finite b only.
    const double t = 2 * tol_lse[r] + (std::isfinite(b.lse[r]) ? 0x1.0p-23 * std::fabs(b.lse[r]) : 0.0);
    ratio(a.lse[r], lb, t);
    const Pair v = judge_pair(a.lse[r], lb, t);
    unbounded += v == Pair::kUnbounded;
    if (v == Pair::kFail)
      return "LSE[" + std::to_string(r) + "]: " + fmt_num(a.lse[r]) + " vs " + fmt_num(lb) + " (tolerance " +
             fmt_num(t) + ")";
  }
  stats["ratio"] = worst;
  if (unbounded > 0) stats["unbounded"] = unbounded;
  if (overflowed > 0) stats["lse_overflow"] = overflowed;
  return "";
}

// The side of an exact LSE L with envelope e: a kernel within e of L may return ±inf (the sign of L) in fp32 where L
// itself rounds past fp32's range (then ±inf is the correct rounding) or where the envelope [L − e, L + e] reaches
// past it while a finite value is also within it: an exact LSE one ulp below the edge, computed one ulp high. There
// two runs of one exact value (or of two exact values) may come back one infinite, one finite, both within their
// envelopes. Only a finite envelope gives an allowance: an unbounded one bounds nothing (any finite value would be
// "within" it), so there an infinite LSE against a finite one fails as in any row (review: +inf against 1.0 passed).
EdgeSide edge_side(double L, double e) {
  EdgeSide s{L, e, 0.0};
  if (!std::isfinite(L) || !std::isfinite(e)) return s;
  const double lo = round_to(L - e, Format::kF32), hi = round_to(L + e, Format::kF32);
  // Reaches past one edge and not past both: an envelope wider than fp32's whole range allows no infinity.
  const bool straddles = std::isinf(lo) != std::isinf(hi);
  if (std::isinf(round_to(L, Format::kF32)) || straddles) s.inf = std::copysign(HUGE_VAL, L);
  return s;
}

// Permuting the keys (K, V rows and mask columns together) permutes the terms of every softmax; the exact
// O and LSE are unchanged. Kernels sum in another order and tile differently, so O moves within the envelope:
// |O − O'| <= E + E' with the same E (same exact answer). Causal problems are skipped: a permutation would
// change which keys each query sees.
std::string check_key_permutation(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Problem& p = in.problem;
  if (p.causal) return "skip:a key permutation changes causal visibility";
  if (p.n_k < 2) return "skip:one key";
  std::vector<int> perm(p.n_k);
  std::iota(perm.begin(), perm.end(), 0);
  std::uint64_t s = mix64(in.seed ^ 0x7065726dull);
  for (int j = p.n_k - 1; j > 0; --j) std::swap(perm[j], perm[(s = mix64(s)) % std::uint64_t(j + 1)]);
  if (std::is_sorted(perm.begin(), perm.end())) std::swap(perm[0], perm[1]);  // never the identity
  Instance t = in;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_kv; ++h)
      for (int j = 0; j < p.n_k; ++j)
        for (int c = 0; c < p.head_dim; ++c) {
          t.k[p.kv_at(b, h, j, c)] = in.k[p.kv_at(b, h, perm[j], c)];
          t.v[p.kv_at(b, h, j, c)] = in.v[p.kv_at(b, h, perm[j], c)];
        }
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i)
        for (int j = 0; j < p.n_k; ++j) {
          if (p.has_mask) t.mask[p.score_at(b, h, i, j)] = in.mask[p.score_at(b, h, i, perm[j])];
          if (p.has_bias) t.bias[p.score_at(b, h, i, j)] = in.bias[p.score_at(b, h, i, perm[j])];
        }
  }
  const ReferenceForward rf = reference_forward(in);
  const ForwardOutput a = k.forward(in), b = k.forward(t);
  const EnvelopeKernel ek = envelope_kernel(k);
  const auto sigma = score_error_bounds(in, ek.beta);
  const NumericsSpec* spec = envelope_spec(k);  // null: the generic envelope alone
  int spec_elements = 0;
  const auto tol_o = output_envelope(in, ek.tile_k, rf.o, sigma, spec, rf.lse, &spec_elements);
  const auto tol_l = lse_envelope(in, ek.tile_k, rf.lse, sigma, ek.lse_fmt, spec, &spec_elements);
  if (spec) stats["spec"] = spec_elements;
  if (const int n = range_only_elements(in, tol_o)) stats["range_only"] = n;
  std::vector<EdgeRow> edges(p.rows());
  for (std::size_t r = 0; r < p.rows(); ++r) edges[r].a = edges[r].b = edge_side(rf.lse[r], tol_l[r]);
  return compare_within(p, a, b, tol_o, tol_l, std::vector<double>(p.rows(), 0.0), stats, edges);
}

// Logit shift, exact in bf16: K's last column is set to κ = 1 for every key and Q's last column to 0 (base);
// the shifted copy sets q_{i,d−1} = t_i = ±2^e (e in 0..2). In exact arithmetic every score of row i moves by
// scale·t_i (q·k gains t_i·κ), so O' = O and LSE' = LSE + scale·t_i; every input stays an exact bf16 value. The
// kernel's fp32 dot products and bf16 S round differently after the shift: the envelope's σ bounds that.
std::string check_logit_shift(const Kernel& k, const Instance& in0, const Family&, nlohmann::json& stats) {
  const Problem& p = in0.problem;
  const int last = p.head_dim - 1;
  Instance base = in0;
  for (std::size_t r = 0; r < std::size_t(p.batch) * p.heads_kv * p.n_k; ++r) base.k[r * p.head_dim + last] = 1.0;
  for (std::size_t r = 0; r < p.rows(); ++r) base.q[r * p.head_dim + last] = 0.0;
  Instance t = base;
  std::vector<double> shift(p.rows()), q_last_b(p.rows(), 0.0), q_last_t(p.rows());
  std::uint64_t s = mix64(in0.seed ^ 0x7368696674ull);
  for (std::size_t r = 0; r < p.rows(); ++r) {
    s = mix64(s);
    const double tv = ((s & 1) ? 1.0 : -1.0) * std::ldexp(1.0, static_cast<int>((s >> 1) % 3));
    t.q[r * p.head_dim + last] = tv;
    q_last_t[r] = tv;
    shift[r] = p.scale * tv;
  }
  // t's exact answer follows from base's (above): the same O, LSE + shift. So the fp64 reference runs once; rb
  // approximates t's exact values exactly as well as a second reference run would (to fp64 rounding, plus one
  // fp64 rounding of each LSE sum), far inside the envelopes' 2^-22-relative terms.
  const ReferenceForward rb = reference_forward(base);
  std::vector<double> lse_t = rb.lse;
  for (std::size_t r = 0; r < lse_t.size(); ++r) lse_t[r] += shift[r];
  const ForwardOutput a = k.forward(base), b = k.forward(t);
  // σ of base and of t (they differ in Q's last column only): score_error_bounds of each, in one pass.
  const EnvelopeKernel ek = envelope_kernel(k);
  const auto sigmas = score_error_bounds_last_q(base, {&q_last_b, &q_last_t}, ek.beta);
  const std::vector<double>& sigma_b = sigmas[0];
  const std::vector<double>& sigma_t = sigmas[1];
  const NumericsSpec* spec = envelope_spec(k);  // null: the generic envelope alone
  int spec_elements = 0;
  auto tol_o = output_envelope(base, ek.tile_k, rb.o, sigma_b, spec, rb.lse, &spec_elements);
  const auto tol_o2 = output_envelope(t, ek.tile_k, rb.o, sigma_t, spec, lse_t, &spec_elements);
  auto tol_l = lse_envelope(base, ek.tile_k, rb.lse, sigma_b, ek.lse_fmt, spec, &spec_elements);
  const auto tol_l2 = lse_envelope(t, ek.tile_k, lse_t, sigma_t, ek.lse_fmt, spec, &spec_elements);
  if (spec) stats["spec"] = spec_elements;
  // fp32's edge, each side with its own exact LSE and envelope (before they are averaged): where one exact LSE rounds
  // past fp32 and the other does not (a scale near 2^126: LSE + 4·scale overflows), the correctly rounded LSE is ±inf
  // on one side and finite on the other (the oracle failed there); near the edge a kernel within its envelope may
  // return ±inf on one side (edge_side).
  // A row whose exact LSE rounds past fp32 on one side only keeps that side's infinity whatever its envelope (the
  // correctly rounded pair is ±inf against a finite LSE: the null controls must pass it).
  std::vector<EdgeRow> edges(p.rows());
  for (std::size_t r = 0; r < p.rows(); ++r) {
    edges[r] = {edge_side(rb.lse[r], tol_l[r]), edge_side(lse_t[r], tol_l2[r])};
    const bool ib = std::isinf(round_to(rb.lse[r], Format::kF32)), it = std::isinf(round_to(lse_t[r], Format::kF32));
    if (ib && !it) edges[r].a.inf = std::copysign(HUGE_VAL, rb.lse[r]);
    if (it && !ib) edges[r].b.inf = std::copysign(HUGE_VAL, lse_t[r]);
  }
  for (std::size_t x = 0; x < tol_o.size(); ++x) tol_o[x] = 0.5 * (tol_o[x] + tol_o2[x]);  // compare: 2·mean
  for (std::size_t x = 0; x < tol_l.size(); ++x) tol_l[x] = 0.5 * (tol_l[x] + tol_l2[x]);
  if (const int n = range_only_elements(base, tol_o)) stats["range_only"] = n;  // (t sees the same V)
  return compare_within(p, a, b, tol_o, tol_l, shift, stats, edges);
}

// The forward half of the two bitwise properties below: LSE and O of the kept rows (row_at order), each within one
// rounding of the first run (bitwise for a kernel that rounds per row); "" or the first changed element, named,
// followed by `after`.
std::string compare_forward(const Problem& p, const ForwardOutput& a, const ForwardOutput& b,
                            const std::vector<char>& kept, Format of, bool one_rounding, const std::string& after) {
  for (std::size_t r = 0; r < p.rows(); ++r) {
    if (!kept[r]) continue;
    if (!unchanged_value(a.lse[r], b.lse[r], Format::kF32, one_rounding))
      return "LSE" + where_row(p, r) + " changed from " + fmt_num(a.lse[r]) + " to " + fmt_num(b.lse[r]) + after;
    for (std::size_t x = r * p.head_dim; x < (r + 1) * p.head_dim; ++x)
      if (!unchanged_value(a.o[x], b.o[x], of, one_rounding))
        // (append, not "O" + string: g++ 12 warns -Wrestrict there, a false positive: GCC bug 105329)
        return std::string("O").append(where(p, x)) + " changed from " + fmt_num(a.o[x]) + " to " +
               fmt_num(b.o[x]) + after;
  }
  return "";
}

// The backward half of the two bitwise properties below. FlashAttention's backward is elementwise in the pair
// (i, j) (P_ij = exp(s_ij − LSE_i), dS_ij = P_ij·(dO_i·v_j − δ_i); P_ij = dS_ij = 0 exactly for a masked pair)
// except for its sums: δ_i = Σ_c dO_ic·O_ic over row i alone; dQ_i = scale·Σ_j dS_ij·k_j over the keys; and
// dK_j = scale·Σ_i dS_ij·q_i, dV_j = Σ_i P_ij·dO_i over every row of key j's kv group (all its query heads).
// A row whose q_i, dO_i, O_i, LSE_i and visible keys' k_j, v_j are all unchanged (`kept`, row_at order: the rows
// a check compares) therefore keeps δ_i and dQ_i bit for bit: the masked terms it adds are exact zeros (0 times a
// changed k_j, which the transforms keep finite: other_value(), amplified(); x + 0 = x; only the sign of a zero sum
// may flip, and unchanged_value takes ±0 as equal). dK_j and dV_j keep every
// term iff every row that sees key j is kept: any other row has a new LSE_i, δ_i (it sees a changed key) or q_i,
// dO_i (it was changed), which moves its P_ij and dS_ij, while rows that do not see j add exact zeros. So the keys
// compared are those seen only by kept rows: that takes in a changed key that no row sees (dK = dV = 0 in both
// runs) and leaves out every changed key that some row sees (that row is not kept). Same rule as the forward:
// bitwise, one rounding apart for `stochastic` (which rounds the same exact values with another stream).
std::vector<char> keys_seen_only_by(const Instance& in, const std::vector<char>& kept) {
  const Problem& p = in.problem;
  std::vector<char> only(std::size_t(p.batch) * p.heads_kv * p.n_k, 1);  // K's rows: kv_at(b, hk, j, 0) / d
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i)
        if (!kept[p.row_at(b, h, i)])
          for (int j = 0; j < p.n_k; ++j)
            if (in.visible(b, h, i, j)) only[p.kv_at(b, h / p.group(), j, 0) / p.head_dim] = 0;
  return only;
}

// δ and dQ of the kept rows, dK and dV of the keys only they see (above); "" or the first changed element, named,
// followed by `after`.
std::string compare_backward(const Instance& in, const BackwardOutput& a, const BackwardOutput& b,
                             const std::vector<char>& kept, Format of, bool one_rounding, const std::string& after,
                             nlohmann::json& stats) {
  const Problem& p = in.problem;
  auto changed = [&](const std::string& name, double x, double y) {
    return name + " changed from " + fmt_num(x) + " to " + fmt_num(y) + after;
  };
  int rows = 0, keys = 0;
  for (std::size_t r = 0; r < p.rows(); ++r) {
    if (!kept[r]) continue;
    ++rows;
    if (!unchanged_value(a.delta[r], b.delta[r], Format::kF32, one_rounding))
      return changed("delta" + where_row(p, r), a.delta[r], b.delta[r]);
    for (std::size_t x = r * p.head_dim; x < (r + 1) * p.head_dim; ++x)
      if (!unchanged_value(a.dq[x], b.dq[x], of, one_rounding)) return changed("dQ" + where(p, x), a.dq[x], b.dq[x]);
  }
  const std::vector<char> only = keys_seen_only_by(in, kept);
  for (std::size_t kr = 0; kr < only.size(); ++kr) {
    if (!only[kr]) continue;
    ++keys;
    for (std::size_t x = kr * p.head_dim; x < (kr + 1) * p.head_dim; ++x) {
      if (!unchanged_value(a.dk[x], b.dk[x], of, one_rounding)) return changed("dK" + where(p, x, true), a.dk[x], b.dk[x]);
      if (!unchanged_value(a.dv[x], b.dv[x], of, one_rounding)) return changed("dV" + where(p, x, true), a.dv[x], b.dv[x]);
    }
  }
  stats["bwd_rows_compared"] = rows;
  stats["bwd_keys_compared"] = keys;
  return "";
}

// Keys masked for a row never enter its softmax: their p̄ is exactly 0 (or is multiplied by an exactly zero
// rescale factor), and x + 0 = x exactly, so a kernel that rounds deterministically per row reproduces every
// bit. The changed keys are those masked for the row with the most masked keys; compared are the rows that see
// none of them. Changed V values are amplified (about −2^16·v) so that any leak of a masked key's weight
// shows up (bitwise, or far beyond the one rounding `stochastic` is allowed: unchanged_value). With a backward
// pass, also δ and dQ of the compared rows and dK, dV of the keys only they see (compare_backward: with a padding
// mask that is every key, the changed ones included; where other rows see some changed key, fewer or none).
std::string check_masked_value(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Problem& p = in.problem;
  Instance t = in;
  std::vector<char> kept(p.rows(), 0);  // the rows to compare, row_at order
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      // The row of this kv group with the most masked keys.
      int best_h = -1, best_i = -1, best_n = 0;
      for (int h = hk * p.group(); h < (hk + 1) * p.group(); ++h)
        for (int i = 0; i < p.n_q; ++i) {
          int n = 0;
          for (int j = 0; j < p.n_k; ++j) n += !in.visible(b, h, i, j);
          if (n > best_n) best_n = n, best_h = h, best_i = i;
        }
      if (best_n == 0) continue;
      std::vector<int> changed;
      for (int j = 0; j < p.n_k; ++j)
        if (!in.visible(b, best_h, best_i, j)) changed.push_back(j);
      for (int j : changed)
        for (int c = 0; c < p.head_dim; ++c) {
          double& kv = t.k[p.kv_at(b, hk, j, c)];
          double& vv = t.v[p.kv_at(b, hk, j, c)];
          kv = other_value(kv, p.input_format);
          vv = amplified(vv, p.input_format);
        }
      for (int h = hk * p.group(); h < (hk + 1) * p.group(); ++h)
        for (int i = 0; i < p.n_q; ++i) {
          bool sees = false;
          for (int j : changed) sees |= in.visible(b, h, i, j);
          kept[p.row_at(b, h, i)] = !sees;
        }
    }
  if (std::find(kept.begin(), kept.end(), 1) == kept.end()) return "skip:no masked key";
  const ForwardOutput a = k.forward(in), bo = k.forward(t);
  const Format of = k.caps().output_format;
  const bool one_rounding = k.caps().rounding_seeded_by_input;
  const std::string after = " when only masked keys' K, V changed";
  if (std::string why = compare_forward(p, a, bo, kept, of, one_rounding, after); !why.empty()) return why;
  stats["rows_compared"] = std::count(kept.begin(), kept.end(), 1);
  if (!k.caps().backward) return "";
  const BackwardOutput ga = k.backward(in, a), gb = k.backward(t, bo);
  return compare_backward(in, ga, gb, kept, of, one_rounding, after, stats);
}

// Causal prefix (bottom-right alignment: query i sees keys j <= i + n_k − n_q). For a cut row c, rows i <= c
// depend only on q_0..q_c and keys j <= c + n_k − n_q: replacing later queries and later keys' K, V (V amplified
// as in masked_value) leaves rows 0..c unchanged: bitwise for a kernel that rounds per row (rows are
// independent softmaxes; keys past the diagonal contribute exact zeros), within one rounding otherwise.
// With a backward pass, also δ and dQ of rows 0..c (compare_backward). dO is an input of the backward alone, and
// rows i <= c read only their own dO_i, so the later rows' dO is replaced too (amplified): else a kernel whose
// prefix dQ or δ reads a later row's dO (a row offset off by one, a δ shared across a query tile) would go
// unseen. dK, dV are compared for the keys that no later row sees (compare_backward's rule); without a keep-mask
// that is no key (row n_q − 1 sees every key j <= n_k − 1, and its q, dO changed), so only a keep-mask that hides
// keys from every later row leaves some to compare.
std::string check_causal_prefix(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Problem& p = in.problem;
  if (!p.causal) return "skip:not a causal family";
  if (p.n_q < 2) return "skip:one query row";
  const int cut = static_cast<int>(mix64(in.seed ^ 0x637574ull) % std::uint64_t(p.n_q - 1));  // 0..n_q-2
  const int last_key = cut + p.n_k - p.n_q;
  Instance t = in;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = cut + 1; i < p.n_q; ++i)
        for (int c = 0; c < p.head_dim; ++c) {
          double& q = t.q[p.q_at(b, h, i, c)];
          q = other_value(q, p.input_format);
          double& d_o = t.d_o[p.q_at(b, h, i, c)];
          d_o = amplified(d_o, p.input_format);
        }
    for (int h = 0; h < p.heads_kv; ++h)
      for (int j = std::max(0, last_key + 1); j < p.n_k; ++j)
        for (int c = 0; c < p.head_dim; ++c) {
          double& kv = t.k[p.kv_at(b, h, j, c)];
          double& vv = t.v[p.kv_at(b, h, j, c)];
          kv = other_value(kv, p.input_format);
          vv = amplified(vv, p.input_format);
        }
  }
  const ForwardOutput a = k.forward(in), bo = k.forward(t);
  const Format of = k.caps().output_format;
  const bool one_rounding = k.caps().rounding_seeded_by_input;
  const std::string after = " (cut row " + std::to_string(cut) + ") when only later queries, dO rows and keys changed";
  std::vector<char> kept(p.rows(), 0);  // rows 0..cut of every (b, h), row_at order
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i <= cut; ++i) kept[p.row_at(b, h, i)] = 1;
  if (std::string why = compare_forward(p, a, bo, kept, of, one_rounding, after); !why.empty()) return why;
  stats["cut"] = cut;
  if (!k.caps().backward) return "";
  const BackwardOutput ga = k.backward(in, a), gb = k.backward(t, bo);
  return compare_backward(in, ga, gb, kept, of, one_rounding, after, stats);
}

Property invariance(const std::string& name, const std::string& sentence, InstanceCheck fn) {
  return per_instance_property(name, sentence, false, std::move(fn));
}

}  // namespace

std::vector<Property> invariance_properties() {
  return {
      invariance("key_permutation",
                 "Permuting the keys with their values leaves O and LSE unchanged up to the derived rounding envelope",
                 check_key_permutation),
      invariance("logit_shift",
                 "Adding a constant to a row's scores (through an exact bf16 change of Q against a constant K column) "
                 "leaves O unchanged and shifts LSE by it, up to the derived rounding envelope",
                 check_logit_shift),
      invariance("masked_value",
                 "Changing the keys and values of masked keys changes no output: O, LSE and, with a backward pass, "
                 "δ and dQ of the rows that see none of them, dK and dV of the keys only those rows see (bitwise, "
                 "up to one rounding for input-seeded stochastic rounding)",
                 check_masked_value),
      invariance("causal_prefix",
                 "With causal masking, rows up to a cut depend on no later query, dO row or key past their diagonal: "
                 "O, LSE and, with a backward pass, δ and dQ of those rows, dK and dV of keys no later row sees "
                 "(bitwise, up to one rounding for input-seeded stochastic rounding)",
                 check_causal_prefix),
  };
}

}  // namespace attncheck
