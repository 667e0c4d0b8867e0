// props_invariance.cpp — per-instance properties that run the kernel twice, on an instance and on a
// transformed copy whose exact answer is known from the first: key_permutation, logit_shift (derived
// tolerance: property_util.h's envelope), masked_value and causal_prefix (bitwise: see each).
// Forward outputs (O, LSE) only. Run the tests: ctest -L property -R properties_test
#include <algorithm>
#include <cmath>
#include <numeric>

#include "properties/property_util.h"
#include "properties/props.h"

namespace attncheck {

namespace {

// The unchanged exact value rounded twice: bitwise equal for a kernel whose rounding is a function of the row,
// at most one ulp apart (of format f at the larger magnitude) for one whose rounding stream is drawn from the
// whole input (the null control `stochastic`, kernel.h): two faithful roundings of one exact value are
// neighbours. NaN matches only NaN (unchanged; `finite` judges NaN itself); ±inf must match.
bool within_one_rounding(double a, double b, Format f) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (!std::isfinite(a) || !std::isfinite(b)) return a == b;
  return std::fabs(a - b) <= ulp(std::max(std::fabs(a), std::fabs(b)), f);
}

// A very different value of the same format: −2^16·v (−1 for v = 0), which stays finite for |v| < 2^110.
double amplified(double v, Format f) {
  const double r = round_to(v == 0 ? -1.0 : -65536.0 * v, f);
  return std::isfinite(r) ? r : round_to(-v, f);
}

std::string where(const Problem& p, std::size_t qidx) {
  const int c = static_cast<int>(qidx % p.head_dim);
  std::size_t r = qidx / p.head_dim;
  const int i = static_cast<int>(r % p.n_q);
  r /= p.n_q;
  const int h = static_cast<int>(r % p.heads_q);
  const int b = static_cast<int>(r / p.heads_q);
  return "(b" + std::to_string(b) + ",h" + std::to_string(h) + ",i" + std::to_string(i) + ",c" + std::to_string(c) + ")";
}

// One pair of outputs against its tolerance t. Non-finite values are compared exactly, never through the
// tolerance: equal infinities pass (LSE = +inf when fp32 scores overflow, −inf for a fully masked row, a ±inf O
// that is the correct rounding), an infinity against anything else fails, and NaN matches only NaN (`finite`
// judges NaN itself). Inf − inf is NaN and |finite − inf| <= an infinite tolerance would pass, so neither may
// reach the arithmetic. For two finite values the tolerance decides; where the envelope itself is not finite
// (σ so large that e^{2σ} overflows, or an exact value that is not finite) it bounds nothing: the pair is
// counted as unbounded (stats "unbounded") and passes, as any finite pair is within an unbounded envelope.
enum class Pair { kPass, kFail, kUnbounded };
Pair judge_pair(double a, double b, double t) {
  if (!std::isfinite(a) || !std::isfinite(b)) return same_value(a, b) ? Pair::kPass : Pair::kFail;
  if (!std::isfinite(t)) return Pair::kUnbounded;
  return std::fabs(a - b) <= t ? Pair::kPass : Pair::kFail;
}

// |a − b| <= tol_a + tol_b elementwise, for O (Q layout) and LSE (rows); `lse_shift` is subtracted from b's LSE.
std::string compare_within(const Problem& p, const ForwardOutput& a, const ForwardOutput& b,
                           const std::vector<double>& tol_o, const std::vector<double>& tol_lse,
                           const std::vector<double>& lse_shift, nlohmann::json& stats) {
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
  for (std::size_t r = 0; r < a.lse.size(); ++r) {
    const double lb = b.lse[r] - lse_shift[r];  // ±inf stays ±inf (the shift is finite)
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
  return "";
}

// Permuting the keys (K, V rows and mask columns together) permutes the terms of every softmax; the exact
// O and LSE are unchanged. Kernels sum in another order and tile differently, so O moves within the envelope:
// |O − O'| <= E + E' with the same E (same exact answer). Causal problems are skipped: a permutation would
// change which keys each query sees.
std::string check_key_permutation(const Kernel& k, const Instance& in, const Family& f, nlohmann::json& stats) {
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
  const auto sigma = score_error_bounds(in);
  const auto tol_o = output_envelope(in, f, rf.o, sigma);
  const auto tol_l = lse_envelope(in, f, rf.lse, sigma);
  return compare_within(p, a, b, tol_o, tol_l, std::vector<double>(p.rows(), 0.0), stats);
}

// Logit shift, exact in bf16: K's last column is set to κ = 1 for every key and Q's last column to 0 (base);
// the shifted copy sets q_{i,d−1} = t_i = ±2^e (e in 0..2). In exact arithmetic every score of row i moves by
// scale·t_i (q·k gains t_i·κ), so O' = O and LSE' = LSE + scale·t_i; every input stays an exact bf16 value. The
// kernel's fp32 dot products and bf16 S round differently after the shift: the envelope's σ bounds that.
std::string check_logit_shift(const Kernel& k, const Instance& in0, const Family& f, nlohmann::json& stats) {
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
  const auto sigmas = score_error_bounds_last_q(base, {&q_last_b, &q_last_t});
  const std::vector<double>& sigma_b = sigmas[0];
  const std::vector<double>& sigma_t = sigmas[1];
  auto tol_o = output_envelope(base, f, rb.o, sigma_b);
  const auto tol_o2 = output_envelope(t, f, rb.o, sigma_t);
  auto tol_l = lse_envelope(base, f, rb.lse, sigma_b);
  const auto tol_l2 = lse_envelope(t, f, lse_t, sigma_t);
  for (std::size_t x = 0; x < tol_o.size(); ++x) tol_o[x] = 0.5 * (tol_o[x] + tol_o2[x]);  // compare: 2·mean
  for (std::size_t x = 0; x < tol_l.size(); ++x) tol_l[x] = 0.5 * (tol_l[x] + tol_l2[x]);
  return compare_within(p, a, b, tol_o, tol_l, shift, stats);
}

// Keys masked for a row never enter its softmax: their p̄ is exactly 0 (or is multiplied by an exactly zero
// rescale factor), and x + 0 = x exactly, so a kernel that rounds deterministically per row reproduces every
// bit. The changed keys are those masked for the row with the most masked keys; compared are the rows that see
// none of them. Changed V values are amplified (about −2^16·v) so that any leak of a masked key's weight
// shows up far beyond the one-rounding allowance (within_one_rounding).
std::string check_masked_value(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Problem& p = in.problem;
  Instance t = in;
  int compared = 0;
  std::vector<std::pair<int, int>> rows_to_compare;  // (b, h, i) encoded as (b*heads_q + h, i)
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
          kv = round_to(-2 * kv + 1, p.input_format);
          vv = amplified(vv, p.input_format);
        }
      for (int h = hk * p.group(); h < (hk + 1) * p.group(); ++h)
        for (int i = 0; i < p.n_q; ++i) {
          bool sees = false;
          for (int j : changed) sees |= in.visible(b, h, i, j);
          if (!sees) rows_to_compare.push_back({b * p.heads_q + h, i});
        }
    }
  if (rows_to_compare.empty()) return "skip:no masked key";
  const ForwardOutput a = k.forward(in), bo = k.forward(t);
  const Format of = k.caps().output_format;
  for (auto [bh, i] : rows_to_compare) {
    const int b = bh / p.heads_q, h = bh % p.heads_q;
    ++compared;
    const std::size_t r = p.row_at(b, h, i);
    if (!within_one_rounding(a.lse[r], bo.lse[r], Format::kF32))
      return "LSE of row (b" + std::to_string(b) + ",h" + std::to_string(h) + ",i" + std::to_string(i) +
             ") changed from " + fmt_num(a.lse[r]) + " to " + fmt_num(bo.lse[r]) + " when masked keys changed";
    for (int c = 0; c < p.head_dim; ++c) {
      const std::size_t x = p.q_at(b, h, i, c);
      if (!within_one_rounding(a.o[x], bo.o[x], of))
        return std::string("O") + where(p, x) + " changed from " + fmt_num(a.o[x]) + " to " + fmt_num(bo.o[x]) +
               " when only masked keys' K, V changed";
    }
  }
  stats["rows_compared"] = compared;
  return "";
}

