// property_util.cpp — tiles, skips, the per-instance driver and the rounding envelope (property_util.h).
#include "properties/property_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace attncheck {

void visible_v_ranges(const Instance& in, int b, int h, int i, std::vector<double>& lo, std::vector<double>& hi,
                      std::vector<double>& max_abs) {
  const Problem& p = in.problem;
  std::fill(lo.begin(), lo.end(), HUGE_VAL);
  std::fill(hi.begin(), hi.end(), -HUGE_VAL);
  std::fill(max_abs.begin(), max_abs.end(), 0.0);
  for (int j = 0; j < p.n_k; ++j) {
    if (!in.visible(b, h, i, j)) continue;
    const double* vj = &in.v[p.kv_at(b, h / p.group(), j, 0)];
    for (int c = 0; c < p.head_dim; ++c) {
      lo[c] = std::min(lo[c], vj[c]);
      hi[c] = std::max(hi[c], vj[c]);
      max_abs[c] = std::max(max_abs[c], std::fabs(vj[c]));
    }
  }
}

int range_only_elements(const Instance& in, const std::vector<double>& tol_o) {
  const Problem& p = in.problem;
  std::vector<double> lo(p.head_dim), hi(p.head_dim), m_col(p.head_dim);
  int n = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        visible_v_ranges(in, b, h, i, lo, hi, m_col);
        for (int c = 0; c < p.head_dim; ++c) {
          const double width = hi[c] - lo[c];  // -inf for a row that sees no key: not counted
          n += width > 0 && !(2 * tol_o[p.q_at(b, h, i, c)] < width);  // (NaN or +inf tolerance: counted)
        }
      }
  return n;
}

namespace {
using Clock = std::chrono::steady_clock;
constexpr double kU = 0x1.0p-8;     // bf16 unit roundoff: the coarsest rounding the envelope allows
constexpr double kU32 = 0x1.0p-24;  // fp32 unit roundoff
constexpr int kDefaultTileK = 16;   // smallest key tile a real FlashAttention uses (over-counts tiles)
}  // namespace

const Kernel& tiled(const Kernel& k, const Family& f, std::unique_ptr<Kernel>& holder) {
  if (f.tile_q <= 0 && f.tile_k <= 0) return k;
  // A tile the family leaves at 0 is the kernel's own (its declared numerics carry its tiles: paper[tile_k=16] keeps
  // 16 under a family's tile_q; it became 64, the models' default), else 64.
  const NumericsSpec* own = k.numerics();
  holder = k.with_tiles(f.tile_q > 0 ? f.tile_q : own ? own->tile_q : 64,
                        f.tile_k > 0 ? f.tile_k : own ? own->tile_k : 64);
  return holder ? *holder : k;
}

std::string skip_reason(const Kernel& k, const Family& f, bool need_backward) {
  Problem p = f.problem;
  p.has_mask = f.param("mask", 0) != 0;
  return k.caps().unsupported_reason(p, need_backward);
}

Outcome make_outcome(const std::string& property, const Kernel& k, const Family& f) {
  Outcome o;
  o.property = property;
  o.kernel = k.name();
  o.family = f;
  o.stats = nlohmann::json::object();
  return o;
}

