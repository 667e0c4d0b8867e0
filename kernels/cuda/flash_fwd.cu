// flash_fwd.cu — FlashAttention-2 style forward pass on tensor cores (mma.sync m16n8k16, bf16 -> fp32),
// one template over the numerics (device_spec.h) that reads step by step like the CPU model
// (kernels/cpu/flash_model.*, kernels/numerics_spec.h): the same `// step N:` labels in the same order.
//
// Work split (FwdTiling): a block holds kBlockM = 16·kMT·kNWarps query rows of one (batch, head); each warp owns
// kMT m16 tiles (16·kMT consecutive rows), so every K/V fragment read by ldmatrix feeds kMT mmas. The wgmma splits
// (sm_90a, the default there; wgmma_ops.cuh) give each warpgroup of 4 warps 64 rows (kMT = 1) and issue steps 1 and
// 5 as warpgroup mmas reading Q, K, V from shared memory (in wgmma's swizzled layout); everything else is the same
// code. Three warpgroups per block at d 128 give 12 warps per SM (162-168 registers), which is what made them faster.
// A thread holds, per m16 tile, two rows (g and g+8, g = lane/4) and, per 8-key slice, keys 2t and 2t+1 (t = lane%4).
// Key tiles of tile_k = 64 keys stream through shared memory (cp.async): double buffered behind one block-wide
// barrier per tile, or, in the 2- and 3-warpgroup wgmma splits, through a ring of 4 stages tracked by mbarriers.
// Q sits in registers or is re-read from shared memory per k16 step (kQRegs). The per-row numerics do not depend
// on the split. A keep-mask or bias (FwdParams) runs the default split compiled with their reads (kMasks).
// fa2 numerics skip key tiles that no row of a 64-row group (tile_q) can see (causal), as FlashAttention-2
// does with 64-row blocks: each warp skips exactly the tiles the 64-row block holding its rows would skip (the
// wgmma splits skip per block only). The CPU model visits every tile; a skipped tile adds 0·v to acc, so the bits
// are the same while V there is finite (0·inf = NaN; cuda_twin.cpp skips as the kernel does). The paper's numerics
// visit every tile, as its PyTorch code (and the CPU model) does. Out-of-range keys (j >= n_k, tails) do not exist for any step. Tiles that need no
// per-element mask for a warp's rows run a copy of the steps compiled without the checks.
// Rounding: every fp32 operation is an explicit __fadd_rn/__fmul_rn/__fmaf_rn (the file is also built with
// -fmad=false), so nothing is contracted behind the spec's back. Rounding to bf16 inside the tile loop uses
// cvt.rn.bf16x2.f32 (two values per instruction), which equals round_bf16 on every non-NaN float (ties to even,
// overflow to inf; checked exhaustively on the H200) and gives the canonical NaN for a NaN (every NaN here comes
// out of arithmetic, so is canonical already). Each row reduction over the four lanes of a quad runs in the
// fixed order ((t0+t1)+(t2+t3)); within a thread keys are summed in increasing order. Inside one mma the tensor
// cores accumulate as TENSOR_CORES.md describes (not sequential fp32).
// One exact shortcut, taken warp-uniformly: α = 1 for every row of the warp gives round(α·acc) = acc, so the
// rescale is skipped. ldmatrix addresses are per-lane offsets plus constants (see the comment at k_off).
// Tried and dropped (measured on the H200, TENSOR_CORES.md): speculative steps 2-4 with the fixed count and a
// bare ex2 checked after the fact (slower, and much slower for paper-fixed, whose bf16 scores tie often); software
// pipelining (next tile's q·k issued before this tile's softmax) at 16 rows per warp (20-25% slower; commit 7f194d9);
// ping-pong warpgroups with mma.sync (slower; 3729f03); the same overlap with wgmma (FA3's intra-warpgroup
// pipelining: 269 vs 355 TFLOP/s, the second score tile costs the occupancy; 5117a91); the same again on the
// 4-stage ring with FA3's order (q·k of tile n beside p̄·V of tile n − 1, no loop-carried accumulators: 259-268
// vs 382 TFLOP/s at d128, 181-233 vs 262-294 at d64; b2b456c); fa2-fixed's near-max test as the row max and then
// a count of the scores >= thr (set.ge masks summed, both rows' counts in one word over the quad: fewer
// instructions, but a second round of shuffles after the max; fix overhead 12.0-12.9% vs 10.1-10.7% at d128 full,
// 16.9-17.7% vs 14.4-14.8% at d64, three interleaved runs each, same bits); a screen before the top two (each
// thread's count against its own max − tolerance, a ballot of the quad's holders, the top two only in a rare
// warp-uniform branch: same bits, fewer instructions by count, fix overhead 14.1-15.2% vs 8.8-9.9% at d128 full;
// 14145a4); fa2's exponentials as the bare ex2.approx.ftz where a warp vote finds no argument below −126 (exp2f's
// bits, checked on every float, but no faster: the vote cost what the fix-up did; b2e71d2). The floor of any exact
// near-max test, measured: fa2 with only a compare and an add per score after the row max and a warp vote (no
// reduction, no shift) ran 9.2% slower at d128 full seq 4096, and fa2-fixed within 0.44% of it (788dce6, H100,
// session 49; TENSOR_CORES.md, "The floor, measured"). FlashAttention's own
// step 5/6 (P̄V accumulated into α·acc) with a fast exp2 runs fa2 13% faster but is not the spec's numerics, and
// leaves the fix's share unchanged (ea94fbe).
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/cuda/mma_ops.cuh"
#include "kernels/cuda/wgmma_ops.cuh"

