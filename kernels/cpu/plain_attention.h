// plain_attention.h — `plain`: non-tiled bf16 attention as PyTorch eager computes it, forward and autograd
// backward. It is the baseline of FlashAttention's accuracy rule (a kernel may be at most a factor times
// less accurate than this), so it must round exactly where eager PyTorch rounds:
//
// Forward (every op on bf16 tensors computes in fp32 and rounds its result to bf16 once):
//   S = bf16(bf16(Q·Kᵀ, fp32 accumulation) · scale);  with a bias S = bf16(S + bias);  masked keys −inf.
//   P = bf16(exp(s − max) / Σ exp(s − max)), max, exp, sum and divide in fp32 (torch.softmax on bf16).
//   O = bf16(P·V, fp32 accumulation).  LSE = max + log(Σ exp(s − max)) in fp32 from the same S.
// Backward (autograd of the graph above):
//   dP = bf16(dO·Vᵀ);  dV = bf16(Pᵀ·dO);
//   softmax backward in fp32: δ_i = Σ_j P_ij·dP_ij (fp32, key order), dS = bf16(P ∘ (dP − δ));
//   scale backward: dS' = bf16(dS · scale);  dQ = bf16(dS'·K);  dK = bf16(dS'ᵀ·Q).
//   GQA (K, V expanded over the group): per-head dK, dV in bf16, summed over the group in fp32, rounded once.
//   The reported δ is the softmax backward's fp32 Σ_j P_ij·dP_ij (equal to Σ dO·O in exact arithmetic).
// All fp32 sums run in index order. A row with no visible key gives O = 0, LSE = −inf and zero gradients
// (eager PyTorch would give NaN; the kernel contract asks for the masked-row convention).
// Run the tests: ctest -R BuiltinKernels
#pragma once

#include "harness/problem.h"

namespace attncheck {

ForwardOutput plain_forward(const Instance& in);
BackwardOutput plain_backward(const Instance& in);  // needs in.d_o; recomputes its own forward

}  // namespace attncheck
