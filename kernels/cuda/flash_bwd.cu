// flash_bwd.cu — FlashAttention-2's backward pass (algorithm 2) on tensor cores, deterministic, one template
// over the numerics (device_spec.h), with the step labels of kernels/numerics_spec.h and the CPU model
// (kernels/cpu/flash_model_backward.cpp). Device helpers: bwd_common.cuh.
//
//   bwd_delta_kernel   step 8: δ_i = Σ_c round(dO_ic·O_ic, delta_prod_fmt), fp32 in column order (one thread
//                      per row, so the order is the model's exactly).
//   bwd_dkdv_kernel    step 9 for dK, dV: one block per (16·kKW keys, query head, batch), kKW warps of 16 keys;
//                      walks the query tiles (64 rows) in increasing order, double-buffered (cp.async); per tile
//                      the partial Σ over the tile's queries is rounded to grad_partial_fmt and added to the
//                      running sum (grad_acc_fmt). dS (ds_fmt = bf16) of every visited (query tile, key tile) goes
//                      to the workspace as a 64 × 64 tile [key][query]. step 10: dK·scale (fa2) -> grad_out_fmt;
//                      without GQA also the group step (written to dK, dV directly).
//   bwd_dq_kernel      step 9 for dQ: a GEMM over the workspace's dS, 4 warps × 16·kMT query rows per block, key
//                      tiles in increasing order, double-buffered; the partial per key tile (a chain of four k16
//                      mmas from 0, as in the dK/dV kernel) rounded and added as above; step 10: dQ·scale (fa2) -> grad_out_fmt.
//   bwd_group_kernel   step 10 (GQA only): dK, dV of the group's query heads summed in fp32 in head order, rounded.
// dS is computed once (the first version recomputed P and dS in the dQ kernel: 7 matmuls per tile pair, now 5); the
// dQ step reads exactly the bf16 values it used to compute. Tile sets (causal): a key tile visits the query tiles
// from the first one with a row that can see it, each 64-row query tile the key tiles before its last visible key;
// a warp skips the tiles its own 64-tile skips. The CPU model visits every tile; a tile with no visible pair adds
// +0 partials to sums that start at +0, so the bits are the same while Q, K and dO there are finite (0·inf = NaN;
// the CUDA twin skips as the kernel does). No atomics: same input, same
// bits, and the same bits as the first version on every split (bwd_regress, in commit 81e72db, since removed). Rounding: explicit
// __fadd_rn/__fmul_rn/__fmaf_rn, file built with -fmad=false (see flash_fwd.cu); bf16 rounding of arithmetic
// results in the loops uses cvt.rn.bf16(x2).f32, equal to round_bf16 on every non-NaN float (flash_fwd.cu); every
// NaN there comes out of arithmetic and is canonical already.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <type_traits>

#include "kernels/cuda/bwd_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/mma_ops.cuh"