namespace attncheck::cuda {

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kFa2: return "fa2";
    case Variant::kFa2Fixed: return "fa2-fixed";
    case Variant::kPaper: return "paper";
    case Variant::kPaperFixed: return "paper-fixed";
    case Variant::kFa2Psum: return "fa2-psum";
  }
  return "?";
}
bool variant_is_fixed(Variant v) { return v == Variant::kFa2Fixed || v == Variant::kPaperFixed; }
#if defined(ATTNCHECK_WGMMA)
bool fwd_has_wgmma() { return true; }
#else
bool fwd_has_wgmma() { return false; }
#endif

namespace {

// Blocks per SM asked of the register allocator: 16 warps per SM for the 16-row-warp splits at d 64 (4 blocks of
// 4 warps or 2 of 8: 128 registers; with mma.sync the paper's numerics ran 3-4% faster there than at 141-160
// registers and 3 blocks; the 2-warpgroup wgmma split is the d 64 default), 1 elsewhere (stating 1 instead of
// leaving it out let the compiler give paper d128 244 registers instead of 182: +7%). Measured on the H200
// with bench_attention (TENSOR_CORES.md).
template <int kD, int kMT, int kNWarps>
constexpr int kMinBlocks = (kD == 64 && kMT == 1 && 16 / kNWarps > 1) ? 16 / kNWarps : 1;
template <int kD, class Spec, int kMT, int kNWarps, bool kQRegs, bool kWgmma, int kStages, bool kMasks>
__global__ void __launch_bounds__(kNWarps * 32, kMinBlocks<kD, kMT, kNWarps>)
    flash_fwd_kernel(const FwdParams p) {
  static_assert(!kWgmma || (kMT == 1 && kNWarps % 4 == 0), "wgmma: warpgroups of 4 warps x 16 rows");
  // kStages = 2: K/V double buffer behind one block-wide barrier per tile, so every warp runs in lock-step.
  // kStages > 2 (the wgmma splits of 2 and 3 warpgroups): a ring of stages, tile nb + 2 copied while tile nb is
  // worked on; per stage an mbarrier says it has landed (full) and one that every thread is done reading it
  // (empty), so a warp waits only for the data it needs and the warpgroups drift apart.
  static_assert(kStages == 2 || (kWgmma && kStages >= 3), "the stage ring is for the wgmma splits");
  constexpr bool kRing = kStages > 2;
  constexpr int kBlockM = 16 * kMT * kNWarps;
  constexpr int kBlockN = Spec::tile_k;
  static_assert(kBlockN == 64, "the fragment code below assumes 64-key tiles");
  static_assert(Spec::tile_q % (16 * kMT) == 0, "a warp's rows lie in one tile_q group (fa2's causal skip)");
  constexpr int kThreads = kNWarps * 32;
  constexpr int kNT = kBlockN / 8;  // 8-key slices of a key tile
  constexpr int kDT = kD / 8;       // 8-column slices of the output
  constexpr int kKQ = kD / 16;      // k16 steps of q·k
  constexpr int kChunks = kD / 8;   // 16-byte chunks per row
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  // wgmma's 128-byte swizzle repeats every 1024 bytes, so its tiles start 1024-aligned (launch adds the slack).
  std::uint16_t* smem = reinterpret_cast<std::uint16_t*>(
      kWgmma ? (reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023)
             : reinterpret_cast<std::uintptr_t>(smem_raw));
  // Where element (r, col) of a Q/K/V tile lives: the XOR swizzle for ldmatrix, or wgmma's layout.
  auto tile_off = [](int r, int col, int rows) { return kWgmma ? sw128_offset(r, col, rows) : swz<kD>(r, col); };
  std::uint16_t* sQ = smem;
  std::uint16_t* sK = sQ + kBlockM * kD;  // [kStages][kBlockN][kD]
  std::uint16_t* sV = sK + kStages * kBlockN * kD;
  // fa2-psum with wgmma: 8 KiB of bf16 ones, the 8 columns past V's of step 5's last half (wgmma_pv_half<.., 72>).
  constexpr bool kOnesTile = kWgmma && Spec::normalise_by_pv_sum;
  std::uint16_t* sOnes = sV + kStages * kBlockN * kD;
  // The ring's mbarriers: full[s] at bars + 8·s, empty[s] at bars + 8·(kStages + s).
  const std::uint32_t bars = smem_addr(sOnes + (kOnesTile ? 4096 : 0));
  auto full_bar = [&](int s) { return bars + 8 * s; };
  auto empty_bar = [&](int s) { return bars + 8 * (kStages + s); };

  // Causal: the last query blocks see the most keys, so they are started first (shorter tail of the grid).
  const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const std::size_t head_scores = (std::size_t(b) * p.heads_q + h) * p.n_q * p.n_k;  // this head's mask/bias
  // kMasks: compiled with the keep-mask and bias reads (only then are p.mask, p.bias looked at); without them the
  // checked steps carry nothing extra.
  const std::uint8_t* gmask = kMasks && p.mask ? p.mask + head_scores : nullptr;
  const float* gbias = kMasks && p.bias ? p.bias + head_scores : nullptr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* gq = p.q + (std::size_t(b) * p.heads_q + h) * p.n_q * kD;
  const std::uint16_t* gk = p.k + (std::size_t(b) * p.heads_kv + hk) * p.n_k * kD;
  const std::uint16_t* gv = p.v + (std::size_t(b) * p.heads_kv + hk) * p.n_k * kD;
  const int row0 = m_block * kBlockM;
  const int wrow0 = row0 + warp * 16 * kMT;  // this warp's first row
  const int diag = p.n_k - p.n_q;  // query i sees key j iff j <= i + diag (bottom-right causal)
  // fa2 skips key tiles no row of a tile_q group can see (FA2's n_block_max): with mask −inf such a tile is a
  // no-op of steps 2-6 for finite V (0·v). The paper's code visits every tile: its finite mask value ties every key of an
  // all-masked tile, so the fixed policy shifts the max to 0 there, and the model does the same.
  auto tiles_for = [&](int last_row) {
    const int n_end = (p.causal && !Spec::paper) ? min(p.n_k, last_row + diag + 1) : p.n_k;
    return n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;
  };
  const int n_blocks = tiles_for(min(row0 + kBlockM, p.n_q) - 1);
  const int group0 = wrow0 / Spec::tile_q * Spec::tile_q;
  const int warp_blocks = tiles_for(min(group0 + Spec::tile_q, p.n_q) - 1);

  if constexpr (kOnesTile) {
    for (int c = threadIdx.x; c < 2048; c += kThreads) reinterpret_cast<std::uint32_t*>(sOnes)[c] = 0x3F803F80u;
    fence_proxy_async();  // visible to wgmma's reads after the block-wide barrier below
  }
  for (int c = threadIdx.x; c < kBlockM * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool ok = row0 + r < p.n_q;
    cp_async_16(&sQ[tile_off(r, col, kBlockM)], gq + std::size_t(ok ? row0 + r : 0) * kD + col, ok);
  }
  auto load_kv = [&](int nb, int buf) {
    std::uint16_t* k_dst = sK + buf * kBlockN * kD;
    std::uint16_t* v_dst = sV + buf * kBlockN * kD;
    for (int c = threadIdx.x; c < kBlockN * kChunks; c += kThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const int j = nb * kBlockN + r;
      const bool ok = j < p.n_k;
      const std::size_t off = std::size_t(ok ? j : 0) * kD + col;
      cp_async_16(&k_dst[tile_off(r, col, kBlockN)], gk + off, ok);
      cp_async_16(&v_dst[tile_off(r, col, kBlockN)], gv + off, ok);
    }
  };
  if constexpr (!kRing) {
    if (n_blocks > 0) load_kv(0, 0);
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (kWgmma) fence_proxy_async();
    __syncthreads();
  } else {
    if (threadIdx.x == 0)
      for (int s = 0; s < kStages; ++s) mbar_init(full_bar(s), kThreads), mbar_init(empty_bar(s), kThreads);
    __syncthreads();  // the barriers are initialised before anyone arrives
    // Q's copies land with tile 0's (an arrival waits for all of the thread's earlier copies).
    for (int nb = 0; nb < 2 && nb < n_blocks; ++nb) load_kv(nb, nb), mbar_arrive_cp_async(full_bar(nb));
    if (n_blocks == 0) cp_async_commit(), cp_async_wait<0>();  // Q's copies may not outlive the block
  }

  // ldmatrix addresses. With the XOR swizzle, the chunk of k16 step kk (or output slice pair dp) of a lane is
  // (2·kk + c) ^ (lane % 8) = 8·(kk / 4) + ((2·(kk % 4)) ^ (c ^ lane % 8)): four per-lane offsets, the rest
  // compile-time offsets folded into the instruction (checked against swz() for every lane and step).
  constexpr std::uint32_t kTileBytes = kBlockN * kD * 2;
  const int idx = lane / 8, l8 = lane % 8;
  std::uint32_t k_off[4], v_off[4];  // bytes, j = kk % 4 (dp % 4 for V)
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    k_off[j] = smem_addr(sK) + 2 * (((idx / 2) * 8 + l8) * kD + 8 * ((2 * j) ^ ((idx % 2) ^ l8)));
    v_off[j] = smem_addr(sV) + 2 * (((idx % 2) * 8 + l8) * kD + 8 * ((2 * j) ^ ((idx / 2) ^ l8)));
  }
  // Q fragments (A operand, row-major [row][d]) of m16 tile mt, k16 step kk: from registers or shared memory.
  // A Q fragment's lane pattern is V's (row (idx % 2)·8 + l8, chunk 2·kk + idx / 2), so it reuses v_off.
  const std::uint32_t q_delta = smem_addr(sQ) - smem_addr(sV) + 2 * warp * 16 * kMT * kD;
  auto q_addr = [&](int mt, int kk) { return v_off[kk % 4] + q_delta + 2 * (mt * 16 * kD + 64 * (kk / 4)); };
  std::uint32_t qf[kQRegs ? kMT : 1][kQRegs ? kKQ : 1][4];
  if constexpr (kQRegs) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < kKQ; ++kk) ldsm_x4_at(qf[mt][kk], q_addr(mt, kk));
  }

  // Per thread: rows q = 2·mt + ri, ri = 0 (g) and ri = 1 (g + 8) of m16 tile mt.
  constexpr int kRows = 2 * kMT;
  auto row = [&](int q) { return wrow0 + (q / 2) * 16 + (q % 2) * 8 + g; };
  // m_run, l_run: the CPU model's m, l. They start at mask_value: −inf (fa2), −max(bf16) (paper: PyTorch's sentinel).
  // l_pv: fa2-psum's second row sum (of the bf16 p̄ step 5 multiplies), O's divisor; l_run still gives LSE.
  float m_run[kRows], l_run[kRows], l_pv[kRows];
