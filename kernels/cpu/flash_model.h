// flash_model.h — the CPU model of a tiled (FlashAttention-2 style) attention kernel's rounding points.
//
// model_forward / model_backward follow kernels/numerics_spec.h step by step (same `// step N:` labels as
// the CUDA kernels in kernels/cuda/), in float arithmetic, rounding where the spec says. Loop structure:
// per (b, h), per row, per key tile (rows are independent: the query tiling changes no forward value);
// backward per key tile, per query tile.
// Tiles may be any size down to 1×1; the last tile of a dimension may be short (tails). Masks: causal
// (bottom-right, Instance::visible), keep-mask, additive bias, GQA, batch. A row with no visible key gives
// O = 0, LSE = −inf and zero gradients (never NaN).
//
// Invariants: outputs are doubles holding exactly the float values produced (O, dQ, dK, dV in the spec's
// output formats; LSE and δ in theirs). Deterministic: no state between calls.
// Run the tests: ctest -R "FlashModel|PaperTransliteration"   (benchmark: build/kernels/cpu/flash_model_bench)
#pragma once

#include <cstdint>
#include <string>

#include "harness/problem.h"
#include "kernels/numerics_spec.h"

namespace attncheck {

// Counts of numerically interesting events in one call (added to, never reset by the model).
struct ModelTrace {
  // forward
  std::uint64_t rows = 0;             // query rows processed
  std::uint64_t masked_rows = 0;      // rows with no visible key (O = 0, LSE = −inf)
  std::uint64_t row_tiles = 0;        // (row, key tile) steps
  std::uint64_t p_one = 0;            // visible p̄ exactly 1.0 as fed to P̄V (after rounding to pv_in_fmt)
  std::uint64_t rows_with_p_one = 0;  // rows where at least one such p̄ occurred
  std::uint64_t exact_tie_tiles = 0;  // (row, tile) steps where >= 2 visible scores equal the tile max exactly
  std::uint64_t policy_tie_tiles = 0; // kPaperShift only: steps whose count c (within tolerance) was > 1
  std::uint64_t shifted_tiles = 0;    // kPaperShift only: steps where the policy changed the tile max
  std::uint64_t unshifted_ties = 0;   // kPaperShift only: c > 1 but r == 0, left unchanged (the published hole)
  std::uint64_t clamped_sums = 0;     // block sums raised to block_sum_min
  std::uint64_t zero_row_sums = 0;    // rows with visible keys whose final l is 0 or NaN (fa2: O = acc, LSE = +inf)
  // backward
  std::uint64_t bwd_p_one = 0;        // recomputed p exactly 1.0 as fed to dV (after rounding to pv_in_fmt)

  std::string describe() const;  // one line "rows=… masked_rows=… p_one=… …"
};

// Throws Error when the instance's tensors have the wrong sizes or the spec's tiles are < 1.
ForwardOutput model_forward(const NumericsSpec& spec, const Instance& in, ModelTrace* trace = nullptr);
// The sums inside the backward's step 9, replaceable so that a GPU kernel's CPU twin can run the model's steps with
// the GPU's sums (kernels/cuda/cuda_twin.cpp: the tensor cores' k16 chains). A null member: the model's own
// sequential fp32 sum (flash_model_steps.h: dots, add_weighted_rows), in head-dimension or row order.
struct BackwardSums {
  // out[j] = Σ_{t<d} a[t]·bt[t·width + j] for j < width: s = q·k and dP = dO·v of one key against every query.
  void (*dots)(const float* a, const float* bt, int width, int d, float* out) = nullptr;
  // out[t] += Σ_{r<n} w[r]·rows[r·width + t] for t < width, out zero on entry: one tile's partial of dV, dK or dQ.
  void (*tile_sum)(const float* w, const float* rows, int n, int width, float* out) = nullptr;
};

// Needs in.d_o and the forward outputs (the kernel's own O and LSE). Throws Error on wrong sizes.
BackwardOutput model_backward(const NumericsSpec& spec, const Instance& in, const ForwardOutput& fwd,
                              ModelTrace* trace = nullptr, const BackwardSums& sums = {});

// The same passes with every rounding format read from the spec at run time. model_forward/model_backward take
// a compiled fast path for the built-in specs' formats (flash_model_steps.h); these exist so that a test can pin
// the fast paths to the general one bit for bit.
ForwardOutput model_forward_generic(const NumericsSpec& spec, const Instance& in, ModelTrace* trace = nullptr);
BackwardOutput model_backward_generic(const NumericsSpec& spec, const Instance& in, const ForwardOutput& fwd,
                                      ModelTrace* trace = nullptr);

}  // namespace attncheck
