// flash_model_backward.cpp — model_backward: FlashAttention-2's algorithm 2 at a NumericsSpec's rounding
// points, recomputing P from the forward's LSE.
//
// step 8 computes δ per row from the kernel's own O. Then per (b, h), per key tile: step 9 recomputes s and
// p and forms dP and dS for every (query, key of the tile) pair (these depend on no tile), then per query
// tile adds each tile's partial dV, dK, dQ into the running sums; step 10 scales and rounds. The sums inside step 9
// (the dot products and each tile's partial) are sequential fp32 unless the caller passes others (BackwardSums: the
// CUDA backward's twin passes the tensor cores'). Per-element accumulation order: dQ over key tiles in
// increasing order, dK and dV over query tiles in increasing order (the same for either loop nesting, so the
// paper's query-outer loop and FA2's key-outer loop give identical results). GQA: each query head's dK, dV are
// rounded to grad_out_fmt, then summed over the group in fp32 and rounded once (FA2's dk_expanded + sum).
// The max policy does not enter: P comes from LSE. The CUDA backward (kernels/cuda/flash_bwd.cu) carries the same
// step labels and names; it skips causal fa2's tiles with no visible pair, which this model visits (+0 partials
// into sums that start at +0: same bits while Q, K and dO there are finite).
// Run the tests: ctest -R "FlashModel|PaperTransliteration"
#include <algorithm>
#include <cmath>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/flash_model_steps.h"

