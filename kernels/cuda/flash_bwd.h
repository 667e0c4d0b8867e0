// flash_bwd.h — host entry point of the CUDA flash-attention backward pass (flash_bwd.cu).
//
// FlashAttention-2's algorithm 2, deterministic (no atomics): step 8 preprocesses δ = Σ_c dO·O per row;
// a dK/dV kernel walks the query tiles of each key tile, computes P and dS once and writes dS (bf16, exactly the
// values the dQ step consumes) to a workspace; a dQ kernel is then a plain GEMM over dS in increasing key-tile
// order; a last kernel sums each query head's dK, dV over its GQA group.
// Layouts as in flash_fwd.h (kD = 64 or 128, zero-padded by the caller); bf16 as uint16 bits.
// Workspace: dS takes flash_bwd_ds_bytes(p) = batch·heads_q·⌈n_q/64⌉·⌈n_k/64⌉·64·64·2 bytes (2 bytes per
// score; 2 GiB at b 4, h 16, seq 4096). Pass it in BwdParams::ds, or leave ds null and launch_flash_bwd takes it
// stream-ordered from a per-device memory pool that keeps freed memory for the next call. Batches past gridDim.z's
// 65,535 run in slices of at most 65,535, one after another on the stream, each reusing the start of the dS and
// GQA dK/dV workspaces: those need one slice's size (flash_bwd_ds_bytes of min(batch, 65,535) batches).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/flash_fwd.h"

namespace attncheck::cuda {

// How the backward's work is split over warps. Every split gives the same bits (the per-element order of
// operations does not depend on it); only the speed differs. kDefault (= kKeys64Rows128) is the fastest
// measured on an H200 (kernels/cuda/TENSOR_CORES.md, Backward).
enum class BwdTiling : int {
  kDefault = 0,
  // dK/dV: 4 or 8 warps × 16 keys per block (8: the Q, dO tiles are shared by 128 keys);
  // dQ: 4 warps × 32 rows (two m16 tiles per warp: each K fragment feeds 4 mmas) or × 16 rows (fewer registers).
  // kKeys64Rows128Ilp: as kKeys64Rows128, the dK/dV partials two 16-column slices at a time at d 128 too (more
  // independent mma chains, more registers).
  kKeys64Rows128 = 1,
  kKeys128Rows128 = 2,
  kKeys64Rows64 = 3,
  kKeys128Rows64 = 4,
  kKeys64Rows128Ilp = 5,
};

struct BwdParams {
  const std::uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr;
  const float* lse = nullptr;
  float* delta = nullptr;                                // [batch][heads_q][n_q], written
  std::uint16_t* dq = nullptr;                           // Q layout, written
  std::uint16_t *dk_head = nullptr, *dv_head = nullptr;  // workspace [batch][heads_q][n_k][kD] (GQA only)
  std::uint16_t *dk = nullptr, *dv = nullptr;            // K layout, written
  std::uint16_t* ds = nullptr;  // optional workspace of flash_bwd_ds_bytes(); null: launch_flash_bwd allocates
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1;
  float scale = 1.0f, scale_log2e = 1.0f;
  bool causal = false;
  const std::uint8_t* mask = nullptr;  // keep-mask and bias as in FwdParams (the forward's: P is recomputed)
  const float* bias = nullptr;
  BwdTiling tiling = BwdTiling::kDefault;
};

// Bytes of the dS workspace: one 64 × 64 bf16 tile per (batch, query head, query tile, key tile).
std::size_t flash_bwd_ds_bytes(const BwdParams& p);

// Launches one backward pass on `stream`. head_dim must be 64 or 128; heads_q at most kMaxHeadsQ (flash_fwd.h).
void launch_flash_bwd(Variant variant, int head_dim, const BwdParams& p, cudaStream_t stream);

}  // namespace attncheck::cuda