namespace attncheck::cuda {
namespace {

using namespace bwd;

template <int kD, class Spec>
__global__ void bwd_delta_kernel(const BwdParams p) {
  const std::size_t rows = std::size_t(p.batch) * p.heads_q * p.n_q;
  const std::size_t row = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  // step 8: δ = Σ_c round(dO·O, delta_prod_fmt) in fp32, column order (zero padding adds +0: no change).
  const uint4* d_o = reinterpret_cast<const uint4*>(p.d_o + row * kD);
  const uint4* o = reinterpret_cast<const uint4*>(p.o + row * kD);
  float acc = 0.f;
#pragma unroll 4
  for (int c8 = 0; c8 < kD / 8; ++c8) {
    const uint4 a = d_o[c8], b = o[c8];
    const std::uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float a0 = __uint_as_float(aw[w] << 16), a1 = __uint_as_float(aw[w] & 0xffff0000u);
      const float b0 = __uint_as_float(bw[w] << 16), b1 = __uint_as_float(bw[w] & 0xffff0000u);
      acc = __fadd_rn(acc, round_float(__fmul_rn(a0, b0), Spec::delta_prod_fmt));
      acc = __fadd_rn(acc, round_float(__fmul_rn(a1, b1), Spec::delta_prod_fmt));
    }
  }
  p.delta[row] = round_float(acc, Spec::delta_fmt);
}

// step 9 for dK, dV (and dS to the workspace). Warp w owns keys j0 + 16w .. +15 (C rows: g and g + 8); its 64-key
// tile is the spec's key tile. The block walks the query tiles from the first one any of its warps needs; a warp
// starts at its own tile's first (causal), so its tile set is the spec's.
template <int kD, class Spec, int kKW, int kG>
__global__ void __launch_bounds__(kKW * 32) bwd_dkdv_kernel(const BwdParams p) {
  constexpr int kKeys = 16 * kKW, kThreads = kKW * 32;
  constexpr std::uint32_t kQBytes = kTile * kD * 2;  // one Q (or dO) tile
  extern __shared__ __align__(128) std::uint16_t smem[];
  std::uint16_t* sK = smem;                // [kKeys][kD] this block's keys
  std::uint16_t* sV = sK + kKeys * kD;
  std::uint16_t* sQ = sV + kKeys * kD;     // [2][64][kD] query tiles, double-buffered
  std::uint16_t* sdO = sQ + 2 * kTile * kD;
  float* sLse = reinterpret_cast<float*>(sdO + 2 * kTile * kD);  // [2][64]
  float* sDelta = sLse + 2 * kTile;                               // [2][64]
  const Step9<Spec> st{p.scale, p.scale_log2e};

  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int j0 = blockIdx.x * kKeys, wj0 = j0 + warp * 16;
  const int diag = p.n_k - p.n_q;
  const int n_qt = (p.n_q + kTile - 1) / kTile, n_kt = (p.n_k + kTile - 1) / kTile;
  const std::size_t kv_off = (std::size_t(b) * p.heads_kv + hk) * p.n_k;
  const std::size_t q_off = (std::size_t(b) * p.heads_q + h) * p.n_q;
  const std::uint8_t* gmask = p.mask ? p.mask + q_off * p.n_k : nullptr;  // this head's keep-mask rows
  const float* gbias = p.bias ? p.bias + q_off * p.n_k : nullptr;          // and bias rows
  load_rows<kD, kKeys, kThreads>(sK, p.k + (kv_off + j0) * kD, p.n_k - j0);
  load_rows<kD, kKeys, kThreads>(sV, p.v + (kv_off + j0) * kD, p.n_k - j0);
  // First query tile with a row that sees key tile j: i + diag >= j for some row i of the tile.
  auto first_qt = [&](int jt0) { return p.causal ? max(0, jt0 - diag) / kTile : 0; };
  const int kt = wj0 / kTile;
  const bool warp_live = wj0 < p.n_k;  // a warp wholly past n_k (last block) does nothing
  const int qt_block = first_qt(j0), qt_warp = first_qt(kt * kTile);
  auto load_q = [&](int qt, int buf) {
    const int i0 = qt * kTile;
    load_rows<kD, kTile, kThreads>(sQ + buf * kTile * kD, p.q + (q_off + i0) * kD, p.n_q - i0);
    load_rows<kD, kTile, kThreads>(sdO + buf * kTile * kD, p.d_o + (q_off + i0) * kD, p.n_q - i0);
    for (int r = threadIdx.x; r < 2 * kTile; r += kThreads) {
      const int rr = r % kTile;
      const bool ok = i0 + rr < p.n_q;
      const std::size_t src = q_off + (ok ? i0 + rr : 0);
      if (r < kTile) cp_async_4(&sLse[buf * kTile + rr], p.lse + src, ok);
      else cp_async_4(&sDelta[buf * kTile + rr], p.delta + src, ok);
    }
  };
  if (qt_block < n_qt) load_q(qt_block, 0);
  cp_async_commit();

  std::uint32_t off_a[4], off_b[4];
  lane_offsets<kD>(off_a, off_b, lane);
  const std::uint32_t k_base = smem_addr(sK) + 2 * warp * 16 * kD, v_base = smem_addr(sV) + 2 * warp * 16 * kD;
  float dk_acc[1][kD / 8][4], dv_acc[1][kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dk_acc[0][n][i] = dv_acc[0][n][i] = 0.f;
  const int key[2] = {wj0 + g, wj0 + g + 8};  // this thread's two keys (C rows)
  std::uint16_t* ds_out = p.ds + ((std::size_t(b) * p.heads_q + h) * n_qt * n_kt + kt) * (kTile * kTile);

  for (int qt = qt_block; qt < n_qt; ++qt) {
    const int buf = (qt - qt_block) & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile qt has landed; every warp is done with the other buffer
    if (qt + 1 < n_qt) load_q(qt + 1, buf ^ 1);
    cp_async_commit();
    if (!warp_live || qt < qt_warp) continue;  // warp-uniform: this warp's key tile does not see query tile qt
    const int i0 = qt * kTile;
    const std::uint32_t q_base = smem_addr(sQ) + buf * kQBytes, o_base = smem_addr(sdO) + buf * kQBytes;
    const float* lse = sLse + buf * kTile;
    const float* dlt = sDelta + buf * kTile;
    // step 9: sᵀ (keys × queries) = K·Qᵀ and dPᵀ = V·dOᵀ, one k loop (A: this warp's K/V rows, B: Q/dO rows).
    float pt[8][4], dt[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) pt[n][i] = dt[n][i] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      std::uint32_t ka[4], va[4];
      ldsm_x4_at(ka, k_base + off_a[kk % 4] + 128 * (kk / 4));
      ldsm_x4_at(va, v_base + off_a[kk % 4] + 128 * (kk / 4));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        std::uint32_t qb[4], ob[4];
        ldsm_x4_at(qb, q_base + off_b[kk % 4] + 2 * np * 16 * kD + 128 * (kk / 4));
        ldsm_x4_at(ob, o_base + off_b[kk % 4] + 2 * np * 16 * kD + 128 * (kk / 4));
        mma_bf16_16816_n16(pt[2 * np], pt[2 * np + 1], ka, qb);
        mma_bf16_16816_n16(dt[2 * np], dt[2 * np + 1], va, ob);
      }
    }
    // p (rounded to pv_in_fmt = bf16) and dS (ds_fmt = bf16) as A fragments over k = the 64 queries:
    // fragment [js][r] holds C slice n = 2·js + r / 2, row half r % 2.
    std::uint32_t pa[1][4][4], dsa[1][4][4];
    auto elementwise = [&](auto mask_tag) {
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          float pr[2], d[2];
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int qc = n * 8 + 2 * t + u;
            bool vis = true;
            if constexpr (decltype(mask_tag)::value) {
              const int qi = i0 + qc, kj = key[i >> 1];
              vis = qi < p.n_q && kj < p.n_k && (!p.causal || kj <= qi + diag) &&
                    (!gmask || gmask[std::size_t(qi) * p.n_k + kj]);
            }
            float s = st.score(pt[n][i + u]);
            if (decltype(mask_tag)::value && gbias && vis)
              s = add_bias<Spec>(s, gbias[std::size_t(i0 + qc) * p.n_k + key[i >> 1]], p.scale);
            pr[u] = vis ? st.prob(s, lse[qc]) : 0.f;
            d[u] = vis ? st.ds(pr[u], dt[n][i + u], dlt[qc]) : 0.f;
          }
          const int js = n / 2, r = (n % 2) * 2 + (i >> 1);
          pa[0][js][r] = cvt_bf16x2(pr[0], pr[1]);
          dsa[0][js][r] = cvt_bf16x2(d[0], d[1]);
        }
    };
    const bool needs_mask =
        gmask || gbias || wj0 + 16 > p.n_k || i0 + kTile > p.n_q || (p.causal && wj0 + 15 > i0 + diag);
    if (needs_mask) elementwise(std::true_type{});
    else elementwise(std::false_type{});
    // dS tile [key][query] of (query tile qt, key tile kt) for the dQ GEMM.
    std::uint16_t* ds_tile = ds_out + std::size_t(qt) * n_kt * (kTile * kTile) + (wj0 % kTile) * kTile;