namespace {
// run_per_instance and run_literal: `count` instances from `get`, each failure named by `label(idx)` ("instance 5",
// "literal instance").
Outcome run_instances(const std::string& property, const Kernel& k, const Family& f, const std::string& skip,
                      int count, double seconds, const InstanceCheck& one,
                      const std::function<std::shared_ptr<const Instance>(int)>& get,
                      const std::function<std::string(int)>& label) {
  const auto t0 = Clock::now();
  Outcome o = make_outcome(property, k, f);
  if (!skip.empty()) {
    o.status = Status::kSkip;
    o.message = k.name() + ": " + skip;
    return o;
  }
  std::unique_ptr<Kernel> holder;
  const Kernel& kt = tiled(k, f, holder);
  std::string last_skip;
  int applicable = 0;
  for (int idx = 0; idx < std::max(1, count); ++idx) {
    if (seconds > 0 && idx > 0 && seconds_since(t0) > seconds) break;
    if (stop_requested()) throw Interrupted("stopped before " + label(idx) + " of " + property);
    const std::shared_ptr<const Instance> in = get(idx);
    nlohmann::json stats = nlohmann::json::object();
    std::string why;
    try {
      why = one(kt, *in, f, stats);
    } catch (KernelFault& e) {  // which instance faulted: the shrunk case's report shows that one's inputs
      if (e.instance < 0) e.instance = idx;
      throw;
    }
    ++o.instances_run;
    if (why.rfind("skip:", 0) == 0) {  // the property does not apply to this instance
      last_skip = why.substr(5);
      continue;
    }
    ++applicable;
    if (!why.empty()) {
      o.status = Status::kFail;
      o.message = label(idx) + ": " + why;
      o.instance_index = static_cast<std::uint64_t>(idx);
      o.stats = stats;
      o.seconds = seconds_since(t0);
      return o;
    }
    for (auto it = stats.begin(); it != stats.end(); ++it)  // keep the worst seen (numbers: max)
      if (it->is_number() && (!o.stats.contains(it.key()) || it->get<double>() > o.stats[it.key()].get<double>()))
        o.stats[it.key()] = *it;
  }
  o.seconds = seconds_since(t0);
  if (applicable == 0) {
    o.status = Status::kSkip;
    o.message = "does not apply to this family" + (last_skip.empty() ? "" : ": " + last_skip);
    return o;
  }
  o.message = "held on " + std::to_string(applicable) + " instance(s)";
  return o;
}
}  // namespace

Outcome run_per_instance(const std::string& property, const Kernel& k, const Family& f, const Budget& b,
                         bool need_backward, const InstanceCheck& one) {
  return run_instances(
      property, k, f, skip_reason(k, f, need_backward), b.instances, b.seconds, one,
      [&f](int idx) { return make_instance_shared(f, static_cast<std::uint64_t>(idx)); },
      [](int idx) { return "instance " + std::to_string(idx); });
}

Outcome run_literal(const std::string& property, const Kernel& k, const Family& f,
                    const std::shared_ptr<const Instance>& in, bool need_backward, const InstanceCheck& one) {
  Outcome o = run_instances(
      property, k, f, k.caps().unsupported_reason(in->problem, need_backward), 1, 0, one,
      [&in](int) { return in; }, [](int) { return std::string(kLiteralInstance); });
  o.literal = in;
  return o;
}

Property per_instance_property(const std::string& name, const std::string& sentence, bool needs_backward,
                               InstanceCheck one) {
  Property p;
  p.name = name;
  p.sentence = sentence;
  p.needs_backward = needs_backward;
  p.check = [name, one](const Kernel& k, const Family& f, const Budget& b) {
    return run_per_instance(name, k, f, b, false, one);
  };
  p.check_literal = [name, one](const Kernel& k, const Family& f, const std::shared_ptr<const Instance>& in) {
    return run_literal(name, k, f, in, false, one);
  };
  return p;
}

namespace {
// R = 2·(key tiles) + 4, the roundings of each weight (property_util.h), in key tiles of tile_k (<= 0: 16).
double envelope_roundings(int n_k, int tile_k) {
  const int tk = tile_k > 0 ? tile_k : kDefaultTileK;
  return 2.0 * ((n_k + tk - 1) / tk) + 4.0;
}
}  // namespace

double envelope_mismatch(int n_k, int tile_k) {
  const double r = envelope_roundings(n_k, tile_k);
  // Each weight's factor lies in [(1 − u)^R, (1 + u)^R] (no R·u < 1 needed, unlike Higham's γ_R = Ru/(1 − Ru), which
  // the envelope took until session 39 and gave up at R·u >= 1/2, n_k >= 977 at 16-key tiles: +inf, and with it a
  // key_permutation or logit_shift that compared nothing passed). γ_hi = (1 + u)^R − 1 <= γ_R, γ_lo = 1 − (1 − u)^R.
  // 1 − γ_lo = (1 − u)^R straight from its logarithm (1 − lo cancelled to 0 past R ≈ 9,400, 75k keys: +inf again).
  // Finite while (1 + u)^R is, R < 709.78/log(1 + 2^-8) ≈ 182,000 (1.45M keys in 16-key tiles); +inf past it.
  const double hi = std::expm1(r * std::log1p(kU)), keep = std::exp(r * std::log1p(-kU));
  return keep > 0 ? hi / keep : HUGE_VAL;  // (γ_hi + γ_hi)/(1 − γ_lo) is O's mismatch (twice this)
}

