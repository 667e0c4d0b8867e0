// props_gpu_twin.cpp — gpu_matches_cpu_model: a GPU kernel against its CPU twin (Kernel::cpu_twin), forward and
// backward, bitwise where the twin reproduces the GPU's operations and within a bound derived from the numerics'
// rounding points elsewhere. Its own tests: ctest -R properties_test (GpuMatchesCpuModel.*, CPU stand-ins);
// on the GPU: attncheck check --kernel cuda:fa2 --property gpu_matches_cpu_model (ci/gpu.sh runs it on every family).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/flash_model.h"
#include "properties/property_util.h"
#include "properties/props.h"

namespace attncheck {

namespace {

// Bitwise agreement over a set of outputs, and the worst |Δ|/bound among those that differ.
struct Tally {
  std::size_t same = 0, total = 0, unmodelled = 0, vacuous = 0;
  double worst = 0;
  static bool differs(double a, double b) {  // in bits (a NaN matches any NaN)
    return !(a == b && std::signbit(a) == std::signbit(b)) && !(std::isnan(a) && std::isnan(b));
  }
  // "" or the failure; `what` names the output and is called only for a failure (a label per element would cost
  // more than the check). Non-finite values must match exactly where the bound's model holds (`modelled`).
  template <class What>
  std::string judge(What&& what, double a, double b, double bound, bool modelled) {
    ++total;
    vacuous += !modelled;
    if (!differs(a, b)) return ++same, "";
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!modelled) return ++unmodelled, "";
      return what() + " = " + fmt_num(a) + " on the GPU, " + fmt_num(b) + " in the CPU twin (non-finite: must match)";
    }
    const double err = std::fabs(a - b);
    worst = std::max(worst, bound > 0 ? err / bound : HUGE_VAL);
    if (!(err <= bound))
      return what() + " = " + fmt_num(a) + " on the GPU, " + fmt_num(b) + " in the CPU twin: " + fmt_num(err) +
             " apart, bound " + fmt_num(bound);
    return "";
  }
  void report(nlohmann::json& stats, const std::string& prefix) const {
    stats[prefix + "outputs"] = double(total);
    stats[prefix + "bitwise_equal"] = double(same);
    stats[prefix + "differ_pct"] = total ? 100.0 * double(total - same) / double(total) : 0.0;
    stats[prefix + "worst_of_bound"] = worst;
    stats[prefix + "unmodelled_nonfinite"] = double(unmodelled);
    stats[prefix + "outside_model"] = double(vacuous);  // compared against no bound (non-finite values need not match)
  }
};

// Both passes' exp gap: the GPU's exp2f/expf (MUFU-based, within 2 ulps: CUDA Programming Guide) and the host's
// libm (within 1) are at most E = 3·2^-23 apart, relative; below 2^-126 (fp32 subnormals) the ulps are absolute,
// E_abs = 3·2^-149. f(F) = ulp(1, F): the most (relative) one rounding to format F can move when its input moved by
// less than an ulp of F (it flips to the neighbour); sub(F) = ulp(0, F): F's subnormal step, the most (absolute) it
// can move below F's smallest normal value.
constexpr double kExpGap = 3 * 0x1p-23, kExpGapAbs = 3 * 0x1p-149;
double flip(Format fmt) { return ulp(1.0, fmt); }
double sub(Format fmt) { return ulp(0.0, fmt); }