#pragma unroll
    for (int js = 0; js < 4; ++js)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        *reinterpret_cast<std::uint32_t*>(ds_tile + (g + 8 * (r % 2)) * kTile + (2 * js + r / 2) * 8 + 2 * t) =
            dsa[0][js][r];
    // dV_j += Σ_i round(p_ij)·dO_i ; dK_j += Σ_i dS_ij·q_i (partials per query tile).
    add_partial<kD, Spec, 1, kG>(dv_acc, pa, o_base, off_a);
    add_partial<kD, Spec, 1, kG>(dk_acc, dsa, q_base, off_a);
  }
  cp_async_wait<0>();  // no copy may outlive the block (a block whose keys no query sees skips the loop)
  // step 10: dK·scale (fa2), rounded to grad_out_fmt, per query head. Without GQA (one query head per kv head)
  // the group sum is written here: round(0 + x) in fp32, as bwd_group_kernel does (it turns −0 into +0 and every
  // NaN into the canonical one), so the bits are those of the two-kernel path.
  const float post = Spec::scale_in_exp ? p.scale : 1.f;
  const bool direct = p.heads_q == p.heads_kv;
  auto group_of_one = [&](float x) {  // x -> its bf16 bits -> fp32, + 0, rounded: bwd_group_kernel's steps
    return round_float(__fadd_rn(0.f, __uint_as_float(__float_as_uint(x) & 0xffff0000u)), Spec::grad_out_fmt);
  };
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    if (key[ri] >= p.n_k) continue;
    const std::size_t off = ((std::size_t(b) * p.heads_q + h) * p.n_k + key[ri]) * kD;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int c = n * 8 + 2 * t;
      float k2[2], v2[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        k2[u] = round_float(__fmul_rn(dk_acc[0][n][2 * ri + u], post), Spec::grad_out_fmt);
        v2[u] = round_float(dv_acc[0][n][2 * ri + u], Spec::grad_out_fmt);
        if (direct) k2[u] = group_of_one(k2[u]), v2[u] = group_of_one(v2[u]);
      }
      *reinterpret_cast<std::uint32_t*>((direct ? p.dk : p.dk_head) + off + c) = pack_bf16(k2[0], k2[1]);
      *reinterpret_cast<std::uint32_t*>((direct ? p.dv : p.dv_head) + off + c) = pack_bf16(v2[0], v2[1]);
    }
  }
}

