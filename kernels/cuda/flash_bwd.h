// flash_bwd.h — host entry point of the CUDA flash-attention backward pass (flash_bwd.cu).
//
// FlashAttention-2's algorithm 2, deterministic (no atomics): step 8 preprocesses δ = Σ_c dO·O per row;
// a dK/dV kernel walks the query tiles of each key tile, a dQ kernel walks the key tiles of each query tile
// (both recompute P from LSE); a last kernel sums each query head's dK, dV over its GQA group.
// Layouts as in flash_fwd.h (kD = 64 or 128, zero-padded by the caller); bf16 as uint16 bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/flash_fwd.h"

namespace attncheck::cuda {

struct BwdParams {
  const std::uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr;
  const float* lse = nullptr;
  float* delta = nullptr;                                // [batch][heads_q][n_q], written
  std::uint16_t* dq = nullptr;                           // Q layout, written
  std::uint16_t *dk_head = nullptr, *dv_head = nullptr;  // workspace [batch][heads_q][n_k][kD]
  std::uint16_t *dk = nullptr, *dv = nullptr;            // K layout, written
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1;
  float scale = 1.0f, scale_log2e = 1.0f;
  bool causal = false;
};

void launch_flash_bwd(Variant variant, int head_dim, const BwdParams& p, cudaStream_t stream);

}  // namespace attncheck::cuda
