// cuda_twin.cpp — twin_forward: flash_fwd.cu's arithmetic on the CPU, row by row (see cuda_twin.h).
// Every `// step N:` below is the kernel's step N; the lane structure (thread t of a quad holds keys 8n+2t,
// 8n+2t+1 of each 8-key slice) only matters for the row sum's order, which is reproduced exactly.
#include "kernels/cuda/cuda_twin.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/flash_model.h"
#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/mma_model.h"

namespace attncheck::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

template <class Spec>
ForwardOutput twin(const Instance& in, float beta, float tol) {
  const Problem& p = in.problem;
  const int d = p.head_dim, kd = d <= 64 ? 64 : 128, tk = Spec::tile_k, tq = Spec::tile_q;
  const float scale = static_cast<float>(p.scale);
  const float scale_log2e = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634);
  const int diag = p.n_k - p.n_q;
  ForwardOutput out;
  out.o.assign(p.q_size(), 0.0);
  out.lse.assign(p.rows(), 0.0);
  // The kv head's K (key rows) and V (transposed: a column's keys in order), as floats, zero past n_k up to a whole
  // key tile: what the kernel's tiles hold, converted once per kv head rather than per query row and tile.
  const int n_pad = (p.n_k + tk - 1) / tk * tk;
  std::vector<float> kh(std::size_t(n_pad) * kd), vh_t(std::size_t(kd) * n_pad);
  std::vector<float> q(kd), acc(kd), s(tk), pv(tk), ones(tk, 1.f);
  int loaded = -1;  // b · heads_kv + hk of the kv head in kh, vh_t
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      if (b * p.heads_kv + hk != loaded) {
        std::fill(kh.begin(), kh.end(), 0.f);
        std::fill(vh_t.begin(), vh_t.end(), 0.f);
        for (int j = 0; j < p.n_k; ++j)
          for (int c = 0; c < d; ++c) {
            kh[std::size_t(j) * kd + c] = static_cast<float>(in.k[p.kv_at(b, hk, j, c)]);
            vh_t[std::size_t(c) * n_pad + j] = static_cast<float>(in.v[p.kv_at(b, hk, j, c)]);
          }
        loaded = b * p.heads_kv + hk;
      }
      for (int i = 0; i < p.n_q; ++i) {
        const int row0 = (i / tq) * tq, last_row = std::min(row0 + tq, p.n_q) - 1;
        const int n_end = (p.causal && !Spec::paper) ? std::min(p.n_k, last_row + diag + 1) : p.n_k;
        std::fill(q.begin(), q.end(), 0.f);
        for (int c = 0; c < d; ++c) q[c] = static_cast<float>(in.q[p.q_at(b, h, i, c)]);
        float m_run = Spec::mask_value, l_run = 0.f, l_pv = 0.f;  // l_pv: fa2-psum's sum of the bf16 p̄ (O's divisor)
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int n0 = 0; n0 < n_end; n0 += tk) {
          auto exists = [&](int j) { return n0 + j < p.n_k; };
          auto visible = [&](int j) { return exists(j) && in.visible(b, h, i, n0 + j); };
          // step 1: tensor-core q·k (k16 steps chained), rounded; masked keys get mask_value (their dot products,
          // which nothing reads, are not formed: keys past n_k, as the tile's zero padding, and masked ones).
          for (int j = 0; j < tk; ++j) {
            if (!visible(j)) {
              s[j] = exists(j) ? Spec::mask_value : -kInf;
              continue;
            }
            float x = round_float(mma_dot(q.data(), &kh[std::size_t(n0 + j) * kd], d), Spec::qk_fmt);
            if (!Spec::scale_in_exp) x = round_float(x * scale, Spec::s_fmt);
            if (p.has_bias) {
              const float bj = static_cast<float>(in.bias[p.score_at(b, h, i, n0 + j)]);
              x = round_float(x + (Spec::scale_in_exp ? bj / scale : bj), Spec::s_fmt);
            }
            s[j] = x;
          }
          // step 2: max (NaN scores do not enter it, as with the kernel's fmaxf), the fixed policy, m_new;
          // step 6 (first half): α.
          float r = -kInf;
          for (int j = 0; j < tk; ++j) r = std::max(r, s[j]);
          if (Spec::fixed) {
            const float thr = round_float(r - tol, Spec::s_fmt);
            int count = 0;
            for (int j = 0; j < tk; ++j) count += exists(j) && s[j] >= thr;
            if (count > 1 && std::isfinite(r)) r = r > 0.f ? round_float(beta * r, Spec::max_fmt) : (r < 0.f ? 0.f : r);
          }
          const float m_new = round_float(std::max(m_run, r), Spec::max_fmt);
          float alpha;
          if (Spec::exp2_folded) {
            const float m_sub = m_new == -kInf ? 0.f : m_new;  // FA2's Check_inf
            alpha = round_float(std::exp2((m_run - m_sub) * scale_log2e), Spec::rescale_fmt);
          } else {
            alpha = round_float(std::exp(round_float(m_run - m_new, Spec::s_fmt)), Spec::rescale_fmt);
          }
          // step 3: p̄.
          const float m_scaled = m_new == -kInf ? 0.f : m_new * scale_log2e;
          for (int j = 0; j < tk; ++j) {
            const float e = Spec::exp2_folded ? std::exp2(std::fma(s[j], scale_log2e, -m_scaled))
                                              : std::exp(round_float(s[j] - m_new, Spec::s_fmt));
            s[j] = visible(j) ? round_float(e, Spec::p_fmt) : 0.f;
            pv[j] = round_float(s[j], Spec::pv_in_fmt);
          }
          // step 4: each lane t sums keys 8n+2t, 8n+2t+1 (n = 0..7) in order; then ((t0+t1)+(t2+t3)).
          float part[4];
          for (int t = 0; t < 4; ++t) {
            part[t] = 0.f;
            for (int n = 0; n < tk / 8; ++n) part[t] = (part[t] + s[8 * n + 2 * t]) + s[8 * n + 2 * t + 1];
          }
          float block_sum = round_float((part[0] + part[1]) + (part[2] + part[3]), Spec::block_sum_fmt);
          if (block_sum < Spec::block_sum_min) block_sum = round_float(Spec::block_sum_min, Spec::block_sum_fmt);
          // step 5: block output per column: 16-key slices chained through the tensor cores from 0;
          // step 6: acc update. Only the d real columns: the head dim's zero padding to kd gives zero block outputs, so
          // acc stays 0 there, and nothing reads it.
          for (int c = 0; c < d; ++c) {
            const float* v_col = &vh_t[std::size_t(c) * n_pad + n0];
            const float blk = mma_dot(pv.data(), v_col, std::min(tk, p.n_k - n0));
            acc[c] = round_float(round_float(alpha * acc[c], Spec::acc_fmt) + round_float(blk, Spec::block_out_fmt),
                                 Spec::acc_fmt);
          }
          l_run = round_float(round_float(alpha * l_run, Spec::rowsum_fmt) + block_sum, Spec::rowsum_fmt);
          if (Spec::normalise_by_pv_sum) {
            // fa2-psum: the bf16 p̄ against a column of ones on the tensor cores, chained as step 5's columns.
            const float bs =
                round_float(mma_dot(pv.data(), ones.data(), std::min(tk, p.n_k - n0)), Spec::block_sum_fmt);
            l_pv = round_float(round_float(alpha * l_pv, Spec::rowsum_fmt) + bs, Spec::rowsum_fmt);
          }
          m_run = m_new;
        }
        // step 7.
        bool any_visible = false;
        for (int j = 0; j < p.n_k && !any_visible; ++j) any_visible = in.visible(b, h, i, j);
        const bool empty_row = !any_visible || m_run == -kInf;
        const bool empty_sum = l_run == 0.f || std::isnan(l_run);  // FA2: sum == 0 || sum != sum
        const float l_o = Spec::normalise_by_pv_sum ? l_pv : l_run;
        const float inv = (l_o == 0.f || std::isnan(l_o)) ? 1.f : round_float(1.f / l_o, Spec::out_div_fmt);
        for (int c = 0; c < d; ++c) {
          const float o = Spec::reciprocal_normalise ? acc[c] * inv : acc[c] / l_o;
          out.o[p.q_at(b, h, i, c)] = empty_row ? 0.0 : round_float(round_float(o, Spec::out_div_fmt), Spec::out_fmt);
        }
        const float log_l = round_float(std::log(l_run), Spec::log_l_fmt);
        float lse;
        if (Spec::scale_in_exp) {
          lse = std::fma(m_run, scale, log_l);
          if (empty_sum && Spec::reciprocal_normalise) lse = kInf;
        } else {
          lse = log_l + m_run;
        }
        out.lse[p.row_at(b, h, i)] = empty_row ? -HUGE_VAL : round_float(lse, Spec::lse_fmt);
      }
    }
  return out;
}

}  // namespace

