// property_util.h — shared machinery of the property implementations (not a contract; properties/ only):
// applying a family's tiles, capability skips, the per-instance driver loop, and the rounding envelope that
// the invariance properties derive their tolerances from.
//
// The envelope (used by within_v_range, key_permutation, logit_shift). Model of any tiled softmax kernel that
// rounds p̄, block sums/outputs, running accumulators and row sums to at best bf16 (unit roundoff u = 2^-8),
// and computes the scores S and the exponent's argument s − m in fp32, as FlashAttention does. A kernel that
// rounds S to bf16 (the paper's PyTorch kernel) lies outside it: its output can move with a logit shift or a key
// order by more than fp32 scores would allow (a bf16 score of 16 is off by up to 1/16, p̄ by 6%). The invariance
// properties do not say so on the suite's families: there the γ term below (2γ_hi/(1−γ_lo) ≈ 6.5% of M_c per run at
// n_k = 32 in 16-key tiles, 4.9% in the paper's 64) dwarfs a bf16 score's effect; `paper` passes logit_shift at up to
// 0.44 of the envelope (negative_rows; 0.94 before its bf16 LSE was charged, below; 0.39 while its tiles were counted
// as 16 keys) and key_permutation at 0.29, and fa2 with Q·Kᵀ rounded to bf16 passes both (0.25, 0.03: measured
// before those changes). Past the suite, with scores of tens, it fails them: bf16 scores
// at |s| ~ 16–100 move p̄ by 6% or more (negative_rows[level=20], normal[scale=16]), a finding about such kernels.
// In detail:
//   * numerator and denominator of O = Σ w̃_j v_j / Σ w̃'_j each carry at most R sequential relative roundings,
//     R = 2·(key tiles) + 4 (per tile: block value + rescaled accumulator; plus p̄, the final sum, the division,
//     the output), so each weight's factor lies in [(1 − u)^R, (1 + u)^R] = [1 − γ_lo, 1 + γ_hi], independently in
//     the numerator and the denominator (finite in fp64 to R ≈ 182,000; Higham's γ_R = R·u/(1 − R·u) >= γ_hi,
//     taken until session 39, needed R·u < 1/2 and left n_k >= 977 unbounded); the rescale factor
//     α = exp(m_old − m_new) is taken as fp32 (one rounded to bf16, as the paper's kernel does, adds a rounding per
//     tile that R does not count);
//   * every exponent argument is off by at most σ_i = 8·2^-24·max_j|s_ij| + scale·γ_d·max_j Σ_c|q_ic k_jc|
//     (fp32 dot products, Higham Thm 3.1, γ_d = d·2^-24/(1 − d·2^-24)). After the dot products, in units of
//     u32·max|s|, with |m| <= β·max|s| (β = 1; the fixed policy's shift m = β·r has β = 2) and so
//     |s − m| <= (1 + β)·max|s|: the scaling 1 and the difference 1 + β, 2 + β in all; FA2's folded
//     fma(s, c̃, −round(m·c̃)) with c̃ = fp32(scale·log2e): c̃'s own rounding moves (s − m)·c̃ by 1 + β, round(m·c̃)
//     by β, the fma's rounding by 1 + β, 2 + 3β in all (the max is exact); a bias adds 2 (fp32(bias/scale) and
//     its fp32 sum with the score). The count is C = 2 + 3·max(β, 2) + 2·[bias]: 8, 10 with a bias, at the fix's
//     β = 2 and below; a kernel that declares a larger shift (`fa2-fixed[beta=4]`: 14) has it counted
//     (envelope_kernel: its numerics, or its CPU twin's spec); one that declares neither is taken at β <= 2.
// Then |O_ic − O*_ic| <= E_ic = (2γ_hi/(1−γ_lo) + e^{2σ_i} − 1)·M_c + ulp(|O*_ic| + that), M_c = max attended
// |v_jc|: convexity gives the e^{2σ}−1 term (each normalised weight moves by a factor within e^{±2σ}), the γ terms
// come from the numerator/denominator mismatch (N = N* + ΔN with |ΔN| <= γ_hi·M_c·D*, D = D*(1 + θ) with
// θ in [−γ_lo, γ_hi] and γ_lo <= γ_hi: |N/D − N*/D*| = |ΔN − θN*|/(D*(1 + θ)) <= 2γ_hi·M_c/(1 − γ_lo)), and the
// last ulp is the final rounding (an ulp, not half, so a binade crossing cannot escape it). The key tiles are the
// kernel's declared ones (its numerics or its CPU twin's spec, a family's tiles applied: tiled()), or 16 keys for a
// kernel that declares none (cuDNN, a plugin, the null controls: no FlashAttention implementation uses key tiles
// below 16, so this over-counts R for them; a declared tile below 16, fa2[tile_k=8], is counted as declared).
//
// The spec-derived envelope (spec_row_bounds; used instead of the one above wherever it is smaller, for a kernel
// whose numerics() declares a spec this derivation covers: envelope_spec). The generic envelope charges each of its R
// roundings a bf16 u, independently in numerator and denominator: 2γ_hi/(1−γ_lo) = 6.5% of M_c at n_k = 32. A declared
// spec says which rounding points exist and in which format, and which are shared by numerator and denominator
// (shared ones only move the convex weights). Covered: specs whose scores, maxima, exponent arguments, LSE and
// log l are fp32 with FA2's folded exp2 (fa2, fa2-fixed and their parameterised forms); the other forward formats
// may be fp32 or bf16. (A bf16-score spec, the paper's, needs its own score term: σ there is bf16's 2^-8·|s|, not
// fp32's, and its bf16 block outputs, accumulators and row sums are real roundings, (4T+3)·u against the generic
// (4T+8)·u: little to gain; it keeps the generic envelope.) With T key tiles of `keys` = min(tile_k, n_k) keys,
// u_F = 2^-precision(F), Π_n(u) = (1+u)^n (|Π(1+δ_k) − 1| <= Π(1+u_k) − 1 for any |δ_k| <= u_k):
//   * numerator only, per weight: p̄'s cast to pv_in_fmt (when it is not p_fmt), the product p̄·v (1: exact for bf16
//     p̄ and V, counted anyway), the tile's fp32 sum (keys additions, Higham: γ_{keys−1}), block_out_fmt (1),
//     acc_fmt twice per tile (α·acc, + block), the normalisation (2 of out_div_fmt: 1/l and acc·(1/l); 1 for a
//     division): ν = Π(u_pv)·Π_{1+keys}(u32)·Π(u_bo)·Π_{2T}(u_acc)·Π_{2|1}(u_div) − 1 (fa2: 2^-8 + ~(keys+2T+3)·2^-24);
//   * denominator only, per weight: the tile sum (keys), block_sum_fmt (1), rowsum_fmt twice per tile:
//     δ = Π_keys(u32)·Π(u_bs)·Π_{2T}(u_rs) − 1 (fa2: ~(keys+2T+1)·2^-24);
//   * shared, as log-errors of each weight: the scores and exponent arguments, σ_i above, counted for the kernel's
//     β (C: the 2 + 3β of the folded argument, plus 2 for a bias's fp32(bias/scale) and its fp32 sum; the spare
//     u32·Σ|q k| of γ_d against Higham's γ_{d−1} takes the bias's dot-product part; β = 1, or the shift's β, both
//     counted as at least 2); the rescale chain α_2·…·α_T, each exp2((m_old − m_new)·c̃) with 3 fp32 roundings of an
//     argument whose magnitudes telescope to at most (1 + β)·max|s| (m only grows, from >= −max|s| to <= β·max|s|):
//     3(1 + β)·u32·max|s|·1.01 <= 3.03(1 + β)/C·σ_i (σ_i >= C·u32·max|s|); exp2f's error, within 1 ulp (2^-23 relative: glibc)
//     for each p̄ and each α (T + 1 in all); p_fmt's rounding (read by both sums) and rescale_fmt's (T), each
//     −log(1 − u) <= u/(1 − u), none for fp32 (a float rounded to fp32 is itself). κ_i = the sum.
//   * underflow: a rounding below its format's normal range errs absolutely, by at most one subnormal step
//     (bf16 2^-133, fp32 2^-149); at most n_A = 3·n_k + 5·T + 2 of them per row (exp, cast and product per key;
//     block sums, block outputs, α, α·l, α·acc per tile; 1/l, acc·(1/l)): A = n_A·2^-133 in the numerator (times
//     max(|v|, 1)) and in the denominator, which is at least D_lo = e^{LSE*_i − m_hi}·e^{−κ}·(1 − δ) − A, where
//     m_hi >= the scaled running max (LSE* + σ; with the shift max(that, β·that·(1 + 2^-23), 0): m >= the score max,
//     so LSE* <= m + log n_k, and the shift only raises m). D_lo <= 0 (a row whose every p̄ may underflow:
//     fa2-fixed shifting a very negative max to 0) bounds nothing there: the generic envelope judges that row.
// Then, with π the exact softmax and π̃ the one with the shared errors (π̃_j/π_j within e^{±2κ}), O_c = Σ π̃_j v_j:
//   |O_c − O*| <= TV(π̃, π)·(hi_c − lo_c) <= tanh(κ_i)·(hi_c − lo_c) (Σ(π̃ − π) = 0, so any constant can be taken
//   off v; a likelihood ratio within [1/L, L] keeps the total variation below (L − 1)/(L + 1), L = e^{2κ});
//   |O − O_c| <= (ν + δ)/(1 − δ)·M_c (each numerator term off by ν, the denominator by δ);
//   the underflow term A·(1 + 3·M_c)/D_lo (numerator A·max(M_c, 1), denominator A·|O| with |O| <= 2·M_c);
//   and one ulp of out_fmt at |O*| plus all that (the final rounding, as above).
// E_spec = their sum; LSE: κ_i + ε/(1 − ε), ε = δ + A·e^{m_hi − LSE*}·e^{κ} (the row sum's relative error), plus
// 2^-23 times a bound on |log l| (logf within 1 ulp; |log l| <= max(m_hi − LSE*, log n_k + σ) + κ + 1) and the
// generic 2^-22·|LSE|. The stats' "spec" counts the elements judged against it.
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
// The same check on one given instance, a literal one (shrink.h: shrinking edits the failing instance itself, its
// problem too): a failure reads "literal instance: <why>", and the outcome's `literal` holds the instance. The family
// gives the tiles and the case's provenance (the instance it was shrunk from), not the shape or the values.
Outcome run_literal(const std::string& property, const Kernel& k, const Family& f,
                    const std::shared_ptr<const Instance>& in, bool need_backward, const InstanceCheck& one);