#pragma unroll
  for (int q = 0; q < kRows; ++q) m_run[q] = Spec::mask_value, l_run[q] = 0.f, l_pv[q] = 0.f;
  float acc[kMT][kDT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kDT; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;

  // The tile in flight: its scores (then p̄), its row statistics for step 6 and p̄ as bf16 A fragments. buf and
  // n0 say which tile the steps below work on; the tile loop sets them.
  float s[kMT][kNT][4];
  float m_new[kRows], alpha[kRows], block_sum[kRows], block_sum_pv[kRows];
  std::uint32_t pf[kMT][kNT / 2][4];
  std::uint32_t buf = 0;  // byte offset of the tile's K/V stage
  int n0 = 0;             // the tile's first key
  // exists: key inside [0, n_k); visible: exists and not causally masked for this element's row.
  auto key_of = [&](int n, int i) { return n0 + n * 8 + 2 * t + (i & 1); };
  auto exists = [&](auto mask_tag, int n, int i) { return !decltype(mask_tag)::value || key_of(n, i) < p.n_k; };
  auto visible = [&](auto mask_tag, int mt, int n, int i) {
    if (!decltype(mask_tag)::value) return true;
    const int j = key_of(n, i);
    const int i_row = row(2 * mt + (i >> 1));
    return j < p.n_k && (!p.causal || j <= i_row + diag) &&
           (!gmask || (i_row < p.n_q && gmask[std::size_t(i_row) * p.n_k + j]));
  };
  // Only the tail tile and tiles crossing the causal diagonal of this warp's rows need per-element masks;
  // the steps are compiled twice (with and without the checks) so other tiles carry none of them.
  auto tile_needs_mask = [&]() {
    return (kMasks && (gmask || gbias)) || (n0 + kBlockN > p.n_k) || (p.causal && n0 + kBlockN - 1 > wrow0 + diag);
  };

  // step 1: s_j = q·k_j on the tensor cores (fp32 accumulation, TENSOR_CORES.md), rounded to qk_fmt;
  //         scaled in s_fmt when the scale is not folded into the exponent; masked keys get mask_value.
  auto qk_mma = [&]() {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kNT; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKQ; ++kk) {
      std::uint32_t qs[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qs[mt][e] = qf[mt][kk][e];
        } else {
          ldsm_x4_at(qs[mt], q_addr(mt, kk));
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        std::uint32_t kb[4];
        ldsm_x4_at(kb, k_off[kk % 4] + buf + 2 * (np * 16 * kD + 64 * (kk / 4)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_bf16_16816_n16(s[mt][2 * np], s[mt][2 * np + 1], qs[mt], kb);
      }
    }
  };
  // The wgmma form, for the warpgroup's 64 rows × 64 keys (k steps in order from 0), into s; not waited for.
  auto qk_wgmma = [&]() {
    float(&d)[kNT * 4] = reinterpret_cast<float(&)[kNT * 4]>(s[0]);  // kMT = 1: s[0] holds the 32 accumulators
    wgmma_qk<kKQ, false>(d, smem_addr(sQ) + (warp / 4) * 64 * 128, kBlockM, smem_addr(sK) + buf);
  };
  auto finish_scores = [&](auto mask_tag) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          float& x0 = s[mt][n][i];
          float& x1 = s[mt][n][i + 1];
          round_pair<Spec::qk_fmt>(x0, x1);
          if constexpr (!Spec::scale_in_exp) {
            x0 = __fmul_rn(x0, p.scale), x1 = __fmul_rn(x1, p.scale);
            round_pair<Spec::s_fmt>(x0, x1);
          }
          const int i_row = row(2 * mt + (i >> 1));
          if (kMasks && decltype(mask_tag)::value && gbias && i_row < p.n_q) {  // (tile_needs_mask: all tiles)
            const int j = key_of(n, i);
            const float* bb = gbias + std::size_t(i_row) * p.n_k + j;
            if (visible(mask_tag, mt, n, i)) x0 = add_bias<Spec>(x0, bb[0], p.scale);
            if (visible(mask_tag, mt, n, i + 1)) x1 = add_bias<Spec>(x1, bb[1], p.scale);
          }
          if (!visible(mask_tag, mt, n, i)) x0 = exists(mask_tag, n, i) ? Spec::mask_value : -INFINITY;
          if (!visible(mask_tag, mt, n, i + 1)) x1 = exists(mask_tag, n, i + 1) ? Spec::mask_value : -INFINITY;
        }
  };

  // steps 2-4 on s (the scores become p̄).
  auto softmax = [&](auto mask_tag) {
    // step 2: r = the tile's row max (exact; fmaxf: a NaN score does not enter it); the fixed policy shifts it when
    //         count > 1 scores lie within the tolerance of r; m_new = round(max(m_old, r'), max_fmt). Reductions
    //         over the quad by shuffles.
    float r[kRows];
    if constexpr (!Spec::fixed && Spec::s_fmt == Format::kBF16) {
      // The paper's scores are bf16 already: both rows' maxima in one packed tournament (as the fixed form's top two).
      // (A tile whose scores are all NaN gives r = NaN here, where an fmaxf chain from −inf gave −inf: m_new is
      // round(fmaxf(m_old, r)) = m_old either way, m_old being finite from the start in the paper's numerics.)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        float rows[2];
        quad_max_rows_bf16<!decltype(mask_tag)::value>(s[mt], rows);
        r[2 * mt] = rows[0], r[2 * mt + 1] = rows[1];
      }
    } else if constexpr (!Spec::fixed) {
#pragma unroll
      for (int q = 0; q < kRows; ++q) {
        const int mt = q / 2, ri = q % 2;
        float hi = -INFINITY;
#pragma unroll
        for (int n = 0; n < kNT; ++n) hi = fmaxf(hi, fmaxf(s[mt][n][2 * ri], s[mt][n][2 * ri + 1]));
        r[q] = quad_max(hi);
      }
    } else {
      // The public code counts `attn_weights >= block_row_maxes - 1e-3` on bf16 tensors: fp32 opmath, s_fmt.
      // Only "count > 1" matters, and with thr <= r that is exactly "the second largest score (repeats
      // counted) >= thr", so the row max and the runner-up are reduced together (top2, no count pass after
      // the max). Keys past n_k hold −inf, so they count only if thr = −inf (r − tolerance overflowed, or
      // tolerance = inf); in that rare case the tail tile counts its existing keys as the public code does.
      // Only a finite r is shifted: fa2's all-masked tile (r = −inf) is left alone.
      float top1[kMT][2], top2[kMT][2];  // row g + 8·ri of m16 tile mt
      // The paper's scores are bf16 already: each packed max / min.NaN serves two keys (and, after the per-row
      // tournaments, both rows), so about half the instructions of the fp32 form (quad_top2_rows_bf16).
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Spec::s_fmt == Format::kBF16)
          quad_top2_rows_bf16<!decltype(mask_tag)::value>(s[mt], top1[mt], top2[mt]);
        else
          quad_top2_rows(s[mt], top1[mt], top2[mt]);
      }
      bool shift[kRows];
      bool any_shift = false;
