// props_basic.cpp — per-instance properties that look at one run of the kernel: accurate, finite,
// constant_v, within_v_range, masked_row, deterministic, gpu_matches_cpu_model (a GPU kernel against its CPU
// twin, props_gpu_twin.cpp). Each draws instances 0..budget−1 of the family and stops at the first failure (run_per_instance).
// Tolerances are derived in the comments where they are used.
// Run the tests: ctest -L property -R properties_test
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "properties/property_util.h"
#include "properties/props.h"
#include "reference/accuracy.h"

namespace attncheck {

namespace {

bool any_masked_row(const Instance& in, int b, int h, int i) {
  for (int j = 0; j < in.problem.n_k; ++j)
    if (in.visible(b, h, i, j)) return false;
  return true;
}

// The kernel-only noise of dQ and dK (accuracy_rule's `noise`): the error of FA2's dS_ij = P_ij·(dP_ij − δ_i) where
// its two fp32 sums cancel, which the plain attention does not share.
// dP_ij = Σ_c dO_ic·v_jc (a tensor-core or fp32 sum) and δ_i = Σ_c dO_ic·O_ic (FA2's preprocessing, from the
// kernel's O) are sums of d products of bf16 values, each exact in fp32 unless it underflows. In exact arithmetic
// they may cancel exactly: with one visible key O = v, so dP = δ and dS = 0. The plain attention keeps that
// cancellation, since it subtracts Σ_j P_ij·dP_ij, made of the same dP; so its error, the rule's main term, is 0
// there. A kernel that sums dP and δ in different orders cannot keep it: seen on the H100 (session 28,
// cuda:fa2-fixed, one key, d 10: dQ 7.5e-23 where exact 0 and plain 0; |δ| 5.5e-12).
// Bound, per element:
// - Each sum of d terms errs by at most d·2^-23·Σ|terms|. That is one fp32 ulp (2^-23 relative) per addition,
//   which covers round-to-nearest and truncating adders. Hopper's tensor cores align each group of 16 products to
//   the largest and cut each by < 2^-24 of it: at most d·2^-24·Σ|t| in all, with the groups' own adds inside the
//   same d·2^-23 (kernels/cuda/TENSOR_CORES.md).
// - Their difference rounds once, by at most 2^-24 of it: exact where they nearly cancel (Sterbenz).
// - So |Δ(dP_ij − δ_i)| <= (d + 1)·2^-23·T_ij, with T_ij = Σ_c |dO_ic·v_jc| + Σ_c |dO_ic·O_ic|.
// - dS_ij is that times P_ij, rounded to bf16 (1 + 2^-8). dQ_ic = scale·Σ_j dS_ij·k_jc sums n_k such terms in
//   fp32 (1 + n_k·2^-23), dK_jc = scale·Σ_i dS_ij·q_ic sums n_q·group (1 + n·2^-23), and rounds to bf16 (1 + 2^-8).
// - T is taken at the exact O and P: the kernel's O in δ is bf16 (1 + 2^-8), its P an fp32 exp of an fp32 score.
// `slack` below: (1 + 2^-8)^3 for the three bf16 roundings, 1.01 for P's own rounding and room.
// Not covered, so they can still fail where the kernel is right (never the other way: the allowance only grows
// from 0): products that underflow fp32 (the one-ulp floor of the rule is then the only slack), and P's error at
// large scores (an fp32 score errs by ~|s|·2^-24·d, which moves P by that factor in the exponent).
// A defect of δ itself is far outside it: FA2's δ from the bf16 O errs by up to 2^-8·Σ|dO·O|, ~2^15/d times this
// where δ does not cancel (the test finds a 2^-9 δ error caught at d 10 to 128); kernels whose dP and δ round in
// bf16 (the paper's numerics) err far beyond it too.
struct GradientNoise {
  std::vector<double> dq, dk;
};
GradientNoise gradient_noise(const Instance& in, const ReferenceForward& rf) {
  const Problem& p = in.problem;
  const int d = p.head_dim;
  GradientNoise g{std::vector<double>(p.q_size(), 0.0), std::vector<double>(p.kv_size(), 0.0)};
  const double slack = (1 + 0x1p-8) * (1 + 0x1p-8) * (1 + 0x1p-8) * 1.01;  // dS, dQ/dK and O in bf16; P, room
  const double gamma = (d + 1) * 0x1p-23 * slack;
  const double grow_q = 1 + p.n_k * 0x1p-23, grow_k = 1 + double(p.n_q) * p.group() * 0x1p-23;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      const std::vector<double> s = reference_scores(in, b, h);
      for (int i = 0; i < p.n_q; ++i) {
        const double lse = rf.lse[p.row_at(b, h, i)];
        if (!std::isfinite(lse)) continue;  // a fully masked row: P = 0 (or no finite P to bound)
        double t_delta = 0;
        for (int c = 0; c < d; ++c) t_delta += std::fabs(in.d_o[p.q_at(b, h, i, c)] * rf.o[p.q_at(b, h, i, c)]);
        for (int j = 0; j < p.n_k; ++j) {
          const double prob = std::exp(s[std::size_t(i) * p.n_k + j] - lse);
          if (!(prob > 0)) continue;
          double t = t_delta;
          for (int c = 0; c < d; ++c) t += std::fabs(in.d_o[p.q_at(b, h, i, c)] * in.v[p.kv_at(b, hk, j, c)]);
          const double w = p.scale * gamma * prob * t;
          for (int c = 0; c < d; ++c) {
            g.dq[p.q_at(b, h, i, c)] += w * grow_q * std::fabs(in.k[p.kv_at(b, hk, j, c)]);
            g.dk[p.kv_at(b, hk, j, c)] += w * grow_k * std::fabs(in.q[p.q_at(b, h, i, c)]);
          }
        }
      }
    }
  return g;
}

// The O/LSE/dQ/dK/dV accuracy rule against the plain (non-tiled) bf16 attention.
std::string check_accurate(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Kernel* plain = default_registry().find("plain");
  if (!plain) return "skip:no `plain` kernel registered (the rule's baseline)";
  if (!plain->caps().unsupported_reason(in.problem, false).empty()) return "skip:`plain` cannot run this problem";
  const ForwardOutput fw = k.forward(in);
  const ForwardOutput pw = plain->forward(in);
  const bool bwd = k.caps().backward && plain->caps().backward;
  double worst_ratio = 0;
  std::string failure;
  auto apply = [&](const char* name, const std::vector<double>& kv, const std::vector<double>& pv,
                   const std::vector<double>& ev, double floor_scale,
                   const std::function<const std::vector<double>*()>& noise = nullptr) {
    // The rule with the tensor's format (bf16 for O, dQ, dK, dV; fp32 for LSE): per element, the 2x bound or
    // one ulp of that format at the exact value, whichever is larger, and ±inf only where it is a faithful
    // rounding of the exact value (accuracy.h derives both). A stochastically rounded result errs by up to 1
    // ulp where the plain attention may err by only ~0.4 ulp, so the 2x rule alone would reject the null
    // control `stochastic`; the rule bounds arithmetic error, it does not demand more than the format holds.
    const Format tf = std::string(name) == "LSE" ? Format::kF32 : k.caps().output_format;
    AccuracyCheck a = accuracy_rule(kv, pv, ev, 2.0, floor_scale, tf, /*message_on_pass=*/false);
    // dQ, dK: judged again with the kernel-only noise (gradient_noise above) only where they fail without it, so
    // a passing check costs no more than before.
    if (!a.ok && noise) {
      const std::vector<double>* n = noise();
      a = accuracy_rule(kv, pv, ev, 2.0, floor_scale, tf, false, n);
      stats[std::string(name) + "_noise"] = (*n)[a.worst];  // the allowance it added at the deciding element
    }
    // err/allowance, element by element (accuracy.h): <= 1 on a pass, > 1 names how far a failure is out.
    worst_ratio = std::max(worst_ratio, a.ratio);
    stats[std::string(name) + "_err"] = a.kernel_err;
    stats[std::string(name) + "_bound"] = a.bound;
    // The element named in the tensor's own layout, not by its flat index alone.
    if (!a.ok && failure.empty()) failure = name + where_in(in.problem, name, a.worst) + ": " + a.message;
  };
  if (bwd) {
    const ReferenceBackward rb = reference_backward(in);
    const ReferenceForward rf = reference_forward(in);
    apply("O", fw.o, pw.o, rf.o, kDefaultFloorScale);
    apply("LSE", fw.lse, pw.lse, rf.lse, kDefaultFloorScale);
    const BackwardOutput kb = k.backward(in, fw);
    const BackwardOutput pb = plain->backward(in, pw);
    const Problem& p = in.problem;
    // dQ sums n_k terms per element in fp32; dK and dV sum n_q·group terms (accuracy.h derives the floor).
    std::optional<GradientNoise> noise;  // computed once, on the first dQ or dK that fails without it
    auto noise_of = [&](std::vector<double> GradientNoise::*tensor) {
      return [&, tensor]() -> const std::vector<double>* {
        if (!noise) noise = gradient_noise(in, rf);
        return &(*noise.*tensor);
      };
    };
    apply("dQ", kb.dq, pb.dq, rb.dq, fp32_accumulation_floor_scale(std::size_t(p.n_k)), noise_of(&GradientNoise::dq));
    apply("dK", kb.dk, pb.dk, rb.dk, fp32_accumulation_floor_scale(std::size_t(p.n_q) * p.group()), noise_of(&GradientNoise::dk));
    apply("dV", kb.dv, pb.dv, rb.dv, fp32_accumulation_floor_scale(std::size_t(p.n_q) * p.group()));
  } else {
    const ReferenceForward rf = reference_forward(in);
    apply("O", fw.o, pw.o, rf.o, kDefaultFloorScale);
    apply("LSE", fw.lse, pw.lse, rf.lse, kDefaultFloorScale);
  }
  stats["ratio"] = worst_ratio;
  return failure;
}

// Finite input, finite output, unless the exact value itself lies beyond the output format's largest finite
// value (then the infinity of its sign is a faithful rounding: the correct one once past max + ulp/2, and a
// stochastic rounding's possible one just past max; accuracy.h) or is itself infinite (LSE of a fully masked row:
// that infinity). A NaN is never a rounding of anything, and an infinity of the other sign is not either.
// The element is named in its tensor's layout (where_in).
std::string nonfinite(const char* name, const std::vector<double>& got, const std::vector<double>& exact, Format f,
                      const Problem& p) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(got[i])) continue;
    const bool beyond = !std::isfinite(exact[i]) || std::fabs(exact[i]) > format_info(f).max_finite;
    if (beyond && std::isinf(got[i]) && std::signbit(got[i]) == std::signbit(exact[i])) continue;
    return name + where_in(p, name, i) + " = " + fmt_num(got[i]) + " but exact " + fmt_num(exact[i]);
  }
  return "";
}

