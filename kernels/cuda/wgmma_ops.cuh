// wgmma_ops.cuh — the warpgroup matrix instructions of sm_90a (wgmma.mma_async) for the forward's wgmma splits.
//
// A warpgroup is 4 consecutive warps (128 threads); every wgmma here is issued by all of them together and runs
// asynchronously: fence (registers written since are visible to it), issue, commit, wait. Shapes: m64nNk16,
// bf16 inputs, fp32 accumulators; D += A·B (or D = A·B when `accumulate` is 0).
//   Accumulator layout: thread (warp w of the group, g = lane/4, t = lane%4) holds d[4j + e] = D(16w + g + 8(e/2),
//   8j + 2t + e%2): per 8-column slice j exactly mma.sync's C fragment, so the mma.sync code's arrays carry over.
//   A from registers (the _rs forms): mma.sync's A fragment of the warp's 16 rows.
//   A and B from shared memory (descriptors): 128-byte swizzle. A "K-major" operand (Q, K: rows × d) is stored as
//   [d / 64][rows][64] with the 16-byte chunk c of row r at chunk c ^ (r % 8) (sw128_offset), 1024-byte aligned;
//   stride between 8-row groups (SBO) 1024 bytes; k step kk starts at (kk / 4)·rows·128 + (kk % 4)·32 bytes.
//   An "MN-major" B (V: keys × d, read as B(k = key, n = d)) uses the same storage; LBO = keys·128 bytes (next 64
//   d columns), SBO = 1024 (next 8 keys); k step ks (16 keys) starts at ks·16·128 bytes; transpose flag 1.
// Bitwise, a chain of wgmma k16 steps equals the same chain of mma.sync m16n8k16 steps (probed on the H200 over
// wide exponent ranges and nonzero C, every value equal: ctest WgmmaProbe in mma_probe_test; TENSOR_CORES.md),
// so the CPU twin (cuda_twin.h) holds for the wgmma splits unchanged. Compiled only for sm_90a
// (__CUDA_ARCH_FEAT_SM90_ALL); elsewhere the calls trap, and the host never selects a wgmma split (ATTNCHECK_WGMMA
// unset).
#pragma once

#include <cstdint>

#include "kernels/cuda/wgmma_desc.h"