// A per-instance property: `check` runs `one` on the family's instances (run_per_instance), `check_literal` on one
// literal instance (run_literal). props_basic.cpp's and props_invariance.cpp's properties are made by it.
Property per_instance_property(const std::string& name, const std::string& sentence, bool needs_backward,
                               InstanceCheck one);

// The envelope's numerator/denominator mismatch γ_hi/(1 − γ_lo) (above; O takes twice it, LSE once) for n_k keys in
// key tiles of tile_k (<= 0: 16): always finite.
double envelope_mismatch(int n_k, int tile_k);
// The row sum's log-error −log(1 − γ_lo) (LSE's term, below), <= envelope_mismatch.
double envelope_log_mismatch(int n_k, int tile_k);
// What the generic envelope takes from kernel k: the shift β it counts (at least 2, the fix's own) and the format it
// returns LSE in. From k's declared numerics, or for a kernel that declares none, its CPU twin's spec (the CUDA
// kernels: the same rounding points but for the tensor cores' sums and the exp); a kernel with neither (cuDNN, a
// plugin, the null controls) is taken at β = 2 and an LSE in bf16, the coarsest the envelope allows.
struct EnvelopeKernel {
  double beta = 2;
  Format lse_fmt = Format::kBF16;
  int tile_k = 0;  // the key tile it declares (a family's tiles are in it: tiled()); 0 = none: counted as 16
};
EnvelopeKernel envelope_kernel(const Kernel& k);
// σ_i of every row (row_at order), counted for a kernel whose shift is at most `beta` (C above).
std::vector<double> score_error_bounds(const Instance& in, double beta = 2);
// σ of copies of `in` that differ from it only in Q's last column (copy m has (*last_q[m])[r] at row r, column
// d−1): element for element score_error_bounds(copy m), with the shared columns' dot products formed once
// (logit_shift's base and shifted instances). Throws Error unless every column has one value per row.
std::vector<std::vector<double>> score_error_bounds_last_q(const Instance& in,
                                                           const std::vector<const std::vector<double>*>& last_q,
                                                           double beta = 2);
