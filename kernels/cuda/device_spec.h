// device_spec.h — the built-in NumericsSpec values as compile-time constants for the CUDA kernels.
//
// Each CUDA variant (cuda:fa2, cuda:fa2-fixed, cuda:paper, cuda:paper-fixed, cuda:fa2-psum) is a template
// instantiation over one of these structs, so every rounding point of kernels/numerics_spec.h becomes a constant
// the compiler folds away (round_float(x, Format::kF32) is the identity). β and the tolerance of the fixed policy stay
// runtime parameters (kernel names such as "cuda:fa2-fixed[beta=4]"). cuda_spec_test checks, field by field,
// that these constants equal builtin_spec(name) of the CPU models, so the two cannot drift silently.
// Host and device code. Run the check: ctest -R cuda_spec
#pragma once

#include "kernels/formats.h"

namespace attncheck::cuda {

// The paper's PyTorch numerics: bf16 tensors everywhere, fp32 inside each operation (opmath).
// FA2: fp32 everywhere except the tensor-core inputs (bf16) and the stored output.
template <bool kPaper, bool kFixed, bool kPvSum = false>
struct DeviceSpec {
  static constexpr bool paper = kPaper;
  static constexpr bool fixed = kFixed;  // MaxPolicy::kPaperShift
  static constexpr bool normalise_by_pv_sum = kPvSum;  // fa2-psum: O divided by the row sum of the bf16 p̄ P̄V takes
  static constexpr Format qk_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr bool scale_in_exp = !kPaper;
  static constexpr Format s_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format max_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr bool exp2_folded = !kPaper;  // ExpMode::kExp2Folded, else kExpOfRoundedDiff
  static constexpr Format p_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format pv_in_fmt = Format::kBF16;
  static constexpr Format block_sum_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format block_out_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format rescale_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format acc_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format rowsum_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr bool reciprocal_normalise = !kPaper;
  static constexpr Format out_div_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format out_fmt = Format::kBF16;
  static constexpr Format lse_fmt = kPaper ? Format::kBF16 : Format::kF32;  // all_row_sums.log() + maxes
  static constexpr Format log_l_fmt = kPaper ? Format::kBF16 : Format::kF32;
  // step 4 clamp (paper: .clamp(min = 1e-10) on a bf16 tensor), as float; 0 = none.
  static constexpr float block_sum_min = kPaper ? 1e-10f : 0.0f;
  // paper: -max(bf16), the finite sentinel of the PyTorch code; fa2: -inf.
  static constexpr float mask_value = kPaper ? -3.38953139e38f : -__builtin_huge_valf();
  static constexpr int tile_q = 64;
  static constexpr int tile_k = 64;
  // backward
  static constexpr Format delta_prod_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format delta_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format bwd_p_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format dp_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format ds_term_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format ds_fmt = Format::kBF16;
  static constexpr Format grad_partial_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format grad_acc_fmt = kPaper ? Format::kBF16 : Format::kF32;
  static constexpr Format grad_out_fmt = Format::kBF16;
  // The kernel and the twin take l̄'s block sums unclamped: a spec with a clamp (the paper's) would need it there too.
  static_assert(!kPvSum || block_sum_min == 0.0f, "normalise_by_pv_sum: its block sums are not clamped");
};

using Fa2 = DeviceSpec<false, false>;
using Fa2Fixed = DeviceSpec<false, true>;
using Paper = DeviceSpec<true, false>;
using PaperFixed = DeviceSpec<true, true>;
using Fa2Psum = DeviceSpec<false, false, true>;

}  // namespace attncheck::cuda
