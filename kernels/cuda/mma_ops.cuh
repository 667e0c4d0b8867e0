// mma_ops.cuh — the few PTX instructions the CUDA kernels are built from (sm_80+; built for sm_90).
//
//   mma_bf16_16816: D(16x8, fp32) = A(16x16, bf16, row) · B(16x8, bf16, col) + C, one warp
//     (mma_bf16_16816_n16: two of them in place, for the 16 columns of one ldmatrix.x4 B fragment).
//     Fragment layout (g = lane/4, t = lane%4): A regs a0 (row g, k 2t..2t+1), a1 (row g+8, k 2t..),
//     a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..); B regs b0 (k 2t..2t+1, col g), b1 (k 2t+8.., col g);
//     C/D c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, cols 2t, 2t+1).
//   ldsm_x4_at / ldsm_x4_t_at: four 8x8 bf16 matrices from shared memory (ldmatrix), plain or transposed, at a
//     shared-space address.
//   cp_async_16: a 16-byte global->shared copy; src_bytes = 0 zero-fills (used for rows past n_q / n_k).
// How the tensor cores round inside one mma is measured by mma_probe.cu and written up in TENSOR_CORES.md.
#pragma once

#include <cstdint>

#include "kernels/formats.h"

namespace attncheck::cuda {

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                               const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
// One k16 step into two adjacent n8 tiles: c0 += a·(b0, b1), c1 += a·(b2, b3), with b the four registers one
// ldmatrix.x4 gives for 16 columns (every kernel's B fragments come that way).
__device__ __forceinline__ void mma_bf16_16816_n16(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4],
                                                   const uint32_t (&b)[4]) {
  mma_bf16_16816(c0, a, b[0], b[1], c0);
  mma_bf16_16816(c1, a, b[2], b[3], c1);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 bf16 matrices from a shared-space address (smem_addr), so constant offsets fold into the instruction.
__device__ __forceinline__ void ldsm_x4_at(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t_at(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Two floats already holding bf16 values -> one bf16x2 register (low half = first). Exact: no rounding here,
// the caller rounds with round_float(x, Format::kBF16) at the step the spec names.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);  // the top halves, one prmt
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

// Two floats rounded to bf16 (to nearest, ties to even) in one cvt, low half = lo. On every non-NaN float this is
// round_bf16 (formats.h) bit for bit, overflow to ±inf included; a NaN gives the canonical bf16 NaN 0x7fff.
__device__ __forceinline__ uint32_t cvt_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Rounds a pair to format F in place (F is fp32: nothing to do; bf16: one cvt for both).
template <Format F>
__device__ __forceinline__ void round_pair(float& a, float& b) {
  static_assert(F == Format::kF32 || F == Format::kBF16, "device formats are fp32 and bf16");
  if constexpr (F == Format::kBF16) {
    const std::uint32_t r = cvt_bf16x2(a, b);
    a = __uint_as_float(r << 16);
    b = __uint_as_float(r & 0xffff0000u);
  }
}

// min that returns NaN when either input is NaN (min.NaN): a NaN score drops out of a running max afterwards
// (fmaxf ignores it), just as `s >= thr` is false for it.
__device__ __forceinline__ float fmin_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// Top two of a multiset of floats, NaN ignored: (m1, m2) = (largest, second largest counting repeats; NaN where
// fewer than one or two elements are numbers, so that no `>= thr` holds for it). top2_pair merges two such
// summaries (a1, a2), (b1, b2) (a pair of single values is (max, min.NaN) of the two). Exact (only comparisons),
// so "at least two elements >= thr" is exactly m2 >= thr for any thr.
__device__ __forceinline__ void top2_pair(float& m1, float& m2, float a1, float a2, float b1, float b2) {
  m2 = fmaxf(fmaxf(a2, b2), fmin_nan(a1, b1));
  m1 = fmaxf(a1, b1);
}

// Two bf16 values in one register (pack_bf16's layout), for values that are bf16 already (the paper's scores):
// max2 and min2_nan act on both halves at once, with the rules of fmaxf and fmin_nan (a NaN is ignored by max and
// wins min; mma_probe_test checks the two forms agree on bf16 specials and random rows), so one tournament of
// top2_pair over packed values gives the top two of two rows.
struct Bf16x2 {
  uint32_t bits;
  __device__ float lo() const { return __uint_as_float(bits << 16); }
  __device__ float hi() const { return __uint_as_float(bits & 0xffff0000u); }
};
__device__ __forceinline__ Bf16x2 max2(Bf16x2 a, Bf16x2 b) {
  Bf16x2 r;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(r.bits) : "r"(a.bits), "r"(b.bits));
  return r;
}
__device__ __forceinline__ Bf16x2 min2_nan(Bf16x2 a, Bf16x2 b) {
  Bf16x2 r;
  asm("min.NaN.bf16x2 %0, %1, %2;\n" : "=r"(r.bits) : "r"(a.bits), "r"(b.bits));
  return r;
}
__device__ __forceinline__ void top2_pair(Bf16x2& m1, Bf16x2& m2, Bf16x2 a1, Bf16x2 a2, Bf16x2 b1, Bf16x2 b2) {
  m2 = max2(max2(a2, b2), min2_nan(a1, b1));
  m1 = max2(a1, b1);
}
__device__ __forceinline__ Bf16x2 shfl_xor(Bf16x2 x, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, x.bits, lane_mask)};
}
__device__ __forceinline__ float shfl_xor(float x, int lane_mask) { return __shfl_xor_sync(0xffffffffu, x, lane_mask); }