#pragma unroll
      for (int q = 0; q < kRows; ++q) {
        const int mt = q / 2, ri = q % 2;
        const float m1 = top1[mt][ri], m2 = top2[mt][ri];
        r[q] = m1;
        const float thr = round_float(__fsub_rn(m1, p.tolerance), Spec::s_fmt);
        bool several = m2 >= thr;
        if (decltype(mask_tag)::value && thr == -INFINITY) {  // quad-uniform branch: shuffle within the quad
          int count = 0;
#pragma unroll
          for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int i = 2 * ri; i < 2 * ri + 2; ++i) count += exists(mask_tag, n, i) && !isnan(s[mt][n][i]);
          const unsigned quad = 0xfu << (lane & ~3);
          count += __shfl_xor_sync(quad, count, 1);
          several = count + __shfl_xor_sync(quad, count, 2) > 1;
        }
        shift[q] = several && isfinite(m1);
        any_shift = any_shift || shift[q];
      }
      // The shift runs only where some row of the warp has a near tie (a warp-uniform branch on a vote: on normal
      // inputs few warp-tiles do), and inside it as selects, so the rows of a warp do not diverge.
      if (__any_sync(0xffffffffu, any_shift)) {
#pragma unroll
        for (int q = 0; q < kRows; ++q) {
          const float m1 = r[q];
          const float shifted = m1 > 0.f ? round_float(__fmul_rn(p.beta, m1), Spec::max_fmt) : fmaxf(m1, 0.f);
          r[q] = shift[q] ? shifted : m1;
        }
      }
    }
    float m_scaled[kRows];
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      m_new[q] = round_float(fmaxf(m_run[q], r[q]), Spec::max_fmt);
      // step 6 (first half): α = exp(m_old − m_new) by exp_mode, rounded to rescale_fmt.
      if constexpr (Spec::exp2_folded) {
        const float m_sub = m_new[q] == -INFINITY ? 0.f : m_new[q];  // FA2's Check_inf: no (−inf) − (−inf)
        alpha[q] = round_float(exp2f(__fmul_rn(__fsub_rn(m_run[q], m_sub), p.scale_log2e)), Spec::rescale_fmt);
      } else {
        const float d = round_float(__fsub_rn(m_run[q], m_new[q]), Spec::s_fmt);
        alpha[q] = round_float(expf(d), Spec::rescale_fmt);
      }
      m_scaled[q] = m_new[q] == -INFINITY ? 0.f : __fmul_rn(m_new[q], p.scale_log2e);
    }

    // step 3: p̄_j = exp(s_j − m_new) by exp_mode, rounded to p_fmt; masked keys give 0.
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          const int q = 2 * mt + (i >> 1);
          float e[2];
          if constexpr (Spec::exp2_folded) {
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              const float a = __fmaf_rn(s[mt][n][i + u], p.scale_log2e, -m_scaled[q]);
              e[u] = exp2f(a);
            }
          } else {
            float d0 = __fsub_rn(s[mt][n][i], m_new[q]), d1 = __fsub_rn(s[mt][n][i + 1], m_new[q]);
            round_pair<Spec::s_fmt>(d0, d1);
            e[0] = expf(d0), e[1] = expf(d1);
          }
          round_pair<Spec::p_fmt>(e[0], e[1]);
          s[mt][n][i] = visible(mask_tag, mt, n, i) ? e[0] : 0.f;
          s[mt][n][i + 1] = visible(mask_tag, mt, n, i + 1) ? e[1] : 0.f;
        }

    // step 4: block row sum Σ_j p̄_j in fp32 (each thread in key order, then the quad), rounded to block_sum_fmt.
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      const int mt = q / 2, ri = q % 2;
      float part = 0.f;
