// flash_model_forward.cpp — model_forward: the tiled forward pass at a NumericsSpec's rounding points.
//
// Per (b, h), per query tile, per key tile, per row: steps 1–6 of numerics_spec.h update the row's running
// max m, row sum l and accumulator acc[d]; step 7 normalises after the last key tile. Scratch buffers are
// sized once per call; nothing is allocated inside the loops. See flash_model.h for the contract.
// Run the tests: ctest -R "FlashModel|PaperTransliteration"
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/flash_model_steps.h"

namespace attncheck {

using model_detail::Consts;

std::string ModelTrace::describe() const {
  std::ostringstream s;
  s << "rows=" << rows << " masked_rows=" << masked_rows << " row_tiles=" << row_tiles << " p_one=" << p_one
    << " rows_with_p_one=" << rows_with_p_one << " exact_tie_tiles=" << exact_tie_tiles
    << " policy_tie_tiles=" << policy_tie_tiles << " shifted_tiles=" << shifted_tiles
    << " unshifted_ties=" << unshifted_ties << " clamped_sums=" << clamped_sums << " zero_row_sums=" << zero_row_sums
    << " bwd_p_one=" << bwd_p_one;
  return s.str();
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_forward_inputs(const NumericsSpec& spec, const Instance& in) {
  const Problem& p = in.problem;
  p.validate();
  if (spec.tile_q < 1 || spec.tile_k < 1)
    throw Error("spec " + spec.name + ": tiles must be >= 1 (got " + std::to_string(spec.tile_q) + "x" +
                std::to_string(spec.tile_k) + ")");
  if (in.q.size() != p.q_size() || in.k.size() != p.kv_size() || in.v.size() != p.kv_size())
    throw Error("model_forward: Q, K, V sizes do not match the problem " + p.describe());
  if (p.has_mask && in.mask.size() != p.scores_size()) throw Error("model_forward: keep-mask has the wrong size");
  if (p.has_bias && in.bias.size() != p.scores_size()) throw Error("model_forward: bias has the wrong size");
}

// step 2's max policy: the tile max r as the policy shifts it (r' in numerics_spec.h).
float apply_max_policy(const NumericsSpec& spec, const Consts& c, const float* s, int n, float r,
                       ModelTrace* trace) {
  if (spec.max_policy.kind != MaxPolicy::kPaperShift || !std::isfinite(r)) return r;
  // The public code counts `attn_weights >= block_row_maxes - 1e-3` on bf16 tensors: threshold in s_fmt.
  const float threshold = round_float(r - c.tol, spec.s_fmt);
  int count = 0;
  for (int j = 0; j < n; ++j) count += s[j] >= threshold;
  if (count <= 1) return r;
  if (trace) ++trace->policy_tie_tiles;
  float shifted = r;
  if (r > 0.0f) shifted = round_float(c.beta * r, spec.max_fmt);
  else if (r < 0.0f) shifted = 0.0f;
  if (trace) (shifted != r ? trace->shifted_tiles : trace->unshifted_ties) += 1;
  return shifted;
}

}  // namespace

ForwardOutput model_forward(const NumericsSpec& spec, const Instance& in, ModelTrace* trace) {
  check_forward_inputs(spec, in);
  const Problem& p = in.problem;
  const Consts c = model_detail::make_consts(spec, p);
  const int d = p.head_dim, tq = spec.tile_q, tk = spec.tile_k;
  const std::vector<float> q = model_detail::to_float(in.q), k = model_detail::to_float(in.k),
                           v = model_detail::to_float(in.v);
  ForwardOutput out;
  out.o.assign(p.q_size(), 0.0);
  out.lse.assign(p.rows(), 0.0);

  // Per query tile: running state of each row. Per (row, key tile): scores, p̄ and the block output.
  std::vector<float> m(tq), l(tq), acc(std::size_t(tq) * d), s(tk), pbar(tk), pv(tk), block_out(d);
  std::vector<char> any_visible(tq), vis(tk), saw_p_one(tq);

  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      for (int q0 = 0; q0 < p.n_q; q0 += tq) {
        const int rows = std::min(tq, p.n_q - q0);
        std::fill(m.begin(), m.end(), c.mask);  // the paper starts from −max(bf16), fa2 from −inf
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(any_visible.begin(), any_visible.end(), 0);
        std::fill(saw_p_one.begin(), saw_p_one.end(), 0);
        for (int k0 = 0; k0 < p.n_k; k0 += tk) {
          const int keys = std::min(tk, p.n_k - k0);
          for (int r = 0; r < rows; ++r) {
            const int i = q0 + r;
            const float* qi = &q[p.q_at(b, h, i, 0)];
            float* acc_r = &acc[std::size_t(r) * d];
            if (trace) ++trace->row_tiles;
            // step 1: scores of this row against the tile's keys; masked keys get the mask value.
            for (int j = 0; j < keys; ++j) {
              const int kj = k0 + j;
              vis[j] = in.visible(b, h, i, kj);
              if (!vis[j]) {
                s[j] = c.mask;
                continue;
              }
              any_visible[r] = 1;
              const double* bias = p.has_bias ? &in.bias[p.score_at(b, h, i, kj)] : nullptr;
              s[j] = model_detail::step1_score(spec, c, qi, &k[p.kv_at(b, hk, kj, 0)], d, bias);
            }
            // step 2: tile max (exact in s_fmt), the max policy, the new running max.
            float tile_max = s[0];
            for (int j = 1; j < keys; ++j) tile_max = std::max(tile_max, s[j]);
            if (trace) {
              int ties = 0;
              for (int j = 0; j < keys; ++j) ties += vis[j] && s[j] == tile_max;
              trace->exact_tie_tiles += ties > 1;
            }
            const float r_shifted = apply_max_policy(spec, c, s.data(), keys, tile_max, trace);
            const float m_old = m[r];
            const float m_new = round_float(std::max(m_old, r_shifted), spec.max_fmt);
            // FA2 (Check_inf): a running max of −inf is used as 0 in subtractions, so no (−inf) − (−inf).
            const float m_sub = (c.folded && m_new == kNegInf) ? 0.0f : m_new;
            const float m_scaled = m_sub * c.scale_log2;
            // step 3: p̄ = exp(s − m) by exp_mode, rounded to p_fmt; masked keys give 0.
            for (int j = 0; j < keys; ++j) {
              pbar[j] = vis[j] ? round_float(model_detail::exp_shifted(spec, c, s[j], m_sub, m_scaled), spec.p_fmt)
                               : 0.0f;
              pv[j] = round_float(pbar[j], spec.pv_in_fmt);  // as p̄ enters the P̄V product
              if (trace && vis[j] && pv[j] == 1.0f) {
                ++trace->p_one;
                saw_p_one[r] = 1;
              }
            }
            // step 4: block row sum of p̄ (p_fmt values) in fp32, rounded, clamped (paper: >= 1e-10).
            float block_sum = 0.0f;
            for (int j = 0; j < keys; ++j) block_sum = block_sum + pbar[j];
            block_sum = round_float(block_sum, spec.block_sum_fmt);
            if (block_sum < c.sum_min) {
              block_sum = c.sum_min;
              if (trace) ++trace->clamped_sums;
            }
            // step 5: block output Σ_j round(p̄_j, pv_in_fmt)·v_j in fp32 (key order), rounded.
            std::fill(block_out.begin(), block_out.end(), 0.0f);
            for (int j = 0; j < keys; ++j) {
              const float* vj = &v[p.kv_at(b, hk, k0 + j, 0)];
              for (int t = 0; t < d; ++t) block_out[t] = block_out[t] + pv[j] * vj[t];
            }
            // step 6: rescale the running state by α = exp(m_old − m_new) and add the block's share.
            const float alpha = round_float(
                c.folded ? std::exp2((m_old - m_sub) * c.scale_log2) : std::exp(round_float(m_old - m_new, spec.s_fmt)),
                spec.rescale_fmt);
            l[r] = round_float(round_float(alpha * l[r], spec.rowsum_fmt) + block_sum, spec.rowsum_fmt);
            for (int t = 0; t < d; ++t) {
              const float bo = round_float(block_out[t], spec.block_out_fmt);
              acc_r[t] = round_float(round_float(alpha * acc_r[t], spec.acc_fmt) + bo, spec.acc_fmt);
            }
            m[r] = m_new;
          }
        }
        // step 7: normalise; LSE. A row with no visible key (or, in fa2, a running max still −inf) is empty.
        for (int r = 0; r < rows; ++r) {
          const int i = q0 + r;
          const std::size_t row = p.row_at(b, h, i);
          double* o_row = &out.o[p.q_at(b, h, i, 0)];
          if (trace) {
            ++trace->rows;
            trace->rows_with_p_one += saw_p_one[r];
          }
          if (!any_visible[r] || m[r] == kNegInf) {
            if (trace) ++trace->masked_rows;
            out.lse[row] = -HUGE_VAL;  // o_row stays 0
            continue;
          }
          const float* acc_r = &acc[std::size_t(r) * d];
          const bool empty_sum = !(l[r] != 0.0f);  // 0 or NaN
          if (empty_sum && trace) ++trace->zero_row_sums;
          if (spec.reciprocal_normalise) {
            // FA2: inv_sum = (sum == 0 || sum != sum) ? 1 : 1 / sum.
            const float inv = empty_sum ? 1.0f : round_float(1.0f / l[r], spec.out_div_fmt);
            for (int t = 0; t < d; ++t)
              o_row[t] = round_float(round_float(acc_r[t] * inv, spec.out_div_fmt), spec.out_fmt);
          } else {
            for (int t = 0; t < d; ++t)
              o_row[t] = round_float(round_float(acc_r[t] / l[r], spec.out_div_fmt), spec.out_fmt);
          }
          const float log_l = round_float(std::log(l[r]), spec.log_l_fmt);
          float lse;
          if (spec.scale_in_exp) {
            lse = std::fma(m[r], c.scale, log_l);  // nvcc contracts FA2's row_max * scale + __logf(row_sum)
            if (empty_sum && spec.reciprocal_normalise) lse = HUGE_VALF;  // FA2 writes +inf for an empty sum
          } else {
            lse = log_l + m[r];
          }
          out.lse[row] = round_float(lse, spec.lse_fmt);
        }
      }
    }
  }
  return out;
}

}  // namespace attncheck
