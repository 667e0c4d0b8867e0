// flash_fwd.h — host entry points of the CUDA flash-attention forward kernels (flash_fwd.cu).
//
// Layout (device pointers, row-major, bf16 stored as uint16 bit patterns):
//   q, o [batch][heads_q][n_q][kD], k, v [batch][heads_kv][n_k][kD], lse [batch][heads_q][n_q] (fp32).
// kD is 64 or 128; smaller head dims are zero-padded by the caller (zeros add nothing to q·k and give
// zero output columns, so the padded result equals the unpadded one bit for bit).
// Causal masking is bottom-right aligned: query i sees key j iff j <= i + n_k - n_q. An optional keep-mask hides
// more keys (a hidden key is treated exactly as a causally masked one).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace attncheck::cuda {

enum class Variant : int { kFa2 = 0, kFa2Fixed, kPaper, kPaperFixed, kFa2Psum };
const char* variant_name(Variant v);  // "fa2", "fa2-fixed", "paper", "paper-fixed", "fa2-psum"
bool variant_is_fixed(Variant v);

struct FwdParams {
  const std::uint16_t* q = nullptr;
  const std::uint16_t* k = nullptr;
  const std::uint16_t* v = nullptr;
  std::uint16_t* o = nullptr;
  float* lse = nullptr;
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1;
  float scale = 1.0f;        // fp32, multiplies q·k
  float scale_log2e = 1.0f;  // fp32(scale · log2 e), computed in double and rounded once (as FA2 does)
  bool causal = false;
  const std::uint8_t* mask = nullptr;  // keep-mask [batch][heads_q][n_q][n_k], 1 = visible (with causal); null: none
  const float* bias = nullptr;         // additive bias, same layout (add_bias in mma_ops.cuh); null: none
  // (With a keep-mask or a bias the default split runs, whatever FwdTiling asks: it alone is built with them.)
  float beta = 2.0f;         // fixed variants: the shift factor β
  float tolerance = 1e-3f;   // fixed variants: scores >= round(r − tolerance, s_fmt) count as ties of the max r
};

// How the query rows of a block are split over warps, and which tensor-core instructions they use. The numerics
// of every row are the same under each (bit for bit; a chain of wgmma k16 steps rounds as the same chain of
// mma.sync steps, TENSOR_CORES.md); only the speed differs. kDefault is the fastest on an H200 (bench_attention's
// fwdtile/ runs compare them): in a build for sm_90 (compiled as sm_90a, fwd_has_wgmma()) the wgmma splits, three
// warpgroups at d 128 and two at d 64, for every numerics; in other builds, for fa2 numerics 4 warps × 32 rows
// (two m16 tiles per warp) with Q re-read from shared memory at d 128 and kept in registers at d 64, and for the
// paper's numerics (register-heavy bf16 rounding) 4 warps × 16 rows with Q in registers.
enum class FwdTiling : int {
  kDefault = 0,
  kWarp16Q4,    // 4 warps × 16 rows, Q in registers (the first version)
  kWarp16Q8,    // 8 warps × 16 rows, Q in registers
  kWarp32Smem,  // 4 warps × 32 rows, Q from shared memory
  kWarp32Regs,  // 4 warps × 32 rows, Q in registers
  kWgmma64,     // wgmma (sm_90a builds): one warpgroup (4 warps × 16 rows), Q, K, V read from shared memory
  kWgmma128,    // wgmma, two warpgroups sharing the K/V tiles (a ring of 4 K/V stages tracked by mbarriers)
  kWgmma192,    // wgmma, three warpgroups (the same ring)
};
// Whether this build has the wgmma splits (a build for sm_90a; CMake turns sm_90 into sm_90a for the kernels).
bool fwd_has_wgmma();

// The most query heads a launch takes: the forward and the backward put one grid row per query head on gridDim.y,
// which CUDA limits to 65,535. Problem::validate allows more (b1 hq65536 nq1 nk1 is small); past it a launch fails
// with CUDA's "invalid configuration argument", which names neither the cause nor the problem.
constexpr int kMaxHeadsQ = 65535;
// Throws Error "<who>: heads_q N is more than the 65535 query heads its launches take (...)" past kMaxHeadsQ. Host
// only, no CUDA call: launch_flash_fwd and launch_flash_bwd call it first, and the Kernels (cuda_kernels.cpp) in
// their checks before they create a stream or stage anything.
void check_heads_q(int heads_q, const std::string& who);

// Launches one forward pass on `stream` (asynchronous). head_dim must be 64 or 128; heads_q at most kMaxHeadsQ.
void launch_flash_fwd(Variant variant, int head_dim, const FwdParams& p, cudaStream_t stream,
                      FwdTiling tiling = FwdTiling::kDefault);

}  // namespace attncheck::cuda