#pragma unroll
      for (int n = 0; n < kNT; ++n) part = __fadd_rn(__fadd_rn(part, s[mt][n][2 * ri]), s[mt][n][2 * ri + 1]);
      block_sum[q] = round_float(quad_sum(part), Spec::block_sum_fmt);
      if (block_sum[q] < Spec::block_sum_min) block_sum[q] = round_float(Spec::block_sum_min, Spec::block_sum_fmt);
    }
  };

  // step 5: block output Σ_j round(p̄_j, pv_in_fmt)·v_j on the tensor cores (fp32), rounded to block_out_fmt;
  // step 6: acc = round(round(α·acc, acc_fmt) + block output, acc_fmt), per 8-column slice as it is ready.
  auto alpha_all_one = [&]() {
    bool alpha_one = true;
#pragma unroll
    for (int q = 0; q < kRows; ++q) alpha_one = alpha_one && alpha[q] == 1.f;
    alpha_one = __all_sync(0xffffffffu, alpha_one);
    return alpha_one;
  };
  auto make_pf = [&]() {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int js = 0; js < kNT / 2; ++js) {
        pf[mt][js][0] = cvt_bf16x2(s[mt][2 * js][0], s[mt][2 * js][1]);
        pf[mt][js][1] = cvt_bf16x2(s[mt][2 * js][2], s[mt][2 * js][3]);
        pf[mt][js][2] = cvt_bf16x2(s[mt][2 * js + 1][0], s[mt][2 * js + 1][1]);
        pf[mt][js][3] = cvt_bf16x2(s[mt][2 * js + 1][2], s[mt][2 * js + 1][3]);
      }
  };
    // step 6 for the 8-column slices 2·dp and 2·dp + 1, given their block output blk.
    auto add_block = [&](auto one_tag, int dp, float (&blk)[kMT][2][4]) {
      constexpr bool one = decltype(one_tag)::value;  // α = 1 in every row of the warp
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
          for (int i = 0; i < 4; i += 2) {
            float* a = &acc[mt][2 * dp + u][i];
            float o0 = blk[mt][u][i], o1 = blk[mt][u][i + 1];
            round_pair<Spec::block_out_fmt>(o0, o1);
            float x0 = a[0], x1 = a[1];
            if constexpr (!one) {
              const float al = alpha[2 * mt + (i >> 1)];
              x0 = __fmul_rn(al, x0), x1 = __fmul_rn(al, x1);
              round_pair<Spec::acc_fmt>(x0, x1);
            }
            x0 = __fadd_rn(x0, o0), x1 = __fadd_rn(x1, o1);
            round_pair<Spec::acc_fmt>(x0, x1);
            a[0] = x0, a[1] = x1;
          }
    };
  auto pv_mma = [&](auto one_tag) {
#pragma unroll
    for (int dp = 0; dp < kDT / 2; ++dp) {
      float blk[kMT][2][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int u = 0; u < 2; ++u) blk[mt][u][0] = blk[mt][u][1] = blk[mt][u][2] = blk[mt][u][3] = 0.f;
#pragma unroll
      for (int js = 0; js < kNT / 2; ++js) {
        std::uint32_t vb[4];
        ldsm_x4_t_at(vb, v_off[dp % 4] + buf + 2 * (js * 16 * kD + 64 * (dp / 4)));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_bf16_16816_n16(blk[mt][0], blk[mt][1], pf[mt][js], vb);
      }
      add_block(one_tag, dp, blk);
    }
  };
  // fa2-psum, step 4's second sum: Σ_j p̄_j·1 over the tile on the tensor cores, k16 steps chained from zero as step 5
  // chains each column (the CPU twin's mma_dot against a column of ones), from the same bf16 A fragments.
  auto pv_rowsum_mma = [&]() {
    constexpr std::uint32_t kOnes = 0x3F803F80u;  // two bf16 1.0
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float bs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int js = 0; js < kNT / 2; ++js) mma_bf16_16816(bs, pf[mt][js], kOnes, kOnes, bs);
      block_sum_pv[2 * mt] = round_float(bs[0], Spec::block_sum_fmt);  // row g (cols 2t, 2t + 1 are equal)
      block_sum_pv[2 * mt + 1] = round_float(bs[2], Spec::block_sum_fmt);  // row g + 8
    }
  };
  // Steps 1 (mma.sync; the wgmma form is issued outside the per-warp mask branch) to 4 of the tile in flight.
  auto scores_and_softmax = [&](auto mask_tag) {
    if constexpr (!kWgmma) qk_mma();
    finish_scores(mask_tag);
    softmax(mask_tag);
  };
  auto stats = [&]() {
    // step 6 (rest): l = round(round(α·l, rowsum_fmt) + block sum, rowsum_fmt); m_old = m_new.
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      l_run[q] = round_float(__fadd_rn(round_float(__fmul_rn(alpha[q], l_run[q]), Spec::rowsum_fmt), block_sum[q]),
                             Spec::rowsum_fmt);
      if constexpr (Spec::normalise_by_pv_sum)
        l_pv[q] = round_float(__fadd_rn(round_float(__fmul_rn(alpha[q], l_pv[q]), Spec::rowsum_fmt), block_sum_pv[q]),
                              Spec::rowsum_fmt);
      m_run[q] = m_new[q];
    }
  };

  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb % kStages;
    if constexpr (!kRing) {
      if (nb > 0) {
        cp_async_wait<0>();
        if constexpr (kWgmma) fence_proxy_async();  // ... and the copies are visible to wgmma's reads
        __syncthreads();  // tile nb has landed; every warp is done with the buffer refilled next
      }
      if (nb + 1 < n_blocks) load_kv(nb + 1, (nb + 1) & 1);
      cp_async_commit();
    } else {
      mbar_wait(full_bar(stage), (nb / kStages) & 1);  // every thread's copies of tile nb have landed
      fence_proxy_async();                             // ... and are visible to wgmma's reads
    }
    buf = stage * kTileBytes;
    n0 = nb * kBlockN;
    if constexpr (!kWgmma) {
      if (nb >= warp_blocks) continue;  // fa2 causal: no row of this warp's tile_q group sees tile nb
    } else {
      // ptxas serialises every wgmma of a kernel where one sits on a path it cannot prove warpgroup-uniform,
      // so nothing here branches per warp around a wgmma or its accumulators: fa2's causal tile skip is not
      // taken (for its numerics a tile no row of the warp sees is a no-op of steps 2-6 for finite V, as said at
      // tiles_for), nor the α = 1 shortcut (round(1·acc) = acc: same bits).
      qk_wgmma();
      if constexpr (kRing) {
        // Copy tile nb + 2 while the mmas run, into the stage tile nb + 2 − kStages had: first wait until every
        // thread is done reading that one (the empty barrier's (nb + 2 − kStages) / kStages-th phase).
        const int next = nb + 2, prev = next - kStages;
        if (next < n_blocks) {
          if (prev >= 0) mbar_wait(empty_bar(next % kStages), (prev / kStages) & 1);
          load_kv(next, next % kStages);
          mbar_arrive_cp_async(full_bar(next % kStages));
        }
      }
      wgmma_wait<0>();
    }
    if (tile_needs_mask()) scores_and_softmax(std::true_type{});
    else scores_and_softmax(std::false_type{});
    if constexpr (!kWgmma) {
      const bool one = alpha_all_one();
      make_pf();
      if constexpr (Spec::normalise_by_pv_sum) pv_rowsum_mma();
      if (one) pv_mma(std::true_type{});
      else pv_mma(std::false_type{});
    } else {
      make_pf();
#pragma unroll
      for (int half = 0; half < kD / 64; ++half) {  // in 64-column halves at d 128: 32 live accumulators, not 64
        // fa2-psum: the last half's wgmmas carry its second row sum too (N = 72: bo[32], bo[34]). A separate
        // m64n8k16 chain against ones cost its own issue, commit and wait: fix overhead 3.54% → 1.98% at d128 full
        // seq 4096, 3.12% → 2.11% causal, and 1.71% → 2.62% at d64 full (one half there; H100, bench_ab, session 48).
        // In half 0 instead, ptxas serialised the d128 splits' wgmmas (C7511, "insufficient register resources");
        // in the last half it still does for the one-warpgroup split (kWgmma64, not a default: slower, same bits).
        float bo[36];
        // The wgmma form of step 5 for the warpgroup's 64 rows and output columns 64·half .. 64·half + 63 (that
        // 64-column block of V's storage), into bo.
        if (Spec::normalise_by_pv_sum && half == kD / 64 - 1)
          wgmma_pv_half<false, 72>(bo, pf[0], smem_addr(sV) + buf, half, smem_addr(sOnes));
        else
          wgmma_pv_half<false>(bo, pf[0], smem_addr(sV) + buf, half);
        wgmma_wait<0>();
#pragma unroll
        for (int dp = 0; dp < 4; ++dp) {
          float blk[kMT][2][4];
#pragma unroll
          for (int e = 0; e < 8; ++e) blk[0][e / 4][e % 4] = bo[8 * dp + e];
          add_block(std::false_type{}, 4 * half + dp, blk);
        }
        if (Spec::normalise_by_pv_sum && half == kD / 64 - 1) {
          block_sum_pv[0] = round_float(bo[32], Spec::block_sum_fmt);  // row g (cols 2t, 2t + 1 are equal)
          block_sum_pv[1] = round_float(bo[34], Spec::block_sum_fmt);  // row g + 8
        }
      }
      if constexpr (kRing) mbar_arrive(empty_bar(stage));  // this thread's mmas are done reading tile nb
    }
    stats();
  }

  // step 7: o = acc / l (divide) or acc · round(1/l, fp32) (reciprocal) in out_div_fmt, then out_fmt;
  //         LSE = m·(scale if scale_in_exp) + round(log(l), log_l_fmt) in lse_fmt. A row with no visible key
  //         (or, in fa2, a running max still −inf) gives O = 0, LSE = −inf. FA2's empty sum (l = 0 or NaN):
  //         1/l is taken as 1 and LSE = +inf. fa2-psum divides O by l_pv (the same rule) and takes LSE from l.
  // With a keep-mask a row may see no key although the causal rule lets it (the paper's finite mask value keeps
  // its running max finite): each quad scans its row's mask, lane t every fourth key.
  bool any_visible[kRows];