double envelope_log_mismatch(int n_k, int tile_k) {
  // −log(1 − γ_lo) = −R·log(1 − u) >= log(1 + γ_hi) = R·log(1 + u)
  return -envelope_roundings(n_k, tile_k) * std::log1p(-kU);
}

namespace {
double sigma_count(double beta, bool bias) { return 2 + 3 * std::max(beta, 2.0) + (bias ? 2 : 0); }

// σ of every row of `in` and, with `last_q` (one Q last column per copy), of copies of `in` whose Q differs only in
// column d−1 (copy m's row r has last_q[m][r] there; K, V, mask, bias, scale the same): the dot products over
// columns 0..d−2 are formed once and each copy adds its own last term after them, so every σ is bit for bit what
// score_error_bounds gives for that copy (the same additions in the same order). With `last_q` empty: σ of `in`.
std::vector<std::vector<double>> sigma_of(const Instance& in, const std::vector<const std::vector<double>*>& last_q,
                                          double beta) {
  const Problem& p = in.problem;
  const double count = sigma_count(beta, p.has_bias);  // property_util.h: C = 2 + 3·max(β, 2) + 2·[bias]
  const int d = p.head_dim, n_k = p.n_k;
  const double gamma_d = d * kU32 / (1.0 - d * kU32);
  // The copies: `in` itself (its own last column) when last_q is empty.
  const std::size_t copies = last_q.empty() ? 1 : last_q.size();
  std::vector<std::vector<double>> sigma(copies, std::vector<double>(p.rows(), 0.0));
  std::vector<double> kt(std::size_t(d) * n_k), dot(n_k), abs_dot(n_k), dot_c(n_k), abs_c(n_k);
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      // K of this kv head as [column][key], so that one row's n_k dot products run side by side; each is still
      // summed over the columns in order from 0 (products of fp32 values are exact in fp64), bit for bit the
      // per-key loop's value.
      for (int j = 0; j < n_k; ++j)
        for (int c = 0; c < d; ++c) kt[std::size_t(c) * n_k + j] = in.k[p.kv_at(b, hk, j, c)];
      for (int h = hk * p.group(); h < (hk + 1) * p.group(); ++h)
        for (int i = 0; i < p.n_q; ++i) {
          std::fill(dot.begin(), dot.end(), 0.0);
          std::fill(abs_dot.begin(), abs_dot.end(), 0.0);
          const double* qi = &in.q[p.q_at(b, h, i, 0)];
          for (int c = 0; c < d - 1; ++c) {
            const double x = qi[c];
            const double* col = &kt[std::size_t(c) * n_k];
            for (int j = 0; j < n_k; ++j) {
              const double t = x * col[j];
              dot[j] += t;
              abs_dot[j] += std::fabs(t);
            }
          }
          const std::size_t row = p.row_at(b, h, i);
          const double* last_col = &kt[std::size_t(d - 1) * n_k];
          for (std::size_t m = 0; m < copies; ++m) {
            const double x = last_q.empty() ? qi[d - 1] : (*last_q[m])[row];
            for (int j = 0; j < n_k; ++j) {
              const double t = x * last_col[j];
              dot_c[j] = dot[j] + t;
              abs_c[j] = abs_dot[j] + std::fabs(t);
            }
            double max_s = 0, max_abs_dot = 0;
            for (int j = 0; j < n_k; ++j) {  // key order, as the maxima were always taken
              if (!in.visible(b, h, i, j)) continue;
              const double s = p.scale * dot_c[j] + (p.has_bias ? in.bias[p.score_at(b, h, i, j)] : 0.0);
              max_s = std::max(max_s, std::fabs(s));
              max_abs_dot = std::max(max_abs_dot, abs_c[j]);
            }
            sigma[m][row] = count * kU32 * max_s + p.scale * gamma_d * max_abs_dot;
          }
        }
    }
  return sigma;
}
}  // namespace