// step 9 for dQ: dQ_i += Σ_j dS_ij·k_j per key tile, a GEMM over the workspace. 4 warps × 16·kMT rows (kMT m16
// tiles); a warp's rows lie in one 64-row query tile, whose key-tile count it keeps (causal).
template <int kD, class Spec, int kMT>
__global__ void __launch_bounds__(128) bwd_dq_kernel(const BwdParams p) {
  constexpr int kBlockM = 64 * kMT, kQT = kBlockM / kTile;
  constexpr std::uint32_t kKBytes = kTile * kD * 2, kSBytes = kQT * kTile * kTile * 2;
  extern __shared__ __align__(128) std::uint16_t smem[];
  std::uint16_t* sK = smem;                    // [2][64][kD]
  std::uint16_t* sS = sK + 2 * kTile * kD;     // [2][kQT][64 keys][64 queries]
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int diag = p.n_k - p.n_q;
  const int n_qt = (p.n_q + kTile - 1) / kTile, n_kt = (p.n_k + kTile - 1) / kTile;
  const std::size_t kv_off = (std::size_t(b) * p.heads_kv + hk) * p.n_k;
  const std::size_t q_off = (std::size_t(b) * p.heads_q + h) * p.n_q;
  const int qt0 = blockIdx.x * kQT;
  // Key tiles of query tile qt: those before its last row's last visible key (all, non-causal).
  auto tiles_for = [&](int qt) {
    if (qt >= n_qt) return 0;
    const int last_row = min(qt * kTile + kTile, p.n_q) - 1;
    const int n_end = p.causal ? min(p.n_k, last_row + diag + 1) : p.n_k;
    return n_end > 0 ? (n_end + kTile - 1) / kTile : 0;
  };
  int qt_tiles[kQT];
#pragma unroll
  for (int u = 0; u < kQT; ++u) qt_tiles[u] = tiles_for(qt0 + u);
  const int block_tiles = max(qt_tiles[0], qt_tiles[kQT - 1]);  // the count grows with qt
  const int wq = warp * 16 * kMT / kTile;                        // this warp's query tile in the block
  const int wrow = warp * 16 * kMT % kTile;                      // its first row in that tile
  const int warp_tiles = tiles_for(qt0 + wq);
  const std::uint16_t* ds_in = p.ds + (std::size_t(b) * p.heads_q + h) * n_qt * n_kt * (kTile * kTile);
  auto load = [&](int jt, int buf) {
    load_rows<kD, kTile, 128>(sK + buf * kTile * kD, p.k + (kv_off + jt * kTile) * kD, p.n_k - jt * kTile);
#pragma unroll
    for (int u = 0; u < kQT; ++u) {
      if (jt >= qt_tiles[u]) continue;  // never written (causal) and never read
      // Key rows past n_k are zero-filled, not read: a dK/dV warp wholly past n_k writes none (its K rows are
      // zero-filled here too, so the products are +0·0: dS is 0 there).
      const std::uint16_t* src = ds_in + (std::size_t(qt0 + u) * n_kt + jt) * (kTile * kTile);
      load_rows<kTile, kTile, 128>(sS + (buf * kQT + u) * kTile * kTile, src, p.n_k - jt * kTile);
    }
  };
  if (block_tiles > 0) load(0, 0);
  cp_async_commit();

  std::uint32_t off_a[4], off_b[4], s_a[4], s_b[4];
  lane_offsets<kD>(off_a, off_b, lane);
  lane_offsets<kTile>(s_a, s_b, lane);
  // dS tile [key][query] read transposed as the A operand (rows = queries): pattern B over the key rows, query chunk
  // wrow / 8 + 2·mt + idx % 2, i.e. s_b[wrow / 16 + mt].
  std::uint32_t s_off[kMT];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int j = wrow / 16 + mt;
    s_off[mt] = j == 0 ? s_b[0] : j == 1 ? s_b[1] : j == 2 ? s_b[2] : s_b[3];
  }
  const std::uint32_t s_base = smem_addr(sS) + wq * kTile * kTile * 2;
  float acc[kMT][kD / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;

  for (int jt = 0; jt < block_tiles; ++jt) {
    const int buf = jt & 1;
    cp_async_wait<0>();
    __syncthreads();
    if (jt + 1 < block_tiles) load(jt + 1, buf ^ 1);
    cp_async_commit();
    if (jt >= warp_tiles) continue;  // warp-uniform: this warp's query tile sees no key of tile jt
    std::uint32_t sa[kMT][4][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int js = 0; js < 4; ++js)
        ldsm_x4_t_at(sa[mt][js], s_base + buf * kSBytes + s_off[mt] + 2 * js * 16 * kTile);
    add_partial<kD, Spec, kMT, kD == 64 ? 2 : 1>(acc, sa, smem_addr(sK) + buf * kKBytes, off_a);
  }
  cp_async_wait<0>();
  // step 10: dQ·scale (fa2), rounded to grad_out_fmt.
  const float post = Spec::scale_in_exp ? p.scale : 1.f;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      const int row = qt0 * kTile + warp * 16 * kMT + mt * 16 + ri * 8 + g;
      if (row >= p.n_q) continue;
      const std::size_t off = (q_off + row) * kD;
#pragma unroll
      for (int n = 0; n < kD / 8; ++n)
        *reinterpret_cast<std::uint32_t*>(p.dq + off + n * 8 + 2 * t) =
            pack_bf16(round_float(__fmul_rn(acc[mt][n][2 * ri], post), Spec::grad_out_fmt),
                      round_float(__fmul_rn(acc[mt][n][2 * ri + 1], post), Spec::grad_out_fmt));
    }
}