namespace attncheck {

using model_detail::Consts;

namespace {

void check_backward_inputs(const NumericsSpec& spec, const Instance& in, const ForwardOutput& fwd) {
  const Problem& p = in.problem;
  p.validate();
  if (spec.tile_q < 1 || spec.tile_k < 1) throw Error("spec " + spec.name + ": tiles must be >= 1");
  if (in.q.size() != p.q_size() || in.k.size() != p.kv_size() || in.v.size() != p.kv_size())
    throw Error("model_backward: Q, K, V sizes do not match the problem " + p.describe());
  if (in.d_o.size() != p.q_size()) throw Error("model_backward: the instance has no dO (or the wrong size)");
  if (fwd.o.size() != p.q_size() || fwd.lse.size() != p.rows())
    throw Error("model_backward: forward outputs do not match the problem " + p.describe());
  if (p.has_mask && in.mask.size() != p.scores_size()) throw Error("model_backward: keep-mask has the wrong size");
  if (p.has_bias && in.bias.size() != p.scores_size()) throw Error("model_backward: bias has the wrong size");
}

// The pass itself, on the formats Fm gives (flash_model_steps.h). Step 9's elementwise part (s, p, dP, dS of
// one (query, key) pair) depends on no tile, so it is formed per key tile for all queries at once: one key
// against every query (dots() over Q and dO transposed), then the tile partials in the spec's order.
template <class Fm>
BackwardOutput backward_pass(const NumericsSpec& spec, Fm fm, const Instance& in, const ForwardOutput& fwd,
                             ModelTrace* trace, const BackwardSums& sums) {
  // The sums (flash_model.h BackwardSums): the model's sequential fp32 ones unless the caller gives others.
  const auto dots = sums.dots ? sums.dots : model_detail::dots;
  const auto tile_sum = [&sums](const float* w, const float* rows, int n, int width, float* out) {
    std::fill(out, out + width, 0.0f);
    if (sums.tile_sum) sums.tile_sum(w, rows, n, width, out);
    else model_detail::add_weighted_rows(w, rows, n, width, out);
  };
  const model_detail::FormatTable f = fm.get();
  const Problem& p = in.problem;
  const Consts c = model_detail::make_consts(spec, p);
  const int d = p.head_dim, tq = spec.tile_q, tk = spec.tile_k, group = p.group(), n_q = p.n_q,
            dw = model_detail::padded(d), qw = model_detail::padded(n_q);
  // Rows padded to dw floats for the weighted sums (add_weighted_rows); Q and dO also transposed per head.
  const std::size_t q_rows = p.rows(), kv_rows = std::size_t(p.batch) * p.heads_kv * p.n_k;
  const std::vector<float> q = model_detail::to_float_rows(in.q, q_rows, d, dw),
                           k = model_detail::to_float_rows(in.k, kv_rows, d, dw),
                           v = model_detail::to_float_rows(in.v, kv_rows, d, dw),
                           d_o = model_detail::to_float_rows(in.d_o, q_rows, d, dw), o = model_detail::to_float(fwd.o);
  const auto q_row = [&](int b, int h, int i) { return std::size_t(p.row_at(b, h, i)) * dw; };
  const auto kv_row = [&](int b, int hk, int j) { return ((std::size_t(b) * p.heads_kv + hk) * p.n_k + j) * dw; };
  BackwardOutput out;
  out.dq.assign(p.q_size(), 0.0);
  out.dk.assign(p.kv_size(), 0.0);
  out.dv.assign(p.kv_size(), 0.0);
  out.delta.assign(p.rows(), 0.0);

  // step 8: δ_i = Σ_c round(dO_ic · O_ic, delta_prod_fmt), fp32 accumulation in column order, rounded.
  std::vector<float> delta(p.rows());
  for (std::size_t row = 0; row < p.rows(); ++row) {
    float acc = 0.0f;
    for (int t = 0; t < d; ++t) {
      const std::size_t e = row * d + t;
      acc = acc + round_float(d_o[row * dw + t] * o[e], f.delta_prod);
    }
    delta[row] = round_float(acc, f.delta);
    out.delta[row] = delta[row];
  }

  // Running sums of one query head (dQ) and of that head's view of K, V (dK, dV); tile scratch: p̄ as it
  // enters dV and dS for every query against the tile's keys ([query][key in tile]).
  const int tkc = std::min(tk, p.n_k);
  std::vector<float> dq_acc(std::size_t(n_q) * d), dk_acc(std::size_t(p.n_k) * d), dv_acc(std::size_t(p.n_k) * d);
  std::vector<float> pvt(std::size_t(n_q) * tkc), dst(std::size_t(n_q) * tkc);
  std::vector<float> part(dw), w_col(std::min(tq, n_q)), qt, dot_t, sdot(qw), dpdot(qw), lse(n_q), lse_scaled(n_q);
  // GQA: per-head dK, dV (rounded) summed over the group in fp32.
  std::vector<float> dk_group(p.kv_size(), 0.0f), dv_group(p.kv_size(), 0.0f);

  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / group;
      model_detail::transpose_slice(in.q, p.q_at(b, h, 0, 0), n_q, d, qw, qt);
      model_detail::transpose_slice(in.d_o, p.q_at(b, h, 0, 0), n_q, d, qw, dot_t);
      for (int i = 0; i < n_q; ++i) {
        lse[i] = static_cast<float>(fwd.lse[p.row_at(b, h, i)]);
        lse_scaled[i] = lse[i] * c.log2e;  // FA2: max_scaled = lse · float(M_LOG2E)
      }
      std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      for (int k0 = 0; k0 < p.n_k; k0 += tk) {
        const int keys = std::min(tk, p.n_k - k0);
        // step 9 (per pair): s, p = exp(s − LSE), dP = dO·v, dS = p ∘ (dP − δ); masked: p = 0, hence dS = 0.
        for (int j = 0; j < keys; ++j) {
          const int kj = k0 + j;
          dots(&k[kv_row(b, hk, kj)], qt.data(), qw, d, sdot.data());
          dots(&v[kv_row(b, hk, kj)], dot_t.data(), qw, d, dpdot.data());
          for (int i = 0; i < n_q; ++i) {
            float* pvij = &pvt[std::size_t(i) * tkc + j];
            float* dsij = &dst[std::size_t(i) * tkc + j];
            if (!in.visible(b, h, i, kj)) {
              *pvij = *dsij = 0.0f;
              continue;
            }
            const double* bias = p.has_bias ? &in.bias[p.score_at(b, h, i, kj)] : nullptr;
            const float s = model_detail::finish_score(f, c, sdot[i], bias);
            const float pr = model_detail::exp_shifted_to(f, c, s, lse[i], lse_scaled[i], f.bwd_p);
            *pvij = model_detail::round_again(pr, f.bwd_p, f.pv_in);
            if (trace && *pvij == 1.0f) ++trace->bwd_p_one;
            const float dp = round_float(dpdot[i], f.dp);
            const float t1 = f.scale_in_exp ? pr : round_float(pr * c.scale, f.ds_term);
            const float t2 = round_float(dp - delta[p.row_at(b, h, i)], f.ds_term);
            *dsij = round_float(t1 * t2, f.ds);
          }
        }
        for (int q0 = 0; q0 < n_q; q0 += tq) {
          const int rows = std::min(tq, n_q - q0);
          // step 9 (per key): dV_j += Σ_i round(p_ij)·dO_i and dK_j += Σ_i dS_ij·q_i, query order.
          for (int j = 0; j < keys; ++j) {
            const int kj = k0 + j;
            float* dvj = &dv_acc[std::size_t(kj) * d];
            float* dkj = &dk_acc[std::size_t(kj) * d];
            for (int r = 0; r < rows; ++r) w_col[r] = pvt[std::size_t(q0 + r) * tkc + j];
            tile_sum(w_col.data(), &d_o[q_row(b, h, q0)], rows, dw, part.data());
            for (int t = 0; t < d; ++t)
              dvj[t] = round_float(dvj[t] + round_float(part[t], f.grad_partial), f.grad_acc);
            for (int r = 0; r < rows; ++r) w_col[r] = dst[std::size_t(q0 + r) * tkc + j];
            tile_sum(w_col.data(), &q[q_row(b, h, q0)], rows, dw, part.data());
            for (int t = 0; t < d; ++t)
              dkj[t] = round_float(dkj[t] + round_float(part[t], f.grad_partial), f.grad_acc);
          }
          // step 9 (per row): dQ_i += Σ_j dS_ij·k_j, key order.
          for (int r = 0; r < rows; ++r) {
            float* dqi = &dq_acc[std::size_t(q0 + r) * d];
            tile_sum(&dst[std::size_t(q0 + r) * tkc], &k[kv_row(b, hk, k0)], keys, dw, part.data());
            for (int t = 0; t < d; ++t)
              dqi[t] = round_float(dqi[t] + round_float(part[t], f.grad_partial), f.grad_acc);
          }
        }
      }
      // step 10: fa2 multiplies dQ, dK by scale at the end (the paper folded it into dS); round.
      const float post = f.scale_in_exp ? c.scale : 1.0f;
      for (int i = 0; i < n_q; ++i)
        for (int t = 0; t < d; ++t)
          out.dq[p.q_at(b, h, i, t)] = round_float(dq_acc[std::size_t(i) * d + t] * post, f.grad_out);
      for (int j = 0; j < p.n_k; ++j) {
        for (int t = 0; t < d; ++t) {
          const std::size_t e = p.kv_at(b, hk, j, t), a = std::size_t(j) * d + t;
          dk_group[e] = dk_group[e] + round_float(dk_acc[a] * post, f.grad_out);
          dv_group[e] = dv_group[e] + round_float(dv_acc[a], f.grad_out);
        }
      }
    }
  }
  // step 10 (GQA): the group sum rounded once; with group == 1 it is round(0 + x) = x, except that −0 becomes +0
  // (flash_bwd.cu writes dK, dV directly then, through group_of_one: the same).
  for (std::size_t e = 0; e < p.kv_size(); ++e) {
    out.dk[e] = round_float(dk_group[e], f.grad_out);
    out.dv[e] = round_float(dv_group[e], f.grad_out);
  }
  return out;
}

}  // namespace

BackwardOutput model_backward(const NumericsSpec& spec, const Instance& in, const ForwardOutput& fwd,
                              ModelTrace* trace, const BackwardSums& sums) {
  check_backward_inputs(spec, in, fwd);
  const model_detail::FormatTable f = model_detail::format_table(spec);
  if (f == model_detail::kFa2Formats)
    return backward_pass(spec, model_detail::FixedFormats<model_detail::kFa2Formats>{}, in, fwd, trace, sums);
  if (f == model_detail::kPaperFormats)
    return backward_pass(spec, model_detail::FixedFormats<model_detail::kPaperFormats>{}, in, fwd, trace, sums);
  return backward_pass(spec, model_detail::DynamicFormats{f}, in, fwd, trace, sums);
}

BackwardOutput model_backward_generic(const NumericsSpec& spec, const Instance& in, const ForwardOutput& fwd,
                                      ModelTrace* trace) {
  check_backward_inputs(spec, in, fwd);
  return backward_pass(spec, model_detail::DynamicFormats{model_detail::format_table(spec)}, in, fwd, trace, {});
}

}  // namespace attncheck