EnvelopeKernel envelope_kernel(const Kernel& k) {
  const NumericsSpec* declared = k.numerics();
  const Kernel::CpuTwin twin = declared ? Kernel::CpuTwin{} : k.cpu_twin();
  const NumericsSpec* s = declared ? declared : twin.kernel ? &twin.spec : nullptr;
  EnvelopeKernel e;
  if (!s) return e;
  if (s->max_policy.kind == MaxPolicy::kPaperShift) e.beta = std::max(s->max_policy.beta, 2.0);
  e.lse_fmt = s->lse_fmt;
  e.tile_k = s->tile_k;
  return e;
}

std::vector<double> score_error_bounds(const Instance& in, double beta) { return std::move(sigma_of(in, {}, beta)[0]); }

std::vector<std::vector<double>> score_error_bounds_last_q(const Instance& in,
                                                           const std::vector<const std::vector<double>*>& last_q,
                                                           double beta) {
  const Problem& p = in.problem;
  for (const auto* col : last_q)
    if (!col || col->size() != p.rows()) throw Error("score_error_bounds_last_q: one value per row expected");
  if (last_q.empty()) return {};
  return sigma_of(in, last_q, beta);
}

std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o) {
  return output_envelope(in, tile_k, exact_o, score_error_bounds(in));
}

std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o,
                                    const std::vector<double>& sigma) {
  const Problem& p = in.problem;
  const double mm = envelope_mismatch(p.n_k, tile_k);
  std::vector<double> e(p.q_size(), 0.0);
  std::vector<double> m_col(p.head_dim);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        const double w = std::min(std::expm1(2 * sigma[p.row_at(b, h, i)]), 1e300);
        // M_c for every column in one pass over the row's visible keys (V is row-major); a max does not depend
        // on the order it is taken in (std::max never picks a NaN operand second), so this is the per-column
        // loop's value, at a fraction of the visible() calls. Without causality or a mask every row sees every
        // key: the same computation gives the same M for every row of (b, h), so it runs once.
        if (i == 0 || !in.every_row_sees_every_key()) {
          std::fill(m_col.begin(), m_col.end(), 0.0);
          for (int j = 0; j < p.n_k; ++j) {
            if (!in.visible(b, h, i, j)) continue;
            const double* vj = &in.v[p.kv_at(b, h / p.group(), j, 0)];
            for (int c = 0; c < p.head_dim; ++c) m_col[c] = std::max(m_col[c], std::fabs(vj[c]));
          }
        }
        for (int c = 0; c < p.head_dim; ++c) {
          const double m = m_col[c];
          const double x = std::fabs(exact_o[p.q_at(b, h, i, c)]);
          const double dev = (2 * mm + w) * m;
          const double bound = dev + ulp(x + dev, Format::kBF16);
          // Not finite (an exact value that is not, or a deviation past fp64's range): no bound. Always +inf
          // then, never NaN, so that callers can tell "unbounded" from a number (property_util.h).
          e[p.q_at(b, h, i, c)] = std::isfinite(bound) ? bound : HUGE_VAL;
        }
      }
  return e;
}

std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse) {
  return lse_envelope(in, tile_k, exact_lse, score_error_bounds(in));
}

std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse,
                                 const std::vector<double>& sigma, Format lse_fmt) {
  const Problem& p = in.problem;
  const double mm = envelope_log_mismatch(p.n_k, tile_k);
  std::vector<double> e(p.rows(), 0.0);
  for (std::size_t r = 0; r < p.rows(); ++r) {
    const double l = std::isfinite(exact_lse[r]) ? std::fabs(exact_lse[r]) : 0.0;
    const double e0 = sigma[r] + mm + 0x1.0p-22 * l;
    const double u = lse_fmt == Format::kF32 ? 0.0 : std::ldexp(1.0, -format_info(lse_fmt).precision);
    const double bound = e0 * (1 + u) + u * l;  // property_util.h: the returned LSE's rounding, of |LSE| + e0
    e[r] = std::isfinite(bound) ? bound : HUGE_VAL;  // +inf = unbounded, never NaN (as above)
  }
  return e;
}

