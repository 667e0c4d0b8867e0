// mpfr_attention.h — attention forward and backward in 200-bit MPFR arithmetic, written independently of the
// Eigen reference (plain loops, no max subtraction: MPFR's exponent range holds exp(s) for |s| up to ~7·10^8;
// dS formed about the key of largest P, so nearly one-hot rows keep their precision),
// used only by reference_test.cpp to bound the fp64 reference's error.
//
// Besides the values it returns, per element, the *magnitude* of the same expression with every term taken in
// absolute value (e.g. Σ_j P_ij |v_jc| for O_ic). Errors are measured against these: a backward-stable fp64
// computation has error ≤ (a modest multiple of n·u) × magnitude, whatever cancellation the value has.
// All results are rounded once from 200 bits to double. Masking, GQA and layouts as in harness/problem.h.
#pragma once

#include <vector>

#include "harness/problem.h"

namespace attncheck {

struct MpfrAttention {
  std::vector<double> o, lse, delta, dq, dk, dv;               // values (lse -inf for a fully masked row)
  std::vector<double> o_mag, lse_mag, delta_mag, dq_mag, dk_mag, dv_mag;  // magnitudes, same layouts
};

// Needs in.d_o (fills the gradients from it). Slow: for small instances only.
MpfrAttention mpfr_attention(const Instance& in);

}  // namespace attncheck