// step 10 (GQA): per kv element, Σ over the group's query heads (head order, fp32), rounded to grad_out_fmt.
template <int kD, class Spec>
__global__ void bwd_group_kernel(const BwdParams p) {
  const std::size_t n = std::size_t(p.batch) * p.heads_kv * p.n_k * kD;
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int group = p.heads_q / p.heads_kv;
  const std::size_t per_head = std::size_t(p.n_k) * kD;
  const std::size_t b_hk = e / per_head, rest = e % per_head;
  const std::size_t b = b_hk / p.heads_kv, hk = b_hk % p.heads_kv;
  float sk = 0.f, sv = 0.f;
  for (int gh = 0; gh < group; ++gh) {
    const std::size_t src = ((b * p.heads_q) + hk * group + gh) * per_head + rest;
    sk = __fadd_rn(sk, bf16_bits_to_float(p.dk_head[src]));
    sv = __fadd_rn(sv, bf16_bits_to_float(p.dv_head[src]));
  }
  p.dk[e] = static_cast<std::uint16_t>(__float_as_uint(round_float(sk, Spec::grad_out_fmt)) >> 16);
  p.dv[e] = static_cast<std::uint16_t>(__float_as_uint(round_float(sv, Spec::grad_out_fmt)) >> 16);
}