const NumericsSpec* envelope_spec(const Kernel& k) {
  const NumericsSpec* s = k.numerics();
  if (!s) return nullptr;
  auto coarse_ok = [](Format f) { return f == Format::kF32 || f == Format::kBF16; };
  const bool fp32_scores = s->qk_fmt == Format::kF32 && s->s_fmt == Format::kF32 && s->max_fmt == Format::kF32 &&
                           s->scale_in_exp && s->exp_mode == ExpMode::kExp2Folded && s->lse_fmt == Format::kF32 &&
                           s->log_l_fmt == Format::kF32 && s->mask_value == -HUGE_VAL && s->block_sum_min == 0;
  const bool formats_ok = coarse_ok(s->p_fmt) && coarse_ok(s->pv_in_fmt) && coarse_ok(s->block_sum_fmt) &&
                          coarse_ok(s->block_out_fmt) && coarse_ok(s->rescale_fmt) && coarse_ok(s->acc_fmt) &&
                          coarse_ok(s->rowsum_fmt) && coarse_ok(s->out_div_fmt) && coarse_ok(s->out_fmt);
  // normalise_by_pv_sum (fa2-psum) divides by a sum of the pv_in_fmt p̄ instead: that cast is then shared by the
  // numerator and the denominator, which the derivation charges to the numerator alone: still a bound.
  const bool policy_ok = s->max_policy.kind == MaxPolicy::kStandard ||
                         (s->max_policy.kind == MaxPolicy::kPaperShift && s->max_policy.beta >= 1);
  return fp32_scores && formats_ok && policy_ok && s->tile_k >= 1 ? s : nullptr;
}

std::vector<SpecRowBound> spec_row_bounds(const Instance& in, const NumericsSpec& sp, const std::vector<double>& sigma,
                                          const std::vector<double>& exact_lse) {
  // Every number here is derived in property_util.h ("The spec-derived envelope").
  const Problem& p = in.problem;
  auto u = [](Format f) { return std::ldexp(1.0, -format_info(f).precision); };
  auto pw = [](double uu, double n) { return std::pow(1 + uu, n); };  // Π_n(u)
  auto shared = [&](Format f) { return f == Format::kF32 ? 0.0 : u(f) / (1 - u(f)); };  // −log(1 − u); fp32: none
  const int tk = sp.tile_k, n_k = p.n_k;
  const double T = (n_k + tk - 1) / tk, keys = std::min(tk, n_k);
  const bool shift = sp.max_policy.kind == MaxPolicy::kPaperShift;
  const double beta = shift ? sp.max_policy.beta : 1.0;
  const bool pv_cast = !(sp.p_fmt == sp.pv_in_fmt);
  const double nu = (pv_cast ? 1 + u(sp.pv_in_fmt) : 1.0) * pw(kU32, 1 + keys) * (1 + u(sp.block_out_fmt)) *
                        pw(u(sp.acc_fmt), 2 * T) * pw(u(sp.out_div_fmt), sp.reciprocal_normalise ? 2 : 1) - 1;
  const double delta = pw(kU32, keys) * (1 + u(sp.block_sum_fmt)) * pw(u(sp.rowsum_fmt), 2 * T) - 1;
  const double mis = delta < 1 ? (nu + delta) / (1 - delta) : HUGE_VAL;
  const double e_exp = 0x1.0p-23 / (1 - 0x1.0p-23);  // exp2f within 1 ulp, as a log-error
  // σ was counted for this kernel's β (score_error_bounds(in, envelope_kernel(k).beta)): its C covers the scores and
  // the folded argument; the rescale chain's 3.03(1 + β)·u32·max|s| is 3.03(1 + β)/C of it.
  const double sigma_factor = 1 + 3.03 * (1 + beta) / sigma_count(beta, p.has_bias);
  const double kappa0 = (T + 1) * e_exp + shared(sp.p_fmt) + T * shared(sp.rescale_fmt);
  const double a_abs = (3.0 * n_k + 5 * T + 2) * 0x1.0p-133;  // n_A subnormal steps of bf16 (>= fp32's)
  constexpr SpecRowBound kNone{HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL};
  std::vector<SpecRowBound> out(p.rows(), kNone);
  for (std::size_t r = 0; r < p.rows(); ++r) {
    const double L = exact_lse[r], sg = sigma[r];
    if (!std::isfinite(L) || !std::isfinite(sg) || !std::isfinite(mis)) continue;
    const double kappa = sg * sigma_factor + kappa0;
    const double m_hi = shift ? std::max({L + sg, beta * (L + sg) * (1 + 0x1.0p-23), 0.0}) : L + sg;
    const double d_lo = std::exp(L - m_hi - kappa) * (1 - delta) - a_abs;
    if (!(d_lo > 0) || !std::isfinite(kappa)) continue;  // bounds nothing: the generic envelope judges the row
    SpecRowBound b;
    b.kappa = kappa;
    b.mismatch = mis;
    b.abs_unit = a_abs / d_lo;
    const double eps = delta + a_abs * std::exp(m_hi - L + kappa);
    const double log_l = std::max(m_hi - L, std::log(double(n_k)) + sg) + kappa + 1;
    b.lse = eps < 0.5 ? kappa + eps / (1 - eps) + 0x1.0p-23 * log_l + 0x1.0p-22 * std::fabs(L) : HUGE_VAL;
    if (!std::isfinite(b.lse)) b.lse = HUGE_VAL;
    out[r] = b;
  }
  return out;
}