// The top two of kN summaries (hi[k], lo[k]) (each a pair's (max, min.NaN)) into hi[0], lo[0] (tree_top2), then
// over the four lanes of a quad (quad_top2): a tournament, shallower than a chain (the critical path is what costs).
template <class T, int kN>
__device__ __forceinline__ void tree_top2(T (&hi)[kN], T (&lo)[kN]) {
  static_assert((kN & (kN - 1)) == 0, "a power of two");
#pragma unroll
  for (int w = kN / 2; w >= 1; w /= 2)
#pragma unroll
    for (int k = 0; k < w; ++k) top2_pair(hi[k], lo[k], hi[2 * k], lo[2 * k], hi[2 * k + 1], lo[2 * k + 1]);
}
template <class T, int kN>
__device__ __forceinline__ void quad_top2(T (&hi)[kN], T (&lo)[kN]) {
  tree_top2(hi, lo);
#pragma unroll
  for (int lane_mask = 1; lane_mask <= 2; lane_mask *= 2)
    top2_pair(hi[0], lo[0], hi[0], lo[0], shfl_xor(hi[0], lane_mask), shfl_xor(lo[0], lane_mask));
}

// Keys 2t and 2t + 1 of one row as one bf16x2 (low half = key 2t). kFromCvt: the two floats were just unpacked from
// one cvt.rn.bf16x2 (round_pair: the paper's step 1 on tiles without per-element masks), and pack_bf16 written as
// shifts and masks lets the compiler give back the cvt's register (no instruction); elsewhere (masked scores) one prmt.
template <bool kFromCvt>
__device__ __forceinline__ Bf16x2 row_word(float lo, float hi) {
  if constexpr (kFromCvt) return {(__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u)};
  else return {pack_bf16(lo, hi)};
}
// Two words (x for row g, y for row g + 8) regrouped by key parity: the even keys of both rows in one word, the odd
// keys in the other (row g in the low half). Exact: only moves halves.
__device__ __forceinline__ Bf16x2 even_halves(Bf16x2 x, Bf16x2 y) { return {__byte_perm(x.bits, y.bits, 0x5410)}; }
__device__ __forceinline__ Bf16x2 odd_halves(Bf16x2 x, Bf16x2 y) { return {__byte_perm(x.bits, y.bits, 0x7632)}; }