std::string check_finite(const Kernel& k, const Instance& in, const Family&, nlohmann::json&) {
  const ForwardOutput fw = k.forward(in);
  const Format of = k.caps().output_format;
  if (!k.caps().backward) {
    const ReferenceForward rf = reference_forward(in);
    if (auto w = nonfinite("O", fw.o, rf.o, of, in.problem); !w.empty()) return w;
    return nonfinite("LSE", fw.lse, rf.lse, Format::kF32, in.problem);
  }
  const ReferenceBackward rb = reference_backward(in);
  const ReferenceForward rf = reference_forward(in);
  if (auto w = nonfinite("O", fw.o, rf.o, of, in.problem); !w.empty()) return w;
  if (auto w = nonfinite("LSE", fw.lse, rf.lse, Format::kF32, in.problem); !w.empty()) return w;
  const BackwardOutput kb = k.backward(in, fw);
  if (auto w = nonfinite("dQ", kb.dq, rb.dq, of, in.problem); !w.empty()) return w;
  if (auto w = nonfinite("dK", kb.dk, rb.dk, of, in.problem); !w.empty()) return w;
  if (auto w = nonfinite("dV", kb.dv, rb.dv, of, in.problem); !w.empty()) return w;
  return nonfinite("delta", kb.delta, rb.delta, Format::kF32, in.problem);
}