std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o,
                                    const std::vector<double>& sigma, const NumericsSpec* spec,
                                    const std::vector<double>& exact_lse, int* spec_elements) {
  std::vector<double> e = output_envelope(in, tile_k, exact_o, sigma);
  if (!spec) return e;
  const Problem& p = in.problem;
  const std::vector<SpecRowBound> rows = spec_row_bounds(in, *spec, sigma, exact_lse);
  std::vector<double> lo(p.head_dim), hi(p.head_dim), m_col(p.head_dim);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        const SpecRowBound& rb = rows[p.row_at(b, h, i)];
        if (!std::isfinite(rb.kappa)) continue;
        visible_v_ranges(in, b, h, i, lo, hi, m_col);
        const double tv = std::tanh(rb.kappa);
        for (int c = 0; c < p.head_dim; ++c) {
          const std::size_t x = p.q_at(b, h, i, c);
          const double ex = std::fabs(exact_o[x]);
          const double dev = tv * (hi[c] - lo[c]) + rb.mismatch * m_col[c] + rb.abs_unit * (1 + 3 * m_col[c]);
          const double bound = dev + ulp(ex + dev, spec->out_fmt);
          if (std::isfinite(bound) && bound < e[x]) {
            e[x] = bound;
            if (spec_elements) ++*spec_elements;
          }
        }
      }
  return e;
}

std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse,
                                 const std::vector<double>& sigma, Format lse_fmt, const NumericsSpec* spec,
                                 int* spec_elements) {
  std::vector<double> e = lse_envelope(in, tile_k, exact_lse, sigma, lse_fmt);
  if (!spec) return e;
  const std::vector<SpecRowBound> rows = spec_row_bounds(in, *spec, sigma, exact_lse);
  for (std::size_t r = 0; r < e.size(); ++r)
    if (std::isfinite(rows[r].lse) && rows[r].lse < e[r]) {
      e[r] = rows[r].lse;
      if (spec_elements) ++*spec_elements;
    }
  return e;
}

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;  // +0 == -0 by IEEE; otherwise equality of doubles is equality of bits
}

namespace {
// "(b,h,i" of row r, left open for where() to add its column: where_row and where share it.
std::string open_row_label(const Problem& p, std::size_t r, bool kv) {
  const int n = kv ? p.n_k : p.n_q, heads = kv ? p.heads_kv : p.heads_q;
  const int i = static_cast<int>(r % n);
  r /= n;
  const int h = static_cast<int>(r % heads);
  const int b = static_cast<int>(r / heads);
  return "(b" + std::to_string(b) + (kv ? ",hk" : ",h") + std::to_string(h) + (kv ? ",j" : ",i") + std::to_string(i);
}
}  // namespace

std::string where_row(const Problem& p, std::size_t r, bool kv) { return open_row_label(p, r, kv) + ")"; }

std::string where(const Problem& p, std::size_t x, bool kv) {
  return open_row_label(p, x / p.head_dim, kv) + ",c" + std::to_string(x % p.head_dim) + ")";
}

std::string where_in(const Problem& p, const std::string& tensor, std::size_t x) {
  if (tensor == "LSE" || tensor == "delta") return where_row(p, x);
  return where(p, x, tensor == "dK" || tensor == "dV");
}

std::string fmt_num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string comma_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace attncheck
