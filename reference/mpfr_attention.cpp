// mpfr_attention.cpp — 200-bit attention for reference_test (see mpfr_attention.h). Plain loops over the
// definitions: s = scale·q·k + bias, e = exp(s), Z = Σ e, P = e/Z, LSE = log Z, O = Σ P v, δ = dO·O,
// dP = dO·v, dS = P(dP − δ) (formed about the key of largest P, an exact identity: see the gradients below),
// dQ = scale Σ dS k, dK = scale Σ dS q, dV = Σ P dO.
#include "reference/mpfr_attention.h"

#include <cmath>
#include <utility>

#include <mpfr.h>

namespace attncheck {
namespace {

constexpr mpfr_prec_t kBits = 200;
constexpr mpfr_rnd_t kRnd = MPFR_RNDN;

// A 200-bit number with value semantics; just enough arithmetic for the formulas above.
class Mp {
 public:
  Mp() {
    mpfr_init2(x_, kBits);
    mpfr_set_zero(x_, 1);
  }
  explicit Mp(double d) {
    mpfr_init2(x_, kBits);
    mpfr_set_d(x_, d, kRnd);
  }
  Mp(const Mp& o) {
    mpfr_init2(x_, kBits);
    mpfr_set(x_, o.x_, kRnd);
  }
  Mp& operator=(const Mp& o) {
    mpfr_set(x_, o.x_, kRnd);
    return *this;
  }
  ~Mp() { mpfr_clear(x_); }
  Mp& operator+=(const Mp& o) {
    mpfr_add(x_, x_, o.x_, kRnd);
    return *this;
  }
  friend Mp operator+(const Mp& a, const Mp& b) { return op(mpfr_add, a, b); }
  friend Mp operator-(const Mp& a, const Mp& b) { return op(mpfr_sub, a, b); }
  friend Mp operator*(const Mp& a, const Mp& b) { return op(mpfr_mul, a, b); }
  friend Mp operator/(const Mp& a, const Mp& b) { return op(mpfr_div, a, b); }
  Mp abs() const { return un(mpfr_abs); }
  Mp exp() const { return un(mpfr_exp); }
  Mp log() const { return un(mpfr_log); }
  double get() const { return mpfr_get_d(x_, kRnd); }
  friend bool operator>(const Mp& a, const Mp& b) { return mpfr_greater_p(a.x_, b.x_) != 0; }