namespace attncheck::cuda {

// Element offset of (r, col) in a rows × kD bf16 tile stored for wgmma (see above).
__host__ __device__ constexpr int sw128_offset(int r, int col, int rows) {
  return (col / 64) * rows * 64 + r * 64 + ((((col % 64) / 8) ^ (r % 8)) * 8) + col % 8;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared-memory writes by threads (cp.async included) become visible to wgmma's reads (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// mbarriers (shared memory, 8 bytes each) for the K/V stage ring of the pipelined splits. A phase completes after
// `count` arrivals; waiting on parity P returns once the phase of that parity has completed.
__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives once every cp.async this thread issued so far has landed (the count was set for one arrival per thread).
__device__ __forceinline__ void mbar_arrive_cp_async(std::uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
#else
__device__ __forceinline__ void mbar_init(std::uint32_t, int) { __trap(); }
__device__ __forceinline__ void mbar_arrive(std::uint32_t) { __trap(); }
__device__ __forceinline__ void mbar_arrive_cp_async(std::uint32_t) { __trap(); }
__device__ __forceinline__ void mbar_wait(std::uint32_t, std::uint32_t) { __trap(); }
__device__ __forceinline__ void wgmma_fence() { __trap(); }
__device__ __forceinline__ void wgmma_commit() { __trap(); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { __trap(); }
__device__ __forceinline__ void fence_proxy_async() { __trap(); }
#endif

__device__ __forceinline__ void wgmma_ss_m64n64k16(float (&d)[32], std::uint64_t desc_a, std::uint64_t desc_b,
                                                    int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// d may be longer than the 32 accumulators (step 5's buffer, sized for N = 72): only d[0..31] are used.
template <int kSize>
__device__ __forceinline__ void wgmma_rs_m64n64k16(float (&d)[kSize], const std::uint32_t (&a)[4],
                                                    std::uint64_t desc_b, int accumulate) {
  static_assert(kSize >= 32, "m64n64: 32 accumulators per thread");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_rs_m64n72k16(float (&d)[36], const std::uint32_t (&a)[4],
                                                    std::uint64_t desc_b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35"
      "}, {%36,%37,%38,%39}, %40, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#else
  __trap();
#endif
}

// Step 1's chain for one warpgroup: d (64 rows × 64 keys) = Q·Kᵀ over kSteps k16 steps in order, plus d itself when
// kKeepC (else from zero). q_base: the warpgroup's first row in a [kSteps / 4][q_rows][64] Q tile; k_base: a
// [kSteps / 4][64][64] K tile (both K-major, sw128_offset). Issued and committed, not waited for.
template <int kSteps, bool kKeepC>
__device__ __forceinline__ void wgmma_qk(float (&d)[32], std::uint32_t q_base, int q_rows, std::uint32_t k_base) {
  const std::uint64_t qd = wgmma_desc(q_base, 16, 1024), kd = wgmma_desc(k_base, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const std::uint32_t a = (kk / 4) * q_rows * 128 + (kk % 4) * 32;  // bytes on from q_base
    const std::uint32_t b = (kk / 4) * 64 * 128 + (kk % 4) * 32;      // and from k_base
    wgmma_ss_m64n64k16(d, wgmma_desc_at(qd, a), wgmma_desc_at(kd, b), kKeepC || kk > 0);
  }
  wgmma_commit();
}

// Step 5's chain for output columns 64·h .. 64·h + 63: d = P·V over 64 keys (4 k16 steps in order), plus d itself
// when kKeepC. p: the warp's A fragments of P per k16 step; v_base: a [d / 64][64 keys][64] V tile (MN-major).
// kN = 64: d[0..31] only (d may be longer). kN = 72 (fa2-psum): B's columns 64..71 are read from `past` through the
// descriptor's LBO (the offset to B's next 64 columns), with `past` 8 KiB of bf16 1.0, so d[32] (= d[33]) is row
// g's Σ_j p̄_j·1 of the p̄ step 5 multiplies and d[34] row g + 8's, chained as every column of D is (each its own
// dot product: the same bits as a separate m64n8k16 chain against ones, which this replaced in session 48, and as
// the CPU twin's mma_dot with a column of ones). Every address the ones' columns reach (16 keys × 128 bytes past
// `past` + 2048·js at k step js) holds a one, whatever the swizzle. For kN = 64 `past` is not read (the LBO is then
// V's own, the next 64 columns). Issued and committed, not waited for.
template <bool kKeepC, int kN = 64, int kSize>
__device__ __forceinline__ void wgmma_pv_half(float (&d)[kSize], const std::uint32_t (&p)[4][4],
                                              std::uint32_t v_base, int h, std::uint32_t past = 0) {
  static_assert((kN == 64 || kN == 72) && kSize >= kN / 2, "step 5's halves: N = 64, or 72 with the row sum");
  const std::uint32_t v = v_base + h * 64 * 128;
  const std::uint64_t vd = wgmma_desc(v, kN == 72 ? past - v : 64 * 128, 1024);  // (past lies beyond V: LBO > 0)
  wgmma_fence();
#pragma unroll
  for (int js = 0; js < 4; ++js) {
    const std::uint64_t b = wgmma_desc_at(vd, js * 16 * 128);
    if constexpr (kN == 72)
      wgmma_rs_m64n72k16(d, p[js], b, kKeepC || js > 0);
    else
      wgmma_rs_m64n64k16(d, p[js], b, kKeepC || js > 0);
  }
  wgmma_commit();
}

}  // namespace attncheck::cuda