// V = c·1: every row with a visible key is a convex combination of c's, so O = c exactly. c is the instance's
// first V element (a bf16 value), so no rounding is involved in the exact answer.
std::string check_constant_v(const Kernel& k, const Instance& base, const Family&, nlohmann::json& stats) {
  Instance in = base;
  double c = 1.0;
  for (double x : in.v)
    if (x != 0 && std::isfinite(x)) {
      c = x;
      break;
    }
  std::fill(in.v.begin(), in.v.end(), c);
  const ForwardOutput fw = k.forward(in);
  const Problem& p = in.problem;
  stats["c"] = c;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        if (any_masked_row(in, b, h, i)) continue;
        for (int col = 0; col < p.head_dim; ++col) {
          const double o = fw.o[p.q_at(b, h, i, col)];
          if (!(o == c))
            return "O(b" + std::to_string(b) + ",h" + std::to_string(h) + ",i" + std::to_string(i) + ",c" +
                   std::to_string(col) + ") = " + fmt_num(o) + ", expected c = " + fmt_num(c) + " (" +
                   fmt_num((o - c) / ulp(c, Format::kBF16)) + " ulp)";
        }
      }
  return "";
}

// O_ic within [min_j v_jc − slack, max_j v_jc + slack] over attended keys j; slack = 2γ_hi/(1−γ_lo)·M_c + 1 ulp
// (property_util.h: only the numerator/denominator rounding mismatch can leave the convex hull; errors in the
// scores only move the convex weights). For a kernel with a covered spec (envelope_spec), the smaller of that and
// the spec's mismatch (ν + δ)/(1 − δ)·M_c + its underflow term + 1 ulp of out_fmt (property_util.h: the shared
// errors κ only move the convex weights, so they are not charged here).
std::string check_within_v_range(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const ForwardOutput fw = k.forward(in);
  const Problem& p = in.problem;
  const NumericsSpec* spec = envelope_spec(k);
  std::vector<SpecRowBound> rows;
  if (spec)
    rows = spec_row_bounds(in, *spec, score_error_bounds(in, envelope_kernel(k).beta), reference_forward(in).lse);
  int spec_elements = 0;
  double worst = 0;
  std::vector<double> lo_c(p.head_dim), hi_c(p.head_dim), m_c(p.head_dim), slack_c(p.head_dim);
  const double dev_factor = 2 * envelope_mismatch(p.n_k, envelope_kernel(k).tile_k);
  if (!std::isfinite(dev_factor))  // past ~1.45M keys in 16-key tiles (property_util.cpp)
    return "skip:the envelope's bound passes fp64's range at this many key tiles";
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        // Column ranges over the visible keys in one pass over V's rows: for each column the values are taken
        // in the same key order as a per-column loop would, so min/max (and their choice between ±0) agree.
        // Without causality or a mask every row sees every key: the ranges of (b, h) are computed once, at row
        // 0 (before the masked-row skip below, so they never depend on which rows are skipped).
        if (i == 0 || !in.every_row_sees_every_key()) {
          visible_v_ranges(in, b, h, i, lo_c, hi_c, m_c);
          // The slack is a function of the column's range alone: formed with it, once per range.
          for (int c = 0; c < p.head_dim; ++c) {
            const double dev = dev_factor * m_c[c];
            slack_c[c] = dev + ulp(std::max(std::fabs(lo_c[c]), std::fabs(hi_c[c])) + dev, Format::kBF16);
          }
        }
        if (any_masked_row(in, b, h, i)) continue;
        const SpecRowBound* rb = spec ? &rows[p.row_at(b, h, i)] : nullptr;
        for (int c = 0; c < p.head_dim; ++c) {
          const double lo = lo_c[c], hi = hi_c[c];
          double slack = slack_c[c];
          if (rb && std::isfinite(rb->mismatch)) {
            const double dev = rb->mismatch * m_c[c] + rb->abs_unit * (1 + 3 * m_c[c]);
            const double s2 = dev + ulp(std::max(std::fabs(lo), std::fabs(hi)) + dev, spec->out_fmt);
            if (s2 < slack) slack = s2, ++spec_elements;
          }
          const double o = fw.o[p.q_at(b, h, i, c)];
          const double out = std::max(lo - o, o - hi);
          if (slack > 0) worst = std::max(worst, out / slack);
          if (!(o >= lo - slack && o <= hi + slack))
            return "O(b" + std::to_string(b) + ",h" + std::to_string(h) + ",i" + std::to_string(i) + ",c" +
                   std::to_string(c) + ") = " + fmt_num(o) + " outside [" + fmt_num(lo) + ", " + fmt_num(hi) +
                   "] ± " + fmt_num(slack);
        }
      }
  stats["ratio"] = worst;
  if (spec) stats["spec"] = spec_elements;
  return "";
}

