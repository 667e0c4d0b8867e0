// wgmma_probe.h — runs the forward's two matmul shapes on one warpgroup both with wgmma (sm_90a, wgmma_ops.cuh)
// and with the mma.sync m16n8k16 chain of the other splits, from the same inputs, so a test can check that they
// round alike (wgmma_probe.cu; the test is in mma_probe_test.cpp; TENSOR_CORES.md).
//   S = C0 + Q·Kᵀ: Q, K [64][128] (k = 128 as 8 k16 steps, both from shared memory, as step 1);
//   O = C0 + P·V: P [64][64] (registers), V [64][128] (shared memory, two 64-column halves), as step 5.
// Inputs are bf16 bit patterns, row-major; outputs fp32 row-major (S [64][64], O [64][128]); every accumulator
// starts at c0. Throws Error on a CUDA failure or in a build without the wgmma splits (fwd_has_wgmma()).
#pragma once

#include <cstdint>
#include <vector>

namespace attncheck::cuda {

struct WgmmaProbeOutput {
  std::vector<float> s_wgmma, s_mma, o_wgmma, o_mma;
};

WgmmaProbeOutput run_wgmma_probe(const std::vector<std::uint16_t>& q, const std::vector<std::uint16_t>& k,
                                 const std::vector<std::uint16_t>& v, const std::vector<std::uint16_t>& p, float c0);

}  // namespace attncheck::cuda