// The backward, run from the GPU's own forward outputs (O, LSE) on both sides so that the pass is compared alone,
// against the twin's backward where the twin has one (the CUDA kernels' twin: the CPU model's steps with the
// tensor cores' sums, cuda_twin.h), else the CPU model of the twin's spec (model_backward). flash_bwd.cu follows the
// model's steps, rounding points and orders except (a) inside its tensor-core sums (s = q·k and dP = dO·v over the
// head dim; the partials of dV, dK over a 64-query tile and of dQ over a 64-key tile), (b) exp, and (c) the tiles it
// skips (causal: a key tile no row of a query tile sees), whose partials the model adds as +0 (so −0 may become +0:
// no difference in value; with non-finite inputs 0·inf = NaN in the model alone, where the bound is NaN as well).
// So δ (step 8: one thread per row, column order, on both sides) must be bitwise equal, and the rest within a bound
// built per (query, key) pair and then per gradient element from magnitudes M (upper bounds of |value| on either
// side) and gaps Δ (of |GPU − twin|); u = 2^-24, f(F) = ulp(1, F), sub(F) = F's subnormal step:
//   - Two evaluations of one fp32 sum of n exact terms (bf16·bf16 products are exact in fp32) are at most
//     gap(n)·Σ|t| apart: round-to-nearest additions in any order err by γ(n−1) = (n−1)u/(1 − (n−1)u); the tensor
//     cores, per k16 step, cut each of 17 terms (16 products and c) below 2^(E−25) with 2^E ≤ the largest term, and
//     round the sum toward zero (< 2^-23 of it): (17·2^-25 + 2^-23) per step, ⌈n/16⌉ steps (TENSOR_CORES.md).
//     This bound does not lean on the tensor cores' behaviour below 2^-126 (modelled since session 30: TENSOR_CORES.md,
//     rule 7): whatever they do with an input, product or result below 2^-126 moves
//     a term by at most 2^-126 times its other factor, or 2^-126: 2^-126·(Σ(|a| + |b|) + 17·steps), plus the
//     sequential side's gradual underflow, n·2^-149. (With the twin's sums both sides add alike: then this is slack.)
//   - Roundings are monotone maps onto a grid, so two inputs Δ apart round to values at most Δ + one step apart:
//     each rounding to F adds f(F)·M + sub(F). Not at the top of the range, where the last step is to ±inf: every
//     magnitude at or past 2^127 (fp32's and bf16's largest values are below 2^128) makes the bound vacuous.
//   - The score (natural units, scale applied): q·k is within g_qk = gap(d)·Σ|q k| (+ subnormal terms) of the exact
//     value; Δs ≤ scale·g_qk + (f(qk) + f(s))·M_q (its rounding, the paper's scaling), M_q = scale·(|q·k| + g_qk),
//     plus f(s)·(|s| + Δs) for a bias add. The exponent's argument x = s − LSE is rounded too (fa2: fma(s,
//     scale·log2e, −LSE·log2e) in fp32; paper: s − LSE in bf16): Δx = Δs + f(s)·(|x| + Δs). p = exp(x): Δp ≤
//     M_p·(expm1(Δx)·(1 + E) + E) + E_abs (E, E_abs: the exp gap above), M_p = exp(x_exact + Δx + 2^-23·(|s| + |LSE|))
//     ·(1 + E) (each side's argument lies within Δx of the exact one, plus fa2's rounded constants scale·log2e and
//     LSE·log2e); then rounded to bwd_p_fmt, and for dV to pv_in_fmt. A score of −inf (a −inf bias) with a finite
//     LSE, or LSE = +inf (FA2's empty sum) with a finite score, gives p = exp(−inf) = 0 exactly on both sides.
//   - dP = dO·v: ΔdP ≤ gap(d)·Σ|dO v| + subnormal terms + f(dp)·M_dP. dS = round(t1·t2, ds_fmt), t1 = p (fa2) or
//     round(p·scale) (paper), t2 = round(dP − δ): ΔdS ≤ Δt1·M_t2 + M_t1·Δt2 + Δt1·Δt2 + f(ds)·M_dS + sub(ds), with
//     M_t2 the smaller of (M_dP + |δ|) and (|dO·v − δ| + dP's distance from the exact dot), each ·(1 + f(ds_term))
//     + sub(ds_term) (and the first + the subnormal terms): where dP ≈ δ (tied rows) the second is far smaller.
//   - Where the twin has a backward (the CUDA kernels' twin: Kernel::cpu_twin's contract), it forms s = q·k and
//     dP = dO·v with the GPU's own sums (the tensor cores' rule, TENSOR_CORES.md), so those sums, and every rounding
//     after them up to exp, are the same bits on both sides: Δs = Δx = 0 and ΔdP = Δt2 = 0, and only exp and what
//     follows it differ. Taken for every pair: the rule is measured over the whole range (TENSOR_CORES.md, rules 1–7:
//     the attention regimes; subnormal inputs, products, c and results, underflow, overflow, inf and NaN; random
//     whole-range sweeps held out from the fit, 0 outputs of 8M differing on an H100, and crafted edge cases, on an
//     H100 and an H200; mma_probe_test). Until session 31 it was taken only for inputs 0 or in [2^-21, 2^21], the
//     range then probed, and very_negative_rows and large_logits compared under the bound above. A pair where the rule
//     failed would now fail the check rather than hide in a looser bound. (Each side's distance from the exact x
//     still bounds M_p; stats: grad_pairs_same_sums of grad_pairs, the pairs whose Δx and Δt2 are 0.)
//   - A gradient element sums its tiles' partials round(Σ_tile w·x, grad_partial_fmt) into a running
//     round(·, grad_acc_fmt) over T tiles: Δ ≤ ΣΔw·|x| + (gap(tile) + T·(f(partial) + f(acc)))·(M + ΣΔw·|x|) +
//     subnormal terms, M = ΣM_w·|x|; fa2 then multiplies dQ, dK by scale in fp32 (+ f(f32)); with GQA each head's
//     dK, dV is rounded to grad_out_fmt and the group summed in fp32 (+ f(grad_out) + (group − 1)·2^-23 of each
//     head's share); the last rounding adds one ulp of grad_out_fmt at the larger value.
// Where the bound is vacuous (a magnitude past 2^127 or not finite, e.g. exp past the doubles' range, non-finite
// inputs) non-finite values need not match; `outside_model` counts those outputs. The bitwise rate is the sharp
// measure (cuda_kernels_test asserts >= 90% against the CPU model and >= 99.9% against the twin).
std::string check_backward_against_twin(const Kernel& k, const Kernel& twin, const Instance& in,
                                        const NumericsSpec& sp, const ForwardOutput& g, nlohmann::json& stats) {
  const bool same_sums = twin.caps().backward;  // the twin's backward does the GPU's sums (above)
  const BackwardOutput gb = k.backward(in, g);
  const BackwardOutput tb = same_sums ? twin.backward(in, g) : model_backward(sp, in, g);
  const Problem& p = in.problem;
  const int d = p.head_dim, n_q = p.n_q, n_k = p.n_k, group = p.group();
  const double u = 0x1p-24, E = kExpGap, E_abs = kExpGapAbs, scale = p.scale, top = 0x1p127;
  const auto f = flip;
  auto cap = [top](double m) { return m < top ? m : HUGE_VAL; };  // NaN too: vacuous
  auto steps = [](int n) { return double((n + 15) / 16); };
  auto gap = [&](int n) { return (n - 1) * u / (1 - (n - 1) * u) + steps(n) * (17 * 0x1p-25 + 0x1p-23); };
  auto tc_sub = [&](int n, double sum_ab) { return 0x1p-126 * (sum_ab + 17 * steps(n)) + n * 0x1p-149; };
  double pairs = 0, pairs_same_sums = 0;
  Tally bw;
  for (std::size_t r = 0; r < p.rows(); ++r)  // step 8: bitwise (bound 0)
    if (auto why = bw.judge([&] { return "delta" + where_row(p, r); }, gb.delta[r], tb.delta[r], 0.0, true);
        !why.empty())
      return why + " (the same operations in the same order: must be bitwise)";

  const int tq = sp.tile_q, tk = sp.tile_k;
  const double T_q = std::ceil(double(n_q) / tq), T_k = std::ceil(double(n_k) / tk);
  const double post = sp.scale_in_exp ? scale : 1.0;  // fa2 scales dQ, dK at the end
  const double post_flip = sp.scale_in_exp ? 0x1p-23 : 0.0;
  const double grp = group > 1 ? f(sp.grad_out_fmt) + (group - 1) * 0x1p-23 : 0.0;
  // Per head: M and Δ of p̃ (as it enters dV) and of dS, per (query, key); [i·n_k + j].
  std::vector<double> m_pt(std::size_t(n_q) * n_k), d_pt(m_pt.size()), m_ds(m_pt.size()), d_ds(m_pt.size());
  // Per output element: the bound and the magnitude (dK, dV summed over a group's heads, K layout; dQ, Q layout).
  std::vector<double> bound_dk(p.kv_size(), 0.0), bound_dv(p.kv_size(), 0.0), bound_dq(p.q_size(), 0.0);
  std::vector<double> mag_dk(p.kv_size(), 0.0), mag_dv(p.kv_size(), 0.0), mag_dq(p.q_size(), 0.0);
  // One gradient element's bound from ΣΔw·|x|, ΣM_w·|x| and Σ(M_w + |x|) over n terms in T tiles of `tile`.
  auto element = [&](double e, double m, double ab, int n, int tile, double T) {
    return e + (gap(tile) + T * (f(sp.grad_partial_fmt) + f(sp.grad_acc_fmt))) * (m + e) +
           0x1p-126 * (ab + 17 * steps(tile) * T) + n * 0x1p-149;
  };
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / group;
      for (int i = 0; i < n_q; ++i) {
        const std::size_t row = p.row_at(b, h, i);
        const double L = g.lse[row], dl = gb.delta[row], dlt = std::fabs(dl);
        for (int j = 0; j < n_k; ++j) {
          const std::size_t x = std::size_t(i) * n_k + j;
          m_pt[x] = d_pt[x] = m_ds[x] = d_ds[x] = 0;
          if (!in.visible(b, h, i, j)) continue;  // p = 0 and dS = 0 on both sides
          double qk = 0, sqk = 0, sqk_ab = 0, dv = 0, sdv = 0, sdv_ab = 0;
          for (int c = 0; c < d; ++c) {
            const double qc = in.q[p.q_at(b, h, i, c)], kc = in.k[p.kv_at(b, hk, j, c)];
            const double oc = in.d_o[p.q_at(b, h, i, c)], vc = in.v[p.kv_at(b, hk, j, c)];
            qk += qc * kc, sqk += std::fabs(qc * kc), sqk_ab += std::fabs(qc) + std::fabs(kc);
            dv += oc * vc, sdv += std::fabs(oc * vc), sdv_ab += std::fabs(oc) + std::fabs(vc);
          }
          ++pairs;
          // dP's distance from the exact dot (the fp64 dot's own error included), and its magnitude.
          const double m_dp = cap(sdv * (1 + gap(d)) * (1 + f(sp.dp_fmt)));
          const double e_dp = gap(d) * sdv + tc_sub(d, sdv_ab) + f(sp.dp_fmt) * m_dp + sub(sp.dp_fmt) + d * 0x1p-53 * sdv;
          const double t_flip = f(sp.ds_term_fmt);
          const double m_t2 =
              cap(std::min(m_dp + dlt + tc_sub(d, sdv_ab), std::fabs(dv - dl) + e_dp) * (1 + t_flip) + sub(sp.ds_term_fmt));
          const double d_t2 = same_sums ? 0.0 : e_dp + t_flip * m_t2 + sub(sp.ds_term_fmt);
          // The exact score (reference_scores' value, from the fp64 dot above: g_qk below allows for its rounding).
          const double s_ex = scale * qk + (p.has_bias ? in.bias[p.score_at(b, h, i, j)] : 0.0);
          if ((s_ex == -HUGE_VAL && std::isfinite(L)) || (L == HUGE_VAL && std::isfinite(s_ex))) {
            m_ds[x] = d_ds[x] = std::isfinite(m_t2) ? 0.0 : NAN;  // p = 0 exactly: dS = 0·t2
            pairs_same_sums += same_sums;  // (no sum of the pair enters: counted with those that take the twin's)
            continue;
          }
          const double g_qk = gap(d) * sqk + tc_sub(d, sqk_ab) + d * 0x1p-53 * sqk;  // (the fp64 sum's own error)
          const double m_q = cap(scale * (std::fabs(qk) + g_qk) * (1 + f(sp.qk_fmt)) * (1 + f(sp.s_fmt)));
          double ds = scale * g_qk + (f(sp.qk_fmt) + f(sp.s_fmt)) * m_q;  // each side's s from the exact one
          if (p.has_bias) ds += f(sp.s_fmt) * (std::fabs(s_ex) + ds);
          const double x_exact = s_ex - L;
          const double x_far = ds + f(sp.s_fmt) * (std::fabs(x_exact) + ds);  // each side's x from the exact one
          const double dx = same_sums ? 0.0 : x_far;  // the two sides' x apart
          double mp = cap(std::exp(x_exact + x_far + 0x1p-23 * (std::fabs(s_ex) + ds + std::fabs(L))) * (1 + E));
          pairs_same_sums += dx == 0 && d_t2 == 0;  // (counted from the bound's own terms)
          double dp = mp * (std::expm1(dx) * (1 + E) + E) + E_abs;
          dp += f(sp.bwd_p_fmt) * mp + sub(sp.bwd_p_fmt), mp *= 1 + f(sp.bwd_p_fmt);
          m_pt[x] = mp * (1 + f(sp.pv_in_fmt)), d_pt[x] = dp + f(sp.pv_in_fmt) * mp + sub(sp.pv_in_fmt);
          const double m_t1 = sp.scale_in_exp ? mp : cap(mp * scale * (1 + t_flip));
          const double d_t1 = sp.scale_in_exp ? dp : dp * scale + t_flip * m_t1 + sub(sp.ds_term_fmt);
          m_ds[x] = cap(m_t1 * m_t2 * (1 + f(sp.ds_fmt)) + sub(sp.ds_fmt));
          d_ds[x] = d_t1 * m_t2 + m_t1 * d_t2 + d_t1 * d_t2 + f(sp.ds_fmt) * m_ds[x] + sub(sp.ds_fmt);
        }
      }
      for (int c = 0; c < d; ++c) {
        for (int j = 0; j < n_k; ++j) {  // dV_j = Σ_i p̃_ij·dO_i, dK_j = post·Σ_i dS_ij·q_i
          double ev = 0, mv = 0, av = 0, ek = 0, mk = 0, ak = 0;
          for (int i = 0; i < n_q; ++i) {
            const std::size_t x = std::size_t(i) * n_k + j;
            const double oc = std::fabs(in.d_o[p.q_at(b, h, i, c)]), qc = std::fabs(in.q[p.q_at(b, h, i, c)]);
            ev += d_pt[x] * oc, mv += m_pt[x] * oc, av += m_pt[x] + oc;
            ek += d_ds[x] * qc, mk += m_ds[x] * qc, ak += m_ds[x] + qc;
          }
          const double bv = element(ev, mv, av, n_q, tq, T_q);
          const double bk = post * element(ek, mk, ak, n_q, tq, T_q) * (1 + post_flip) + post_flip * post * mk;
          const std::size_t e = p.kv_at(b, hk, j, c);
          bound_dv[e] += bv + grp * (mv + bv), mag_dv[e] += mv + bv;
          bound_dk[e] += bk + grp * (post * mk + bk), mag_dk[e] += post * (mk + ek) + bk;
        }
        for (int i = 0; i < n_q; ++i) {  // dQ_i = post·Σ_j dS_ij·k_j
          double eq = 0, mq = 0, aq = 0;
          for (int j = 0; j < n_k; ++j) {
            const std::size_t x = std::size_t(i) * n_k + j;
            const double kc = std::fabs(in.k[p.kv_at(b, hk, j, c)]);
            eq += d_ds[x] * kc, mq += m_ds[x] * kc, aq += m_ds[x] + kc;
          }
          const std::size_t e = p.q_at(b, h, i, c);
          bound_dq[e] = post * element(eq, mq, aq, n_k, tk, T_k) * (1 + post_flip) + post_flip * post * mq;
          mag_dq[e] = post * (mq + eq) + bound_dq[e];
        }
      }
    }
  auto compare = [&](const char* name, const std::vector<double>& gv, const std::vector<double>& tv,
                     const std::vector<double>& bound, const std::vector<double>& mag, bool kv) -> std::string {
    for (std::size_t x = 0; x < gv.size(); ++x) {
      const bool modelled = std::isfinite(bound[x]) && mag[x] < top;  // else vacuous (NaN from inf·0 included)
      const double last = ulp(std::max(std::fabs(gv[x]), std::fabs(tv[x])), sp.grad_out_fmt);  // the last rounding
      const double bx = (modelled ? bound[x] : HUGE_VAL) + last;
      if (auto why = bw.judge([&] { return name + where(p, x, kv); }, gv[x], tv[x], bx, modelled); !why.empty())
        return why;
    }
    return "";
  };
  std::string why = compare("dQ", gb.dq, tb.dq, bound_dq, mag_dq, false);
  if (why.empty()) why = compare("dK", gb.dk, tb.dk, bound_dk, mag_dk, true);
  if (why.empty()) why = compare("dV", gb.dv, tb.dv, bound_dv, mag_dv, true);
  bw.report(stats, "grad_");
  stats["grad_pairs"] = pairs, stats["grad_pairs_same_sums"] = pairs_same_sums;
  return why;
}