// A row with no visible key: O = 0 (either sign) and LSE = −inf, never NaN or a finite sentinel's softmax.
std::string check_masked_row(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  const Problem& p = in.problem;
  int rows = 0;
  ForwardOutput fw;
  bool ran = false;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        if (!any_masked_row(in, b, h, i)) continue;
        if (!ran) fw = k.forward(in), ran = true;
        ++rows;
        const std::string at = "(b" + std::to_string(b) + ",h" + std::to_string(h) + ",i" + std::to_string(i) + ")";
        const double lse = fw.lse[p.row_at(b, h, i)];
        if (!(lse == -HUGE_VAL)) return "fully masked row " + at + ": LSE = " + fmt_num(lse) + ", expected -inf";
        for (int c = 0; c < p.head_dim; ++c)
          if (!(fw.o[p.q_at(b, h, i, c)] == 0.0))
            return "fully masked row " + at + ": O[" + std::to_string(c) + "] = " + fmt_num(fw.o[p.q_at(b, h, i, c)]) +
                   ", expected 0";
      }
  if (rows == 0) return "skip:no fully masked row";
  stats["masked_rows"] = rows;
  return "";
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b, std::size_t& at) {
  if (a.size() != b.size()) return at = 0, false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint64_t x, y;
    __builtin_memcpy(&x, &a[i], 8);
    __builtin_memcpy(&y, &b[i], 8);
    if (x != y) return at = i, false;
  }
  return true;
}