// E_ic for every O element (Q layout): the bound on |O_kernel − O_exact| under the envelope. Either a finite
// non-negative number or +inf ("no bound": the exact value is not finite, or the bound passes fp64's range),
// never NaN; the same for lse_envelope. Callers compare non-finite outputs exactly, never through a tolerance.
// The overloads taking `sigma` (= score_error_bounds(in)) let a caller that needs both envelopes of one
// instance compute σ once.
std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o);
std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o,
                                    const std::vector<double>& sigma);
// The bound on |LSE_kernel − LSE_exact| per row: e·(1 + u) + u·|LSE|, e = σ_i − log(1 − γ_lo) + 2^-22·|LSE|. LSE is
// 1-Lipschitz in every score (its gradient is the softmax, weights summing to 1), so scores off by σ_i move it by σ_i;
// the row sum's factor in [1 − γ_lo, 1 + γ_hi] moves log l by at most −log(1 − γ_lo) = −R·log(1 − 2^-8), which is
// >= R·log(1 + 2^-8); then the fp32 rounding of m·scale + log l (2^-24·|LSE|, taken 4x: room for logf's ulps and
// a second rounding). u: the returned LSE's rounding, 2^-8 for one returned in bf16 (lse_fmt; the paper's kernel,
// and a kernel whose format is not known), 0 for fp32; it errs by u of the value it rounds, within |LSE| + e (the
// paper's kernel failed logit_shift on that rounding alone, −28 for −27.875 at negative_rows[level=20], when this
// charged fp32's). log l's own fp32 rounding (a few 2^-24·log n_k) lies far inside −log(1 − γ_lo) >= 6·2^-8; a log l
// rounded to bf16 (the paper's) is outside this envelope, as its bf16 scores are (above).
std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse);
std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse,
                                 const std::vector<double>& sigma, Format lse_fmt = Format::kBF16);