// The fixed policy's row top-two of one m16 tile: a thread's scores s[n][0..3] (keys 2t, 2t+1 of 8-key slice n; rows
// g in [0..1], g + 8 in [2..3]) reduced over the quad into (top1, top2)[ri] of row g + 8·ri. The fp32 form runs one
// tournament per row; the bf16 form, for scores that are bf16 values already (exact in their floats), runs packed
// tournaments (two keys, then both rows, per instruction). The forward (flash_fwd.cu) and its probe (mma_probe.cu)
// both call these.
template <int kNT>
__device__ __forceinline__ void quad_top2_rows(const float (&s)[kNT][4], float (&top1)[2], float (&top2)[2]) {
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    float hi[kNT], lo[kNT];
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      hi[n] = fmaxf(s[n][2 * ri], s[n][2 * ri + 1]);
      lo[n] = fmin_nan(s[n][2 * ri], s[n][2 * ri + 1]);
    }
    quad_top2(hi, lo);
    top1[ri] = hi[0], top2[ri] = lo[0];
  }
}
// The bf16 form: per row, the thread's 8 words (row_word: keys 2t, 2t + 1 of each 8-key slice) go through one packed
// tournament, its halves the even and the odd keys; the two rows' results are then regrouped by parity (even_halves,
// odd_halves), merged, and reduced over the quad with both rows in one register. No prmt where the scores come
// straight from a cvt (row_word<true>), 4 after the tournament.
template <bool kFromCvt, int kNT>
__device__ __forceinline__ void quad_top2_rows_bf16(const float (&s)[kNT][4], float (&top1)[2], float (&top2)[2]) {
  static_assert(kNT % 2 == 0, "pairs of slices");
  Bf16x2 hi[2][kNT / 2], lo[2][kNT / 2];
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
#pragma unroll
    for (int k = 0; k < kNT / 2; ++k) {
      const Bf16x2 a = row_word<kFromCvt>(s[2 * k][2 * ri], s[2 * k][2 * ri + 1]);
      const Bf16x2 b = row_word<kFromCvt>(s[2 * k + 1][2 * ri], s[2 * k + 1][2 * ri + 1]);
      hi[ri][k] = max2(a, b), lo[ri][k] = min2_nan(a, b);
    }
    tree_top2(hi[ri], lo[ri]);
  }
  Bf16x2 h[1], l[1];
  top2_pair(h[0], l[0], even_halves(hi[0][0], hi[1][0]), even_halves(lo[0][0], lo[1][0]),
            odd_halves(hi[0][0], hi[1][0]), odd_halves(lo[0][0], lo[1][0]));
  quad_top2(h, l);
  top1[0] = h[0].lo(), top1[1] = h[0].hi();
  top2[0] = l[0].lo(), top2[1] = l[0].hi();
}

// The row max of the paper's baseline (scores bf16 already) in the same packed form: the thread's 8 words per row
// through max2, the rows regrouped by parity, then the quad. max.bf16x2 has fmaxf's rules (NaN ignored, +0 over −0;
// mma_probe_test checks it against the fp32 forms), so r is the fmaxf max bit for bit, except that a row with no
// number gives NaN (an fmaxf chain from −inf gives −inf there; flash_fwd.cu says why that is the same m_new).
template <bool kFromCvt, int kNT>
__device__ __forceinline__ void quad_max_rows_bf16(const float (&s)[kNT][4], float (&r)[2]) {
  static_assert((kNT & (kNT - 1)) == 0, "a power of two");
  Bf16x2 m[2];
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    Bf16x2 w[kNT];
#pragma unroll
    for (int n = 0; n < kNT; ++n) w[n] = row_word<kFromCvt>(s[n][2 * ri], s[n][2 * ri + 1]);
#pragma unroll
    for (int width = kNT / 2; width >= 1; width /= 2)
#pragma unroll
      for (int k = 0; k < width; ++k) w[k] = max2(w[2 * k], w[2 * k + 1]);
    m[ri] = w[0];
  }
  Bf16x2 x = max2(even_halves(m[0], m[1]), odd_halves(m[0], m[1]));
  x = max2(x, shfl_xor(x, 1));
  x = max2(x, shfl_xor(x, 2));
  r[0] = x.lo(), r[1] = x.hi();
}

// Shared-memory tile of rows x kD bf16 with 16-byte chunks XOR-swizzled by (row % 8), so the eight row
// addresses of one ldmatrix hit eight different bank groups. col must be a multiple of 8.
template <int kD>
__device__ __forceinline__ int swz(int row, int col) {
  return row * kD + ((((col >> 3) ^ (row & 7))) << 3);
}

// step 1's additive bias b (fp32) on a finished score s, as the CPU model's finish_score: the paper adds it to the
// scaled score; fa2, whose scale is folded into the exponent, adds fp32(b / scale) to the unscaled one (as FA2
// adds ALiBi). Rounded to s_fmt.
template <class Spec>
__device__ __forceinline__ float add_bias(float s, float b, float scale) {
  return round_float(__fadd_rn(s, Spec::scale_in_exp ? __fdiv_rn(b, scale) : b), Spec::s_fmt);
}

// Sum / max over the four lanes of a quad (the four threads holding one accumulator row), in a fixed
// butterfly order ((t0+t1)+(t2+t3)) so all four lanes end with the same bits.
__device__ __forceinline__ float quad_sum(float x) {
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

}  // namespace attncheck::cuda