// The same input twice gives the same bits (kernel.h forbids state that changes results).
std::string check_deterministic(const Kernel& k, const Instance& in, const Family&, nlohmann::json&) {
  const ForwardOutput a = k.forward(in), b = k.forward(in);
  std::size_t at = 0;
  if (!same_bits(a.o, b.o, at)) return "O[" + std::to_string(at) + "] differs between two runs";
  if (!same_bits(a.lse, b.lse, at)) return "LSE[" + std::to_string(at) + "] differs between two runs";
  if (!k.caps().backward) return "";
  const BackwardOutput x = k.backward(in, a), y = k.backward(in, a);
  if (!same_bits(x.dq, y.dq, at)) return "dQ[" + std::to_string(at) + "] differs between two runs";
  if (!same_bits(x.dk, y.dk, at)) return "dK[" + std::to_string(at) + "] differs between two runs";
  if (!same_bits(x.dv, y.dv, at)) return "dV[" + std::to_string(at) + "] differs between two runs";
  if (!same_bits(x.delta, y.delta, at)) return "delta[" + std::to_string(at) + "] differs between two runs";
  return "";
}

}  // namespace

std::vector<Property> basic_properties() {
  return {
      per_instance_property("accurate",
                            "O and LSE (and dQ, dK, dV with a backward pass) err at most 2x the plain bf16 "
                            "attention's error plus an fp32 noise floor, or one ulp of their format per element (dQ, "
                            "dK: or the fp32 noise of dP − δ where they cancel); ±inf only where it rounds the exact "
                            "value",
                            false, check_accurate),
      per_instance_property("finite", "Finite inputs give finite outputs unless the exact result overflows", false,
                            check_finite),
      per_instance_property("constant_v", "V = c·1 gives O = c exactly", false, check_constant_v),
      per_instance_property("within_v_range",
                            "Every output lies in the range of the attended V values (plus the derived rounding "
                            "slack)",
                            false, check_within_v_range),
      per_instance_property("masked_row", "A fully masked row gives O = 0 and LSE = -inf", false, check_masked_row),
      per_instance_property("deterministic", "The same input gives the same output bits", false,
                            check_deterministic),
      gpu_matches_cpu_model(),
  };
}

}  // namespace attncheck