#pragma unroll
  for (int q = 0; q < kRows; ++q) {
    any_visible[q] = true;
    if constexpr (kMasks) {
      const int i_row = row(q);
      int any = gmask == nullptr;
      if (gmask && i_row < p.n_q) {
        const int j_end = p.causal ? min(p.n_k, i_row + diag + 1) : p.n_k;
        for (int j = t; j < j_end && !any; j += 4) any = gmask[std::size_t(i_row) * p.n_k + j] != 0;
      }
      any |= __shfl_xor_sync(0xffffffffu, any, 1);
      any_visible[q] = (any | __shfl_xor_sync(0xffffffffu, any, 2)) != 0;
    }
  }
#pragma unroll
  for (int q = 0; q < kRows; ++q) {
    const int mt = q / 2, ri = q % 2;
    const int i_row = row(q);
    if (i_row >= p.n_q) continue;
    const float l = l_run[q], m = m_run[q];
    const bool empty_row = !(p.n_k > 0 && (!p.causal || i_row + diag >= 0)) || !any_visible[q] || m == -INFINITY;
    const bool empty_sum = l == 0.f || isnan(l);  // FA2: sum == 0 || sum != sum (the CPU model's step 7)
    const float l_o = Spec::normalise_by_pv_sum ? l_pv[q] : l;  // O's divisor (fa2-psum: the sum of the bf16 p̄)
    const bool empty_o = l_o == 0.f || isnan(l_o);
    const float inv = empty_o ? 1.f : round_float(__fdiv_rn(1.f, l_o), Spec::out_div_fmt);
    std::uint16_t* go = p.o + ((std::size_t(b) * p.heads_q + h) * p.n_q + i_row) * kD;
#pragma unroll
    for (int n = 0; n < kDT; ++n) {
      float o2[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float a = acc[mt][n][2 * ri + u];
        const float o = Spec::reciprocal_normalise ? __fmul_rn(a, inv) : __fdiv_rn(a, l_o);
        o2[u] = empty_row ? 0.f : round_float(round_float(o, Spec::out_div_fmt), Spec::out_fmt);
      }
      *reinterpret_cast<std::uint32_t*>(go + n * 8 + 2 * t) = pack_bf16(o2[0], o2[1]);
    }
    if (t == 0) {
      const float log_l = round_float(logf(l), Spec::log_l_fmt);
      float lse;
      if constexpr (Spec::scale_in_exp) {
        lse = __fmaf_rn(m, p.scale, log_l);  // nvcc contracts FA2's row_max * scale + __logf(row_sum)
        if (empty_sum && Spec::reciprocal_normalise) lse = INFINITY;
      } else {
        lse = __fadd_rn(log_l, m);
      }
      p.lse[(std::size_t(b) * p.heads_q + h) * p.n_q + i_row] = empty_row ? -INFINITY : round_float(lse, Spec::lse_fmt);
    }
  }
}