// The forward: the twin (Kernel::cpu_twin) does the forward's operations in the GPU's order (the tensor cores'
// sums included) with one exception: exp and log come from the host's libm instead of the GPU's (MUFU-based
// exp2f/expf within 2 ulps, logf within 1: CUDA Programming Guide; libm within 1). So every output is bitwise
// equal unless one of those results moved a later rounding, and then:
//   - E, E_abs and f(F) as defined above (the exp gap, one rounding's flip); bf16's subnormal step is 2^-133.
//   - Per key tile, the running output acc takes p̄ (rounded to p_fmt, then to pv_in_fmt), the block output (a chain
//     of ⌈tile_k/16⌉ = K16 k16 mmas, then block_out_fmt), α (an exp, rounded to rescale_fmt) and two roundings to
//     acc_fmt; the row sum l takes p̄ (p_fmt), the block sum (tile_k − 1 fp32 adds, each thread in key order, then
//     the quad; then block_sum_fmt), α and two roundings to rowsum_fmt. A rounding to nearest moves by at most one
//     step more than its input moved (a flip): f·|value| above 2^-126, sub(F) below it (absolute: see the next
//     point). One k16 mma of inputs that moved moves by at most 17 quanta (16 products and c each cut to a multiple
//     of 2^max(E−25, −158), 2^E ≤ its largest term, or 2^E = 2^-126 where a subnormal operand or c aligns there)
//     and one fp32 step of its result (truncation): relative to the sum of its terms' magnitudes, 17·2^-25 + 2^-23
//     (TENSOR_CORES.md); the quanta of an alignment at −126, below. p̄ and the block terms are at most the tile's
//     share of Σ p̄·|v| (≤ l·Vmax, Vmax = max |v| over the row's visible keys), the α and acc terms at most all of
//     it. p̄ ≤ e^φ: the max, shifted or not, is at least every score, so φ = 0, but for fa2's folded argument
//     fma(s, c, −fl(m·c)) (c = scale·log2e), which may exceed the exact one by half an ulp of m·c: φ = ½ulp(m·c)·ln 2
//     in natural units, |m·c| ≤ |r|·log2e (r below). Over T tiles and n_k keys, relative to l·Vmax and to l:
//       rel_acc = (E + f(p) + f(pv_in) + K16·(17·2^-25 + 2^-23) + f(block_out)) + T·(E + f(rescale) + 2·f(acc))
//                 + (n_k·(E_abs + sub(p) + sub(pv_in)) + T·n_k·(E_abs + sub(rescale))·e^φ)/l,
//       rel_l   = (E + f(p) + (tile_k − 1)·2^-23 + f(block_sum)) + T·(E + f(rescale) + 2·f(rowsum))
//                 + (n_k·(E_abs + sub(p)) + T·n_k·(E_abs + sub(rescale))·e^φ + abs_l)/l.
//     The /l terms are the absolute steps of p̄ (≤ Vmax or 1 per key) and of α where it falls below 2^-126 (a max
//     that jumps by ~87 or more: α's move, E_abs + sub(rescale), times acc or l before the tile, at most
//     n_k·e^φ·Vmax or n_k·e^φ).
//     l is bounded below by the largest key's p̄ = e^(r − m): m = r (l ≥ 1) unless the fix shifts it to β·r
//     (r > 0) or 0 (r < 0), so l ≥ e^(−(β−1)·r) or e^r, with r the row's largest exact score widened by 2^-6 for
//     its rounding; times e^-φ for fa2's folded argument. Rows where that bound falls below 2^-100 (the fix's shift
//     of a very negative or very large row max, or fa2's fold from |r| ~ 1.5e9: every p̄ near or below fp32's
//     subnormals) are outside the twin's model: there the GPU's sum may
//     underflow to 0 (O = 0, LSE = +inf, FA2's empty sum) or 1/l overflow where the host's does not, so only
//     values finite on both sides are compared, against a bound that is then vacuous in practice.
//   - Below 2^-126 a step is absolute, which the relative terms miss where v is tiny (sink: p̄ ~ 5e-37 times
//     v ~ 1e-9, where the H200 gave a block output of 2^-149 and the twin 0 in the first fuzz campaign). Per tile, in
//     acc's units: each k16 mma's 16 product cuts, at most 2^-151 each (an alignment at −126; c, on fp32's grid,
//     cuts exactly) and its result's step 2^-149, then block_out and two of acc:
//     abs_acc = T·(K16·(2^-149 + 16·2^-151) + sub(block_out) + 2·sub(acc)), reaching O as abs_acc/l; in l's:
//     abs_l = T·((tile_k − 1)·2^-149 + sub(block_sum) + 2·sub(rowsum)). (Until session 31 only T·K16·2^-149 was
//     allowed, for the reason that the twin's model had no subnormals; it has them now, TENSOR_CORES.md rule 7,
//     but the exp gap still moves p̄ and with it these steps. The review of session 31 added the relative part of
//     the mma chain and of the block sum's adds, f(p) in acc, and α's and the other absolute steps.)
//   - O = acc / l (fa2: acc·(1/l), two roundings): |ΔO| ≤ (rel_acc + rel_l + 2·f(out_div))·Vmax (fa2-psum: l̄'s
//     budget, rel_div below, for rel_l), times
//     (1 + rel)(1 + f(pv_in)) for the second-order terms and the rounded weights, plus abs_acc/l·(1 + rel_o) and
//     the two roundings' absolute steps 2·sub(out_div) (fa2's first is a step of 1/l ≥ 1/n_k, so slack), plus one
//     ulp of the output format at the larger of the two values (the last rounding may flip too).
//   - LSE = m + log l with the same m (the max and the fix's decision read the same score bits): |Δ log l| ≤
//     rel_l/(1 − rel_l), plus the two logs' 2·2^-23 and a flip of log_l_fmt relative to |log l| ≤ |LSE| + |m|,
//     |m| ≤ β·max|s| over visible keys, plus a flip of lse_fmt at the larger LSE.
// Elsewhere non-finite outputs must match exactly (the same infinity, or NaN for NaN). The bound grows with T
// (for the paper's bf16 numerics, f = 2^-7: rel_o reaches 2, i.e. O's bound reaches 2·Vmax, the most two outputs in
// V's range can differ, at 21 key tiles; LSE's bound is infinite from 42); the bitwise rate it reports is the sharp
// measure (cuda_kernels_test holds it at >= 99.9% on its shapes).
std::string check_gpu_matches_cpu_model(const Kernel& k, const Instance& in, const Family&, nlohmann::json& stats) {
  Kernel::CpuTwin twin = k.cpu_twin();
  if (!twin.kernel) return "skip:no CPU twin (CPU kernels are their own models)";
  if (const std::string why = twin.kernel->caps().unsupported_reason(in.problem, false); !why.empty())
    return "skip:the twin cannot run this problem: " + why;
  const NumericsSpec& sp = twin.spec;
  const ForwardOutput g = k.forward(in), t = twin.kernel->forward(in);
  const Problem& p = in.problem;
  const double E = kExpGap, E_abs = kExpGapAbs, T = std::ceil(double(p.n_k) / sp.tile_k);
  const auto f = flip;
  const double k16 = std::ceil(sp.tile_k / 16.0), mma_flip = 17 * 0x1p-25 + 0x1p-23;  // per k16 mma (above)
  const double acc_0 = (E + f(sp.p_fmt) + f(sp.pv_in_fmt) + k16 * mma_flip + f(sp.block_out_fmt)) +
                       T * (E + f(sp.rescale_fmt) + 2 * f(sp.acc_fmt));
  const double l_0 = (E + f(sp.p_fmt) + (sp.tile_k - 1) * 0x1p-23 + f(sp.block_sum_fmt)) +
                     T * (E + f(sp.rescale_fmt) + 2 * f(sp.rowsum_fmt));
  // The absolute steps (above), each over l: p̄'s and α's in acc (times Vmax, as rel_acc is) and in l; then the
  // mma chain's, block_out's and acc's in acc's own units (abs_acc), and the block sum's and l's (abs_l, in l_abs).
  const double alpha_abs = T * p.n_k * (E_abs + sub(sp.rescale_fmt));
  const double acc_abs_v = p.n_k * (E_abs + sub(sp.p_fmt) + sub(sp.pv_in_fmt));
  const double abs_acc = T * (k16 * (0x1p-149 + 16 * 0x1p-151) + sub(sp.block_out_fmt) + 2 * sub(sp.acc_fmt));
  const double abs_l = T * ((sp.tile_k - 1) * 0x1p-149 + sub(sp.block_sum_fmt) + 2 * sub(sp.rowsum_fmt));
  const double l_abs = p.n_k * (E_abs + sub(sp.p_fmt)) + abs_l;
  // fa2-psum (normalise_by_pv_sum) divides O by l̄, a second sum of the p̄ as P̄V takes them (pv_in_fmt), on the tensor
  // cores (K16 mmas against ones): its budget is acc's chain with block_sum_fmt and rowsum_fmt in place of
  // block_out_fmt and acc_fmt. Its lower bound is l's times (1 − 2^-8) (the largest key's p̄ cast to bf16), slack 2^-7.
  const double lpv_0 = (E + f(sp.p_fmt) + f(sp.pv_in_fmt) + k16 * mma_flip + f(sp.block_sum_fmt)) +
                       T * (E + f(sp.rescale_fmt) + 2 * f(sp.rowsum_fmt));
  const double lpv_abs = acc_abs_v + T * (k16 * (0x1p-149 + 16 * 0x1p-151) + sub(sp.block_sum_fmt) +
                                          2 * sub(sp.rowsum_fmt));
  const bool shifts = sp.max_policy.kind != MaxPolicy::kStandard;
  const double beta = shifts ? std::max(1.0, sp.max_policy.beta) : 1.0;
  Tally fw;
  std::vector<double> v_max(p.head_dim);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const std::vector<double> scores = reference_scores(in, b, h);  // exact, scaled and biased; n_q × n_k
      for (int i = 0; i < p.n_q; ++i) {
        // Over the visible keys: max |s|, max s, and per column Vmax = max |v|.
        double s_abs = 0, r = -HUGE_VAL;
        std::fill(v_max.begin(), v_max.end(), 0.0);
        for (int j = 0; j < p.n_k; ++j) {
          if (!in.visible(b, h, i, j)) continue;
          const double sc = scores[std::size_t(i) * p.n_k + j];
          s_abs = std::max(s_abs, std::fabs(sc)), r = std::max(r, sc);
          for (int c = 0; c < p.head_dim; ++c)
            v_max[c] = std::max(v_max[c], std::fabs(in.v[p.kv_at(b, h / p.group(), j, c)]));
        }
        const double r_far = r + std::copysign(0x1p-6 * std::fabs(r), r);  // the rounded r, farthest from 0
        // fa2's fold (above): half an ulp of m·c, |m·c| ≤ |r_far|·log2e (with room for c's rounding), in nats.
        const double phi = sp.scale_in_exp && r != -HUGE_VAL
                               ? 0.5 * ulp(std::fabs(r_far) * 1.4426950408889634 * (1 + 0x1p-20), Format::kF32) *
                                     std::log(2.0)
                               : 0.0;
        const double log_l_low = (!shifts || r == -HUGE_VAL ? 0.0 : r_far > 0 ? -(beta - 1) * r_far : r_far) - phi;
        // 2^-100: the absolute steps a sum can take, abs_l above, are at most T·(tile_k − 1)·2^-149 + 3T·2^-133 (fp32
        // steps and bf16 sums), T·(tile_k − 1) < n_k + tile_k and T <= n_k: below 2^-107.4 at the case files'
        // n_k <= 2^24 (tile_k <= 2^16). With l >= 2^-100 those steps cannot take a side's sum to 0, and while l's
        // relative error rel_l stays under 1/2 (assumed, not checked here: it grows with T, and past 1/2 a computed l
        // could fall below 2^-101), 1/l <= 2^101 stays 2^27 below fp32's overflow: both sides are finite and the
        // terms above bound them.
        // Below, one side's sum may underflow, or its 1/l overflow, where the other's does not: then only finite
        // pairs are compared.
        const bool modelled = log_l_low >= -100 * std::log(2.0);
        const double inv_l = std::exp(-log_l_low);  // 1 / (lower bound of l)
        const double alpha_row = alpha_abs * std::exp(phi);  // α's steps times acc or l before the tile (above)
        const double rel_acc = acc_0 + (acc_abs_v + alpha_row) * inv_l, rel_l = l_0 + (l_abs + alpha_row) * inv_l;
        const double rel_div =
            sp.normalise_by_pv_sum ? lpv_0 + (lpv_abs + alpha_row) * inv_l * (1 + 0x1p-7) : rel_l;  // O's divisor
        const double rel_o0 = rel_acc + rel_div + 2 * f(sp.out_div_fmt);
        const double rel_o = rel_o0 * (1 + rel_o0) * (1 + f(sp.pv_in_fmt));
        for (int c = 0; c < p.head_dim; ++c) {
          const std::size_t x = p.q_at(b, h, i, c);
          const double bound = rel_o * v_max[c] + abs_acc * inv_l * (1 + rel_o) + 2 * sub(sp.out_div_fmt) +
                               ulp(std::max(std::fabs(g.o[x]), std::fabs(t.o[x])), sp.out_fmt);
          auto what = [&] { return std::string("O").append(where(p, x)); };  // (not "O" + …: GCC bug 105329)
          const std::string why = fw.judge(what, g.o[x], t.o[x], bound, modelled);
          if (!why.empty()) return why;
        }
        const std::size_t x = p.row_at(b, h, i);
        const double rel_log = rel_l < 1 ? rel_l / (1 - rel_l) : HUGE_VAL;
        const double log_l = std::fabs(t.lse[x]) + beta * s_abs;
        const double bound = rel_log + (2 * 0x1p-23 + f(sp.log_l_fmt)) * log_l +
                             ulp(std::max(std::fabs(g.lse[x]), std::fabs(t.lse[x])), sp.lse_fmt);
        const std::string why = fw.judge([&] { return "LSE" + where_row(p, x); }, g.lse[x], t.lse[x], bound, modelled);
        if (!why.empty()) return why;
      }
    }
  fw.report(stats, "");
  if (!k.caps().backward || !k.caps().unsupported_reason(p, true).empty() || in.d_o.size() != p.q_size()) return "";
  return check_backward_against_twin(k, *twin.kernel, in, sp, g, stats);
}

}  // namespace

