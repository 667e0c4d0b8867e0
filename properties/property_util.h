// property_util.h — shared machinery of the property implementations (not a contract; properties/ only):
// applying a family's tiles, capability skips, the per-instance driver loop, and the rounding envelope that
// the invariance properties derive their tolerances from.
//
// The envelope (used by within_v_range, key_permutation, logit_shift). Model of any tiled softmax kernel that
// rounds p̄, block sums/outputs, running accumulators and row sums to at best bf16 (unit roundoff u = 2^-8),
// and computes the scores S and the exponent's argument s − m in fp32, as FlashAttention does. A kernel that
// rounds S to bf16 (the paper's PyTorch kernel) lies outside it: its output can move with a logit shift or a key
// order by more than fp32 scores would allow (a bf16 score of 16 is off by up to 1/16, p̄ by 6%). The invariance
// properties do not say so on the suite's families: there the γ term below (2γ/(1−γ) ≈ 6.7% of M_c per run at
// n_k = 32) dwarfs a bf16 score's effect; `paper` passes logit_shift at up to 0.94 of the envelope (negative_rows,
// from its bf16 LSE) and key_permutation at 0.37, and fa2 with Q·Kᵀ rounded to bf16 passes both (0.25, 0.03).
// In detail:
//   * numerator and denominator of O = Σ w̃_j v_j / Σ w̃'_j each carry at most R sequential relative roundings,
//     R = 2·(key tiles) + 4 (per tile: block value + rescaled accumulator; plus p̄, the final sum, the division,
//     the output), so each weight is off by at most γ = R·u / (1 − R·u) (Higham's γ_R), independently in the
//     numerator and the denominator (the rescale factor α = exp(m_old − m_new) taken as fp32: one rounded to bf16,
//     as the paper's kernel does, adds a rounding per tile that R does not count);
//   * every exponent argument is off by at most σ_i = 8·2^-24·max_j|s_ij| + scale·γ_d·max_j Σ_c|q_ic k_jc|
//     (fp32 dot products, Higham Thm 3.1, γ_d = d·2^-24/(1 − d·2^-24)). After the dot products, in units of
//     u32·max|s|, with |m| <= β·max|s| (β = 1; the fixed policy's shift m = β·r has β = 2) and so
//     |s − m| <= (1 + β)·max|s|: the scaling 1 and the difference 1 + β, 2 + β in all; FA2's folded
//     fma(s, c̃, −round(m·c̃)) with c̃ = fp32(scale·log2e): c̃'s own rounding moves (s − m)·c̃ by 1 + β, round(m·c̃)
//     by β, the fma's rounding by 1 + β, 2 + 3β in all: 8 at β = 2 (the max is exact). A shift with β > 2
//     (`fa2-fixed[beta=4]`) needs 2 + 3β; this envelope does not know the kernel and takes 8.
// Then |O_ic − O*_ic| <= E_ic = (2γ/(1−γ) + e^{2σ_i} − 1)·M_c + ulp(|O*_ic| + that), M_c = max attended |v_jc|:
// convexity gives the e^{2σ}−1 term (each normalised weight moves by a factor within e^{±2σ}), the γ terms come
// from the numerator/denominator mismatch, and the last ulp is the final rounding (an ulp, not half, so a
// binade crossing cannot escape it). The key tile count uses tile_k = the family's tile, or 16 when the kernel
// default is used (no FlashAttention implementation uses key tiles below 16, so this over-counts R).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "harness/kernel.h"
#include "properties/family.h"
#include "properties/property.h"
#include "reference/reference.h"