template <int kD, class Spec, int kMT, int kNWarps, bool kQRegs, bool kWgmma = false, int kStages = 2,
          bool kMasks = false>
void launch(const FwdParams& p, cudaStream_t stream) {
  constexpr int kBlockM = 16 * kMT * kNWarps;
  // Q, the K/V stages, the ring's mbarriers, wgmma's alignment slack (and fa2-psum's tile of ones).
  constexpr int kSmem = (kBlockM + 2 * kStages * Spec::tile_k) * kD * 2 + (kStages > 2 ? 16 * kStages : 0) +
                        (kWgmma ? 1024 : 0) + (kWgmma && Spec::normalise_by_pv_sum ? 8192 : 0);  // + fa2-psum's ones
  auto kernel = flash_fwd_kernel<kD, Spec, kMT, kNWarps, kQRegs, kWgmma, kStages, kMasks>;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // gridDim.z is limited to 65535: long batches go in slices.
  constexpr int kMaxZ = 65535;
  for (int b0 = 0; b0 < p.batch; b0 += kMaxZ) {
    FwdParams s = p;
    s.batch = std::min(kMaxZ, p.batch - b0);
    s.q += std::size_t(b0) * p.heads_q * p.n_q * kD;
    s.o += std::size_t(b0) * p.heads_q * p.n_q * kD;
    s.lse += std::size_t(b0) * p.heads_q * p.n_q;
    s.k += std::size_t(b0) * p.heads_kv * p.n_k * kD;
    s.v += std::size_t(b0) * p.heads_kv * p.n_k * kD;
    if (s.mask) s.mask += std::size_t(b0) * p.heads_q * p.n_q * p.n_k;
    if (s.bias) s.bias += std::size_t(b0) * p.heads_q * p.n_q * p.n_k;
    const dim3 grid((p.n_q + kBlockM - 1) / kBlockM, p.heads_q, s.batch);
    kernel<<<grid, kNWarps * 32, kSmem, stream>>>(s);
    ATTN_CUDA_CHECK(cudaGetLastError());
  }
}