// The dS workspace when the caller passes none: stream-ordered allocations from one memory pool per device that
// keeps freed memory (release threshold: no limit), so back-to-back backward calls do not map it again each time.
// The pool holds at most the largest workspace used so far.
cudaMemPool_t workspace_pool() {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;
  int dev = 0;
  ATTN_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools.find(dev);
  if (it != pools.end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t pool;
  ATTN_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  std::uint64_t keep = ~std::uint64_t(0);
  ATTN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  pools.emplace(dev, pool);
  return pool;
}

template <int kD, class Spec, int kKW, int kG>
void launch_dkdv(const BwdParams& p, cudaStream_t stream) {
  constexpr int kSmem = (2 * 16 * kKW + 4 * kTile) * kD * 2 + 4 * kTile * 4;
  auto kernel = bwd_dkdv_kernel<kD, Spec, kKW, kG>;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  kernel<<<dim3((p.n_k + 16 * kKW - 1) / (16 * kKW), p.heads_q, p.batch), kKW * 32, kSmem, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
}

template <int kD, class Spec, int kMT>
void launch_dq(const BwdParams& p, cudaStream_t stream) {
  constexpr int kSmem = 2 * kTile * kD * 2 + 2 * kMT * kTile * kTile * 2;
  auto kernel = bwd_dq_kernel<kD, Spec, kMT>;
  ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  kernel<<<dim3((p.n_q + 64 * kMT - 1) / (64 * kMT), p.heads_q, p.batch), 128, kSmem, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
}

// One slice of at most 65,535 batches (gridDim.z's limit), its dS workspace given.
template <int kD, class Spec>
void launch_slice(const BwdParams& p, cudaStream_t stream) {
  const std::size_t rows = std::size_t(p.batch) * p.heads_q * p.n_q;
  bwd_delta_kernel<kD, Spec><<<unsigned((rows + 127) / 128), 128, 0, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
  // Default: 4 warps × 16 keys, dQ 4 warps × 32 rows, the fastest split on an H200 (TENSOR_CORES.md,
  // Backward) for both numerics and head dims (8 × 16 keys ties at fa2 d128, loses elsewhere).
  switch (p.tiling) {
    case BwdTiling::kKeys128Rows128:
    case BwdTiling::kKeys128Rows64: launch_dkdv<kD, Spec, 8, 1>(p, stream); break;
    case BwdTiling::kKeys64Rows128Ilp: launch_dkdv<kD, Spec, 4, 2>(p, stream); break;
    default: launch_dkdv<kD, Spec, 4, kD == 64 ? 2 : 1>(p, stream);
  }
  if (p.tiling == BwdTiling::kKeys64Rows64 || p.tiling == BwdTiling::kKeys128Rows64) launch_dq<kD, Spec, 1>(p, stream);
  else launch_dq<kD, Spec, 2>(p, stream);
  if (p.heads_q == p.heads_kv) return;  // bwd_dkdv_kernel wrote dK, dV
  const std::size_t kv = std::size_t(p.batch) * p.heads_kv * p.n_k * kD;
  bwd_group_kernel<kD, Spec><<<unsigned((kv + 255) / 256), 256, 0, stream>>>(p);
  ATTN_CUDA_CHECK(cudaGetLastError());
}

// Long batches go in slices, as the forward's: each slice points at its share of every tensor, and all of them
// reuse the start of the dS and GQA dK/dV workspaces (stream order keeps them apart).
template <int kD, class Spec>
void launch(const BwdParams& params, cudaStream_t stream) {
  constexpr int kMaxZ = 65535;
  BwdParams p = params;
  void* own_ds = nullptr;
  if (p.ds == nullptr) {
    BwdParams one_slice = p;
    one_slice.batch = std::min(kMaxZ, p.batch);
    ATTN_CUDA_CHECK(cudaMallocFromPoolAsync(&own_ds, flash_bwd_ds_bytes(one_slice), workspace_pool(), stream));
    p.ds = static_cast<std::uint16_t*>(own_ds);
  }
  const std::size_t q_per_b = std::size_t(p.heads_q) * p.n_q * kD, kv_per_b = std::size_t(p.heads_kv) * p.n_k * kD;
  const std::size_t rows_per_b = std::size_t(p.heads_q) * p.n_q;
  for (int b0 = 0; b0 < p.batch; b0 += kMaxZ) {
    BwdParams s = p;
    s.batch = std::min(kMaxZ, p.batch - b0);
    const std::size_t b = b0;
    s.q += b * q_per_b, s.o += b * q_per_b, s.d_o += b * q_per_b, s.dq += b * q_per_b;
    s.k += b * kv_per_b, s.v += b * kv_per_b, s.dk += b * kv_per_b, s.dv += b * kv_per_b;
    s.lse += b * rows_per_b, s.delta += b * rows_per_b;
    if (s.mask) s.mask += b * rows_per_b * p.n_k;
    if (s.bias) s.bias += b * rows_per_b * p.n_k;
    launch_slice<kD, Spec>(s, stream);
  }
  if (own_ds) ATTN_CUDA_CHECK(cudaFreeAsync(own_ds, stream));
}

template <int kD>
void launch_variant(Variant v, const BwdParams& p, cudaStream_t stream) {
  switch (v) {
    // The max policy is a forward-only choice: the backward recomputes P from LSE, so fixed = base here; so is
    // fa2-psum's second row sum (O's divisor: the backward reads O only through δ, from the O it is given).
    case Variant::kFa2:
    case Variant::kFa2Fixed:
    case Variant::kFa2Psum: return launch<kD, Fa2>(p, stream);
    case Variant::kPaper:
    case Variant::kPaperFixed: return launch<kD, Paper>(p, stream);
  }
}

}  // namespace

std::size_t flash_bwd_ds_bytes(const BwdParams& p) {
  const std::size_t n_qt = (std::size_t(p.n_q) + kTile - 1) / kTile, n_kt = (std::size_t(p.n_k) + kTile - 1) / kTile;
  return std::size_t(p.batch) * p.heads_q * n_qt * n_kt * kTile * kTile * 2;
}

void launch_flash_bwd(Variant variant, int head_dim, const BwdParams& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.n_q <= 0 || p.n_k <= 0)
    throw Error("launch_flash_bwd: bad shape");
  check_heads_q(p.heads_q, "launch_flash_bwd");
  if (head_dim == 64) return launch_variant<64>(variant, p, stream);
  if (head_dim == 128) return launch_variant<128>(variant, p, stream);
  throw Error("launch_flash_bwd: head_dim " + std::to_string(head_dim) + " (kernels exist for 64 and 128)");
}

}  // namespace attncheck::cuda
