// flash_model_forward.cpp — model_forward: the tiled forward pass at a NumericsSpec's rounding points.
//
// Per (b, h), per row, per key tile: steps 1–6 of numerics_spec.h update the row's running max m, row sum l
// and accumulator acc[d]; step 7 normalises after the last key tile. Rows are independent softmaxes, so this
// is the per-query-tile order's arithmetic exactly (tile_q changes nothing in the forward). Scratch buffers are
// sized once per call; nothing is allocated inside the loops. See flash_model.h for the contract.
// The CUDA kernel (kernels/cuda/flash_fwd.cu) carries the same `// step N:` labels; its m_run, l_run are m, l
// here. Where it differs: the GPU's exp2f/expf/logf (up to 2 fp32 ulps, cuda_twin.h), the tensor cores' sums in
// steps 1 and 5 (TENSOR_CORES.md), step 4's lane order, and causal fa2's skipped key tiles, which this model visits
// (same bits while V there is finite). kernels/cuda/cuda_twin.cpp is the kernel's order on the CPU.
// Run the tests: ctest -R "FlashModel|PaperTransliteration"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/flash_model_steps.h"

namespace attncheck {

using model_detail::Consts;
using model_detail::kNegInf;

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

void check_forward_inputs(const NumericsSpec& spec, const Instance& in) {
  const Problem& p = in.problem;
  p.validate();
  if (spec.tile_q < 1 || spec.tile_k < 1)
    throw Error("spec " + spec.name + ": tiles must be >= 1 (got tile_q " + std::to_string(spec.tile_q) + ", tile_k " +
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
  const float thr = round_float(r - c.tol, spec.s_fmt);
  int count = 0;
  for (int j = 0; j < n; ++j) count += s[j] >= thr;
  if (count <= 1) return r;
  if (trace) ++trace->policy_tie_tiles;
  float shifted = r;
  if (r > 0.0f) shifted = round_float(c.beta * r, spec.max_fmt);
  else if (r < 0.0f) shifted = 0.0f;
  if (trace) (shifted != r ? trace->shifted_tiles : trace->unshifted_ties) += 1;
  return shifted;
}

// The pass itself, on the formats Fm gives (flash_model_steps.h). Rows are independent softmaxes, so the loops
// run per row and, within the row, per key tile: the query tiling changes no value (any tile_q gives the
// same bits), and the row's scores are formed once, for all keys together (dots()), before the tile loop.
template <class Fm>
ForwardOutput forward_pass(const NumericsSpec& spec, Fm fm, const Instance& in, ModelTrace* trace) {
  constexpr auto kInt = std::numeric_limits<int>::max();
  const model_detail::FormatTable f = fm.get();
  const Problem& p = in.problem;
  const Consts c = model_detail::make_consts(spec, p);
  const int d = p.head_dim, tk = spec.tile_k, n_k = p.n_k, dw = model_detail::padded(d),
            kw = model_detail::padded(n_k);
  // V's rows padded to dw floats (the weighted sums of step 5 run in whole register blocks); K transposed.
  const std::vector<float> q = model_detail::to_float(in.q),
                           v = model_detail::to_float_rows(in.v, std::size_t(p.batch) * p.heads_kv * n_k, d, dw);
  ForwardOutput out;
  out.o.assign(p.q_size(), 0.0);
  out.lse.assign(p.rows(), 0.0);

  // Per row: visibility, scores (all keys), running state. Per (row, key tile): p̄ and the block output.
  std::vector<float> kt, dot(kw), s(n_k), acc(d), pbar(std::min(tk, n_k)), pv(pbar.size()), block_out(dw);
  std::vector<char> vis(n_k);

  for (int b = 0; b < p.batch; ++b) {
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      model_detail::transpose_slice(in.k, p.kv_at(b, hk, 0, 0), n_k, d, kw, kt);
      const float* v_slice = &v[(std::size_t(b) * p.heads_kv + hk) * n_k * dw];
      for (int h = hk * p.group(); h < (hk + 1) * p.group(); ++h) {
        for (int i = 0; i < p.n_q; ++i) {
          const float* qi = &q[p.q_at(b, h, i, 0)];
          // Instance::visible for the whole row: causal (bottom-right) and the keep-mask.
          const int last_visible = p.causal ? i + n_k - p.n_q : kInt;
          const std::uint8_t* keep = p.has_mask ? &in.mask[p.score_at(b, h, i, 0)] : nullptr;
          bool any_visible = false;
          for (int j = 0; j < n_k; ++j) {
            vis[j] = j <= last_visible && (!keep || keep[j]);
            any_visible |= vis[j] != 0;
          }
          // step 1: scores of this row against every key; masked keys get the mask value.
          model_detail::dots(qi, kt.data(), kw, d, dot.data());
          // (Branch-free without bias: the rounding of a masked key's product is computed and dropped.)
          if (p.has_bias) {
            const double* bias_row = &in.bias[p.score_at(b, h, i, 0)];
            for (int j = 0; j < n_k; ++j)
              s[j] = vis[j] ? model_detail::finish_score(f, c, dot[j], bias_row + j) : c.mask;
          } else {
            for (int j = 0; j < n_k; ++j) {
              const float sj = model_detail::finish_score(f, c, dot[j], nullptr);
              s[j] = vis[j] ? sj : c.mask;
            }
          }

          float m = c.mask, l = 0.0f;  // the paper starts from −max(bf16), fa2 from −inf
          float l_pv = 0.0f;             // normalise_by_pv_sum's l̄
          std::fill(acc.begin(), acc.end(), 0.0f);
          bool saw_p_one = false;
          for (int k0 = 0; k0 < n_k; k0 += tk) {
            const int keys = std::min(tk, n_k - k0);
            const float* st = &s[k0];
            const char* vt = &vis[k0];
            if (trace) ++trace->row_tiles;
            // step 2: r = the tile max (exact in s_fmt), the max policy, the new running max. A NaN score (only
            // an inf − inf inside an overflowing dot product makes one) does not enter r, at any key: the max
            // starts from −inf and std::max(r, NaN) = r, as flash_fwd.cu's fmaxf and the CUDA twin do.
            float r = kNegInf;
            for (int j = 0; j < keys; ++j) r = std::max(r, st[j]);
            if (trace) {
              int ties = 0;
              for (int j = 0; j < keys; ++j) ties += vt[j] && st[j] == r;
              trace->exact_tie_tiles += ties > 1;
            }
            const float r_shifted = apply_max_policy(spec, c, st, keys, r, trace);  // the spec's r'
            const float m_old = m;
            const float m_new = round_float(std::max(m_old, r_shifted), f.max);
            // FA2 (Check_inf): a running max of −inf is used as 0 in subtractions, so no (−inf) − (−inf).
            const float m_sub = (f.folded && m_new == kNegInf) ? 0.0f : m_new;
            const float m_scaled = m_sub * c.scale_log2e;
            // step 3: p̄ = exp(s − m) by exp_mode, rounded to p_fmt; masked keys give 0.
            for (int j = 0; j < keys; ++j)
              pbar[j] = vt[j] ? model_detail::exp_shifted_to(f, c, st[j], m_sub, m_scaled, f.p) : 0.0f;
            // As p̄ enters the P̄V product; no second pass when pv_in_fmt rounds p_fmt values to themselves.
            const bool pv_is_pbar = model_detail::rounds_to_itself(f.p, f.pv_in);
            if (!pv_is_pbar)
              for (int j = 0; j < keys; ++j) pv[j] = model_detail::round_again(pbar[j], f.p, f.pv_in);
            const float* pvp = pv_is_pbar ? pbar.data() : pv.data();
            if (trace) {
              for (int j = 0; j < keys; ++j) {
                if (vt[j] && pvp[j] == 1.0f) {
                  ++trace->p_one;
                  saw_p_one = true;
                }
              }
            }
            // step 4: block row sum of p̄ (p_fmt values) in fp32, rounded, clamped (paper: >= 1e-10); a clamp is
            // counted in `clamps` when given.
            const auto block_row_sum = [&](const float* w, std::uint64_t* clamps) {
              float sum = 0.0f;
              for (int j = 0; j < keys; ++j) sum = sum + w[j];
              sum = round_float(sum, f.block_sum);
              if (sum < c.sum_min) {
                sum = c.sum_min;
                if (clamps) ++*clamps;
              }
              return sum;
            };
            const float block_sum = block_row_sum(pbar.data(), trace ? &trace->clamped_sums : nullptr);
            // (normalise_by_pv_sum) the same block sum over the weights step 5 multiplies.
            const float block_sum_pv = spec.normalise_by_pv_sum ? block_row_sum(pvp, nullptr) : 0.0f;
            // step 5: block output Σ_j round(p̄_j, pv_in_fmt)·v_j in fp32 (key order), rounded.
            std::fill(block_out.begin(), block_out.end(), 0.0f);
            model_detail::add_weighted_rows(pvp, v_slice + std::size_t(k0) * dw, keys, dw, block_out.data());
            // step 6: rescale the running state by α = exp(m_old − m_new) and add the block's share.
            const float alpha = round_float(
                f.folded ? std::exp2((m_old - m_sub) * c.scale_log2e)
                         : model_detail::exp_of_rounded(f, c, round_float(m_old - m_new, f.s)),
                f.rescale);
            l = round_float(round_float(alpha * l, f.rowsum) + block_sum, f.rowsum);
            if (spec.normalise_by_pv_sum)
              l_pv = round_float(round_float(alpha * l_pv, f.rowsum) + block_sum_pv, f.rowsum);
            for (int t = 0; t < d; ++t) {
              const float bo = round_float(block_out[t], f.block_out);
              acc[t] = round_float(round_float(alpha * acc[t], f.acc) + bo, f.acc);
            }
            m = m_new;
          }
          // step 7: normalise; LSE. A row with no visible key (or, in fa2, a running max still −inf) is empty.
          const std::size_t row = p.row_at(b, h, i);
          double* o_row = &out.o[p.q_at(b, h, i, 0)];
          if (trace) {
            ++trace->rows;
            trace->rows_with_p_one += saw_p_one;
          }
          if (!any_visible || m == kNegInf) {
            if (trace) ++trace->masked_rows;
            out.lse[row] = -HUGE_VAL;  // o_row stays 0
            continue;
          }
          const bool empty_sum = l == 0.0f || std::isnan(l);  // FA2: sum == 0 || sum != sum
          if (empty_sum && trace) ++trace->zero_row_sums;
          const float l_o = spec.normalise_by_pv_sum ? l_pv : l;  // what O is divided by
          if (f.reciprocal) {
            // FA2: inv_sum = (sum == 0 || sum != sum) ? 1 : 1 / sum.
            const bool empty_o = l_o == 0.0f || std::isnan(l_o);
            const float inv = empty_o ? 1.0f : round_float(1.0f / l_o, f.out_div);
            for (int t = 0; t < d; ++t) o_row[t] = round_float(round_float(acc[t] * inv, f.out_div), f.out);
          } else {
            for (int t = 0; t < d; ++t) o_row[t] = round_float(round_float(acc[t] / l_o, f.out_div), f.out);
          }
          const float log_l = round_float(std::log(l), f.log_l);
          float lse;
          if (f.scale_in_exp) {
            lse = std::fma(m, c.scale, log_l);  // nvcc contracts FA2's row_max * scale + __logf(row_sum)
            if (empty_sum && f.reciprocal) lse = HUGE_VALF;  // FA2 writes +inf for an empty sum
          } else {
            lse = log_l + m;
          }
          out.lse[row] = round_float(lse, f.lse);
        }
      }
    }
  }
  return out;
}

}  // namespace

ForwardOutput model_forward(const NumericsSpec& spec, const Instance& in, ModelTrace* trace) {
  check_forward_inputs(spec, in);
  const model_detail::FormatTable f = model_detail::format_table(spec);
  if (f == model_detail::kFa2Formats)
    return forward_pass(spec, model_detail::FixedFormats<model_detail::kFa2Formats>{}, in, trace);
  if (f == model_detail::kPaperFormats)
    return forward_pass(spec, model_detail::FixedFormats<model_detail::kPaperFormats>{}, in, trace);
  return forward_pass(spec, model_detail::DynamicFormats{f}, in, trace);
}

ForwardOutput model_forward_generic(const NumericsSpec& spec, const Instance& in, ModelTrace* trace) {
  check_forward_inputs(spec, in);
  return forward_pass(spec, model_detail::DynamicFormats{model_detail::format_table(spec)}, in, trace);
}

}  // namespace attncheck