namespace attncheck {

// Seconds since t on the steady clock: the time budgets of the drivers (property_util.cpp) and the shrinker.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The kernel with the family's tiles applied (itself when the family keeps the default tiles or the kernel's
// tiles are fixed). `holder` owns the tiled copy.
const Kernel& tiled(const Kernel& k, const Family& f, std::unique_ptr<Kernel>& holder);

// "" when the kernel can run the family (with backward when needed), else the reason to skip.
std::string skip_reason(const Kernel& k, const Family& f, bool need_backward);

Outcome make_outcome(const std::string& property, const Kernel& k, const Family& f);

// The per-instance driver: for instances 0..budget-1 (until the time budget runs out), `one` returns "" when
// the property holds on that instance and a one-line reason when it fails; `one` may fill `stats`. The first
// failure ends the run. `applies` (optional) returns a skip reason for the family as a whole.
using InstanceCheck = std::function<std::string(const Kernel&, const Instance&, const Family&, nlohmann::json& stats)>;
Outcome run_per_instance(const std::string& property, const Kernel& k, const Family& f, const Budget& b,
                         bool need_backward, const InstanceCheck& one);

// The envelope above: γ for the family, σ_i for one row, M_c over attended keys.
double envelope_gamma(const Family& f);  // +inf where the envelope bounds nothing (R·u >= 1/2)
// γ/(1 − γ), the numerator/denominator mismatch of the envelope (O takes twice it); +inf for γ >= 1.
double mismatch(double g);
std::vector<double> score_error_bounds(const Instance& in);  // σ_i of every row (row_at order)
// σ of copies of `in` that differ from it only in Q's last column (copy m has (*last_q[m])[r] at row r, column
// d−1): element for element score_error_bounds(copy m), with the shared columns' dot products formed once
// (logit_shift's base and shifted instances). Throws Error unless every column has one value per row.
std::vector<std::vector<double>> score_error_bounds_last_q(const Instance& in,
                                                           const std::vector<const std::vector<double>*>& last_q);
// E_ic for every O element (Q layout): the bound on |O_kernel − O_exact| under the envelope. Either a finite
// non-negative number or +inf ("no bound": the exact value is not finite, or the bound passes fp64's range),
// never NaN; the same for lse_envelope. Callers compare non-finite outputs exactly, never through a tolerance.
// The overloads taking `sigma` (= score_error_bounds(in)) let a caller that needs both envelopes of one
// instance compute σ once.
std::vector<double> output_envelope(const Instance& in, const Family& f, const std::vector<double>& exact_o);
std::vector<double> output_envelope(const Instance& in, const Family& f, const std::vector<double>& exact_o,
                                    const std::vector<double>& sigma);
// The bound on |LSE_kernel − LSE_exact| per row: σ_i + γ/(1−γ) + 2^-22·|LSE|. LSE is 1-Lipschitz in every score
// (its gradient is the softmax, weights summing to 1), so scores off by σ_i move it by σ_i; the row sum's relative
// error γ moves log l by −log(1 − γ) <= γ/(1 − γ); the last term is the final fp32 rounding of m·scale + log l
// (2^-24·|LSE|, taken 4x: room for logf's ulps and a second rounding); log l's own rounding (a few 2^-24·log n_k)
// lies far inside γ/(1 − γ) >= 6·2^-8.
std::vector<double> lse_envelope(const Instance& in, const Family& f, const std::vector<double>& exact_lse);
std::vector<double> lse_envelope(const Instance& in, const Family& f, const std::vector<double>& exact_lse,
                                 const std::vector<double>& sigma);

bool same_value(double a, double b);  // bitwise equal, except that +0 == −0 (and NaN == NaN)
std::string fmt_num(double x);        // shortest round-trip decimal
// "(b,h,i,c)" of element x of a Q-layout tensor (O, dQ); with `kv`, "(b,hk,j,c)" of a K-layout one (dK, dV).
std::string where(const Problem& p, std::size_t x, bool kv = false);
// "(b,h,i)" of row r (row_at order: LSE, δ); with `kv`, "(b,hk,j)" of key row r.
std::string where_row(const Problem& p, std::size_t r, bool kv = false);
// Element x of the output tensor named `tensor`, in its own layout: rows for LSE and delta, key rows for dK and dV,
// query rows for O and dQ.
std::string where_in(const Problem& p, const std::string& tensor, std::size_t x);

}  // namespace attncheck
