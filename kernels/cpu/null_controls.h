// null_controls.h — the two null-control kernels: no property may fail them (a family on which one fails is
// degenerate and is discarded).
//
//   oracle:     the fp64 reference rounded once, to nearest even: O, dQ, dK, dV to bf16; LSE and δ to fp32.
//               The most accurate result any bf16 kernel can return.
//   stochastic: the fp64 reference stochastically rounded (round_stochastic) to the same formats; unbiased
//               by construction. Its uniform u for element e of output tensor t is
//               uniform01(mix64(base + t), e), base = mix64(Instance::seed ^ hash of the input bits) — the
//               forward hash covers the problem, Q, K, V, mask and bias; the backward hash adds dO. So the
//               result is a pure function of the input (the determinism property holds) while distinct
//               inputs draw independent-looking streams.
// Run the tests: ctest -R BuiltinKernels
#pragma once

#include <cstdint>

#include "harness/problem.h"

namespace attncheck {

ForwardOutput oracle_forward(const Instance& in);
BackwardOutput oracle_backward(const Instance& in);
ForwardOutput stochastic_forward(const Instance& in);
BackwardOutput stochastic_backward(const Instance& in);

// The hash of an instance's input bits used by `stochastic` (exposed for its tests).
std::uint64_t input_hash(const Instance& in, bool include_d_o);

}  // namespace attncheck