ForwardOutput twin_forward(Variant v, const Instance& in, float beta, float tol) {
  in.problem.validate();
  if (in.problem.head_dim > 128) throw Error("twin_forward: head_dim > 128");
  switch (v) {
    case Variant::kFa2: return twin<Fa2>(in, beta, tol);
    case Variant::kFa2Fixed: return twin<Fa2Fixed>(in, beta, tol);
    case Variant::kPaper: return twin<Paper>(in, beta, tol);
    case Variant::kPaperFixed: return twin<PaperFixed>(in, beta, tol);
    case Variant::kFa2Psum: return twin<Fa2Psum>(in, beta, tol);
  }
  throw Error("twin_forward: unknown variant");
}

namespace {

class TwinKernel final : public Kernel {
 public:
  TwinKernel(Variant v, float beta, float tol, const std::string& gpu_name)
      : v_(v), beta_(beta), tol_(tol), gpu_name_(gpu_name) {}
  std::string name() const override { return "twin:" + gpu_name_; }
  std::string summary() const override {
    return "CPU twin of " + gpu_name_ +
           ": its forward's and backward's operations in its order (kernels/cuda/cuda_twin.h)";
  }
  KernelCaps caps() const override {
    KernelCaps c;
    c.backward = true;
    c.mask = c.bias = true;
    c.max_head_dim = 128;
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return twin_forward(v_, in, beta_, tol_); }
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override {
    return twin_backward(v_, in, fwd, beta_, tol_);
  }