// Causal prefix (bottom-right alignment: query i sees keys j <= i + n_k − n_q). For a cut row c, rows i <= c
// depend only on q_0..q_c and keys j <= c + n_k − n_q: replacing later queries and later keys' K, V (V amplified
// as in masked_value) leaves rows 0..c unchanged: bitwise for a kernel that rounds per row (rows are
// independent softmaxes; keys past the diagonal contribute exact zeros), within one rounding otherwise.
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
          q = round_to(-2 * q + 1, p.input_format);
        }
    for (int h = 0; h < p.heads_kv; ++h)
      for (int j = std::max(0, last_key + 1); j < p.n_k; ++j)
        for (int c = 0; c < p.head_dim; ++c) {
          double& kv = t.k[p.kv_at(b, h, j, c)];
          double& vv = t.v[p.kv_at(b, h, j, c)];
          kv = round_to(-2 * kv + 1, p.input_format);
          vv = amplified(vv, p.input_format);
        }
  }
  const ForwardOutput a = k.forward(in), bo = k.forward(t);
  const Format of = k.caps().output_format;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i <= cut; ++i) {
        const std::size_t r = p.row_at(b, h, i);
        if (!within_one_rounding(a.lse[r], bo.lse[r], Format::kF32))
          return "LSE of row " + std::to_string(i) + " (cut " + std::to_string(cut) + ") changed from " +
                 fmt_num(a.lse[r]) + " to " + fmt_num(bo.lse[r]);
        for (int c = 0; c < p.head_dim; ++c) {
          const std::size_t x = p.q_at(b, h, i, c);
          if (!within_one_rounding(a.o[x], bo.o[x], of))
            return std::string("O") + where(p, x) + " (cut row " + std::to_string(cut) + ") changed from " + fmt_num(a.o[x]) +
                   " to " + fmt_num(bo.o[x]) + " when only later queries and keys changed";
        }
      }
  stats["cut"] = cut;
  return "";
}

Property invariance(const std::string& name, const std::string& sentence, InstanceCheck fn) {
  Property p;
  p.name = name;
  p.sentence = sentence;
  p.check = [name, fn](const Kernel& k, const Family& f, const Budget& b) {
    return run_per_instance(name, k, f, b, false, fn);
  };
  return p;
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
                 "Changing the keys and values of masked keys changes no output (bitwise, up to one rounding for "
                 "input-seeded stochastic rounding)",
                 check_masked_value),
      invariance("causal_prefix",
                 "With causal masking, rows up to a cut depend on no later query and no key past their diagonal "
                 "(bitwise, up to one rounding for input-seeded stochastic rounding)",
                 check_causal_prefix),
  };
}

}  // namespace attncheck