// The spec-derived envelope above. envelope_spec: the kernel's declared numerics when the derivation covers them,
// else null (the generic envelope alone). spec_row_bounds: per row (row_at order) of `in`, from σ (above) and the
// exact LSE; a row the derivation bounds nothing for has +inf in each field.
const NumericsSpec* envelope_spec(const Kernel& k);
struct SpecRowBound {
  double kappa;     // κ_i: the shared log-error of each weight
  double mismatch;  // (ν + δ)/(1 − δ): the numerator/denominator mismatch, times M_c
  double abs_unit;  // A/D_lo: the underflow term is abs_unit·(1 + 3·M_c)
  double lse;       // the bound on |LSE − LSE*|
};
std::vector<SpecRowBound> spec_row_bounds(const Instance& in, const NumericsSpec& spec, const std::vector<double>& sigma,
                                          const std::vector<double>& exact_lse);
// output_envelope and lse_envelope with a spec (may be null: the generic envelope): the smaller of the two bounds,
// element by element (both hold for a kernel with the spec: fp32 scores and roundings no coarser than bf16 are
// inside the generic model too). `spec_elements` (optional) counts the elements where the spec bound is the smaller.
std::vector<double> output_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_o,
                                    const std::vector<double>& sigma, const NumericsSpec* spec,
                                    const std::vector<double>& exact_lse, int* spec_elements = nullptr);
std::vector<double> lse_envelope(const Instance& in, int tile_k, const std::vector<double>& exact_lse,
                                 const std::vector<double>& sigma, Format lse_fmt, const NumericsSpec* spec,
                                 int* spec_elements = nullptr);

// Per column of V over the keys that row (b, h, i) sees, in key order: lo, hi (±inf where none is visible) and the
// largest |v| (0). The vectors have head_dim elements.
void visible_v_ranges(const Instance& in, int b, int h, int i, std::vector<double>& lo, std::vector<double>& hi,
                      std::vector<double>& max_abs);
// The O elements (of `in`'s shape) whose pair tolerance 2·tol_o[x] reaches across the whole range of V's column over
// the keys their row sees (a range of positive width; an unbounded tolerance too): there any two outputs within that
// range pass, so an invariance compared nothing there that within_v_range does not. The generic envelope gets there
// for a kernel that declares no numerics from ~593 keys in 16-key tiles (README); key_permutation and logit_shift
// count them as stats "range_only", and a run's summary names the passes that had any (summary_table.cpp).
int range_only_elements(const Instance& in, const std::vector<double>& tol_o);
bool same_value(double a, double b);  // bitwise equal, except that +0 == −0 (and NaN == NaN)
std::string fmt_num(double x);        // shortest round-trip decimal
std::string comma_list(const std::vector<std::string>& v);  // "a, b, c"
// "(b,h,i,c)" of element x of a Q-layout tensor (O, dQ); with `kv`, "(b,hk,j,c)" of a K-layout one (dK, dV).
std::string where(const Problem& p, std::size_t x, bool kv = false);
// "(b,h,i)" of row r (row_at order: LSE, δ); with `kv`, "(b,hk,j)" of key row r.
std::string where_row(const Problem& p, std::size_t r, bool kv = false);
// Element x of the output tensor named `tensor`, in its own layout: rows for LSE and delta, key rows for dK and dV,
// query rows for O and dQ.
std::string where_in(const Problem& p, const std::string& tensor, std::size_t x);

}  // namespace attncheck