 private:
  template <class F>
  static Mp op(F f, const Mp& a, const Mp& b) {
    Mp r;
    f(r.x_, a.x_, b.x_, kRnd);
    return r;
  }
  template <class F>
  Mp un(F f) const {
    Mp r;
    f(r.x_, x_, kRnd);
    return r;
  }
  mpfr_t x_;
};

}  // namespace

MpfrAttention mpfr_attention(const Instance& in) {
  in.validate();
  if (in.d_o.empty()) throw Error("mpfr_attention: instance has no d_o");
  const Problem& p = in.problem;
  const int d = p.head_dim;
  const Mp scale(p.scale);
  std::vector<Mp> dk(p.kv_size()), dk_mag(p.kv_size()), dv(p.kv_size()), dv_mag(p.kv_size());
  MpfrAttention r;
  r.o.assign(p.q_size(), 0.0);
  r.o_mag = r.dq = r.dq_mag = r.o;
  r.lse.assign(p.rows(), -HUGE_VAL);
  r.lse_mag.assign(p.rows(), 1.0);
  r.delta = r.delta_mag = std::vector<double>(p.rows(), 0.0);
  auto at = [&](const std::vector<double>& t, std::size_t i) { return Mp(t[i]); };
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / p.group();
      for (int i = 0; i < p.n_q; ++i) {
        // Scores and their magnitudes (scale Σ|q k| + |bias|) over the visible keys.
        std::vector<int> keys;
        std::vector<Mp> e, s_mag;
        for (int j = 0; j < p.n_k; ++j) {
          if (!in.visible(b, h, i, j)) continue;
          const double bias = p.has_bias ? in.bias[p.score_at(b, h, i, j)] : 0.0;
          if (bias == -HUGE_VAL) continue;
          Mp dot, dot_mag;
          for (int c = 0; c < d; ++c) {
            const Mp t = at(in.q, p.q_at(b, h, i, c)) * at(in.k, p.kv_at(b, hk, j, c));
            dot += t;
            dot_mag += t.abs();
          }
          keys.push_back(j);
          e.push_back((scale * dot + Mp(bias)).exp());
          s_mag.push_back(scale * dot_mag + Mp(std::fabs(bias)));
        }
        if (keys.empty()) continue;  // O = 0, LSE = -inf, no gradient
        const std::size_t row = p.row_at(b, h, i);
        Mp z;
        double s_mag_max = 0;
        for (std::size_t t = 0; t < keys.size(); ++t) {
          z += e[t];
          s_mag_max = std::fmax(s_mag_max, s_mag[t].get());
        }
        r.lse[row] = z.log().get();
        r.lse_mag[row] = 1 + s_mag_max;  // LSE's error is absolute, on the scale of the scores
        std::vector<Mp> prob(keys.size());
        for (std::size_t t = 0; t < keys.size(); ++t) prob[t] = e[t] / z;
        // Forward output and δ.
        std::vector<Mp> o(d), o_mag(d);
        Mp delta, delta_mag;
        for (int c = 0; c < d; ++c) {
          for (std::size_t t = 0; t < keys.size(); ++t) {
            const Mp v = at(in.v, p.kv_at(b, hk, keys[t], c));
            o[c] += prob[t] * v;
            o_mag[c] += prob[t] * v.abs();
          }
          const Mp g = at(in.d_o, p.q_at(b, h, i, c));
          delta += g * o[c];
          delta_mag += g.abs() * o_mag[c];
          r.o[p.q_at(b, h, i, c)] = o[c].get();
          r.o_mag[p.q_at(b, h, i, c)] = o_mag[c].get();
        }
        r.delta[row] = delta.get();
        r.delta_mag[row] = delta_mag.get();
        // Gradients. dP − δ about the key of largest P, t*: dP_t − δ = (dP_t − dP_t*) − Σ_t' P_t'(dP_t' − dP_t*)
        // (Σ P = 1). The plain dP_t* − δ cancels to (1 − P_t*)·(…): once 1 − P_t* is below 2^-200 (scores ~140
        // apart) even 200 bits are noise; this form has no such cancellation. The magnitude is the plain form's.
        std::vector<Mp> dp(keys.size()), dp_mag(keys.size());
        std::size_t top = 0;
        for (std::size_t t = 0; t < keys.size(); ++t) {
          for (int c = 0; c < d; ++c) {
            const Mp g = at(in.d_o, p.q_at(b, h, i, c)), v = at(in.v, p.kv_at(b, hk, keys[t], c));
            dp[t] += g * v;
            dp_mag[t] += (g * v).abs();
          }
          if (prob[t] > prob[top]) top = t;
        }
        Mp shifted_delta;
        for (std::size_t t = 0; t < keys.size(); ++t) shifted_delta += prob[t] * (dp[t] - dp[top]);
        std::vector<Mp> dq(d), dq_mag(d);
        for (std::size_t t = 0; t < keys.size(); ++t) {
          const int j = keys[t];
          const Mp ds = prob[t] * ((dp[t] - dp[top]) - shifted_delta), ds_mag = prob[t] * (dp_mag[t] + delta_mag);
          for (int c = 0; c < d; ++c) {
            const Mp kc = at(in.k, p.kv_at(b, hk, j, c)), qc = at(in.q, p.q_at(b, h, i, c));
            const Mp g = at(in.d_o, p.q_at(b, h, i, c));
            const std::size_t kv = p.kv_at(b, hk, j, c);
            dq[c] += scale * ds * kc;
            dq_mag[c] += scale * ds_mag * kc.abs();
            dk[kv] += scale * ds * qc;
            dk_mag[kv] += scale * ds_mag * qc.abs();
            dv[kv] += prob[t] * g;
            dv_mag[kv] += prob[t] * g.abs();
          }
        }
        for (int c = 0; c < d; ++c) {
          r.dq[p.q_at(b, h, i, c)] = dq[c].get();
          r.dq_mag[p.q_at(b, h, i, c)] = dq_mag[c].get();
        }
      }
    }
  }
  for (const auto* t : {&dk, &dk_mag, &dv, &dv_mag}) {
    std::vector<double> out(t->size());
    for (std::size_t i = 0; i < t->size(); ++i) out[i] = (*t)[i].get();
    if (t == &dk) r.dk = std::move(out);
    if (t == &dk_mag) r.dk_mag = std::move(out);
    if (t == &dv) r.dv = std::move(out);
    if (t == &dv_mag) r.dv_mag = std::move(out);
  }
  return r;
}

}  // namespace attncheck