// The fastest split per head dim and numerics on an H200 (bench_attention fwdtile/).
template <int kD, class Spec, bool kMasks>
void launch_default(const FwdParams& p, cudaStream_t stream) {
#if defined(ATTNCHECK_WGMMA)
  if constexpr (kD == 128) return launch<kD, Spec, 1, 12, false, true, 4, kMasks>(p, stream);
  else return launch<kD, Spec, 1, 8, false, true, 4, kMasks>(p, stream);
#else
  if constexpr (Spec::paper) return launch<kD, Spec, 1, 4, true, false, 2, kMasks>(p, stream);
  else if constexpr (kD == 128) return launch<kD, Spec, 2, 4, false, false, 2, kMasks>(p, stream);
  else return launch<kD, Spec, 2, 4, true, false, 2, kMasks>(p, stream);
#endif
}

template <int kD, class Spec>
void launch_tiling(FwdTiling tiling, const FwdParams& p, cudaStream_t stream) {
  if (p.mask || p.bias) return launch_default<kD, Spec, true>(p, stream);  // the one split built with them
  switch (tiling) {
    case FwdTiling::kDefault: return launch_default<kD, Spec, false>(p, stream);
    case FwdTiling::kWarp16Q4: return launch<kD, Spec, 1, 4, true>(p, stream);
    case FwdTiling::kWarp16Q8: return launch<kD, Spec, 1, 8, true>(p, stream);
    case FwdTiling::kWarp32Smem: return launch<kD, Spec, 2, 4, false>(p, stream);
    case FwdTiling::kWarp32Regs: return launch<kD, Spec, 2, 4, true>(p, stream);
#if defined(ATTNCHECK_WGMMA)
    case FwdTiling::kWgmma64: return launch<kD, Spec, 1, 4, false, true>(p, stream);
    case FwdTiling::kWgmma128: return launch<kD, Spec, 1, 8, false, true, 4>(p, stream);
    case FwdTiling::kWgmma192: return launch<kD, Spec, 1, 12, false, true, 4>(p, stream);
#else
    case FwdTiling::kWgmma64:
    case FwdTiling::kWgmma128:
    case FwdTiling::kWgmma192: throw Error("launch_flash_fwd: the wgmma splits need a build for sm_90a");
#endif
  }
  throw Error("launch_flash_fwd: unknown tiling");
}

template <int kD>
void launch_variant(Variant v, FwdTiling tiling, const FwdParams& p, cudaStream_t stream) {
  switch (v) {
    case Variant::kFa2: return launch_tiling<kD, Fa2>(tiling, p, stream);
    case Variant::kFa2Fixed: return launch_tiling<kD, Fa2Fixed>(tiling, p, stream);
    case Variant::kPaper: return launch_tiling<kD, Paper>(tiling, p, stream);
    case Variant::kPaperFixed: return launch_tiling<kD, PaperFixed>(tiling, p, stream);
    case Variant::kFa2Psum: return launch_tiling<kD, Fa2Psum>(tiling, p, stream);
  }
}

}  // namespace

void check_heads_q(int heads_q, const std::string& who) {
  if (heads_q > kMaxHeadsQ)
    throw Error(who + ": heads_q " + std::to_string(heads_q) + " is more than the " + std::to_string(kMaxHeadsQ) +
                " query heads its launches take (one grid row per query head: CUDA's gridDim.y limit)");
}

void launch_flash_fwd(Variant variant, int head_dim, const FwdParams& p, cudaStream_t stream, FwdTiling tiling) {
  if (p.batch <= 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.n_q <= 0 || p.n_k <= 0)
    throw Error("launch_flash_fwd: bad shape");
  check_heads_q(p.heads_q, "launch_flash_fwd");
  if (head_dim == 64) return launch_variant<64>(variant, tiling, p, stream);
  if (head_dim == 128) return launch_variant<128>(variant, tiling, p, stream);
  throw Error("launch_flash_fwd: head_dim " + std::to_string(head_dim) + " (kernels exist for 64 and 128)");
}

}  // namespace attncheck::cuda
