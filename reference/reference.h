// reference.h — the fp64 Eigen reference for attention, forward and backward. Slow, obviously right,
// never a kernel under test.
//
// It sees the inputs exactly as stored (already in the storage format), so any difference from a kernel is
// the kernel's arithmetic. Fully masked rows give O = 0, LSE = -inf and zero gradients. The scale multiplies
// Q·Kᵀ, then the bias is added: s_ij = scale · q_i·k_j + bias_ij.
// Backward uses δ from the *exact* O: δ_i = Σ_c dO_ic O_ic; dS = P ∘ (dP − δ) (formed about each row's largest
// P, equal in exact arithmetic: reference.cpp's score_gradient); dQ = scale·dS·K;
// dK = scale·dSᵀ·Q (summed over a GQA group); dV = Pᵀ·dO (summed over a GQA group).
#pragma once

#include <vector>

#include "harness/problem.h"

namespace attncheck {

struct ReferenceForward {
  std::vector<double> o;    // Q layout
  std::vector<double> lse;  // per row, -inf for a fully masked row
};

struct ReferenceBackward {
  std::vector<double> dq, dk, dv, delta;
};

ReferenceForward reference_forward(const Instance& in);
// Needs in.d_o. Recomputes the forward internally (exact O for δ).
ReferenceBackward reference_backward(const Instance& in);

// The exact scaled (and biased) scores of one (b, h) slice, n_q × n_k row-major; masked entries are -inf.
std::vector<double> reference_scores(const Instance& in, int b, int h);

}  // namespace attncheck