 private:
  Variant v_;
  float beta_, tol_;
  std::string gpu_name_;
};

// The backward's sums as flash_bwd.cu does them on the tensor cores: s = q·k and dP = dO·v as a chain of k16 steps
// over the head dim zero-padded to 64 or 128 (the kernels' kd); each tile's partial of dV, dK (over 64 queries) or dQ
// (over 64 keys) as a chain of four k16 steps over the tile's rows, zero-padded to 64 (add_partial, bwd_common.cuh).
// Both from 0. Everything else in the backward is the CPU model's own arithmetic, which flash_bwd.cu follows.
// The padding's k16 steps are skipped: they change no bit (mma_model.h, "Padding").
void tensor_core_dots(const float* a, const float* bt, int width, int d, float* out) {
  float bb[128];
  for (int j = 0; j < width; ++j) {
    for (int t = 0; t < d; ++t) bb[t] = bt[std::size_t(t) * width + j];
    out[j] = mma_dot(a, bb, d);
  }
}
void tensor_core_tile_sum(const float* w, const float* rows, int n, int width, float* out) {
  std::vector<float> b(n);
  for (int t = 0; t < width; ++t) {
    for (int r = 0; r < n; ++r) b[r] = rows[std::size_t(r) * width + t];
    out[t] = mma_dot(w, b.data(), n);
  }
}

}  // namespace

NumericsSpec variant_spec(Variant v, float beta, float tol) {
  NumericsSpec spec = builtin_spec(variant_name(v));
  spec.max_policy.beta = beta, spec.max_policy.tolerance = tol;
  return spec;
}

BackwardOutput twin_backward(Variant v, const Instance& in, const ForwardOutput& fwd, float beta, float tol) {
  BackwardSums sums;
  sums.dots = tensor_core_dots;
  sums.tile_sum = tensor_core_tile_sum;
  return model_backward(variant_spec(v, beta, tol), in, fwd, nullptr, sums);
}

std::unique_ptr<Kernel> make_twin_kernel(Variant v, float beta, float tol, const std::string& gpu_name) {
  return std::make_unique<TwinKernel>(v, beta, tol, gpu_name);
}

}  // namespace attncheck::cuda