std::string gpu_matches_one(const Kernel& k, const Instance& in, nlohmann::json& stats) {
  return check_gpu_matches_cpu_model(k, in, Family{}, stats);
}

// A kernel without a twin skips before any instance is drawn (the fuzz target asks every property of every input).
Property gpu_matches_cpu_model() {
  Property p;
  p.name = "gpu_matches_cpu_model";
  p.sentence =
      "A GPU kernel's forward equals its CPU twin's bit for bit, except where the GPU's exp/log moved a rounding, and "
      "there within the bound derived from the numerics' rounding points; its backward, from the same O and LSE, "
      "equals the twin's (else the CPU model's) with δ bit for bit and dQ, dK, dV within the bound derived from the "
      "tensor-core sums, exp and the rounding points";
  p.needs_backward = false;
  const auto no_twin = [](const Kernel& k, const Family& f) {
    Outcome o = make_outcome("gpu_matches_cpu_model", k, f);
    o.status = Status::kSkip;
    o.message = k.name() + ": no CPU twin (CPU kernels are their own models)";
    return o;
  };
  p.check = [no_twin](const Kernel& k, const Family& f, const Budget& b) {
    if (k.cpu_twin().kernel)
      return run_per_instance("gpu_matches_cpu_model", k, f, b, false, check_gpu_matches_cpu_model);
    return no_twin(k, f);
  };
  p.check_literal = [no_twin](const Kernel& k, const Family& f, const std::shared_ptr<const Instance>& in) {
    if (k.cpu_twin().kernel) return run_literal("gpu_matches_cpu_model", k, f, in, false, check_gpu_matches_cpu_model);
    return no_twin(k, f);
  };
  return p;
}

}  // namespace attncheck
