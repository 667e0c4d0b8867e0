// wgmma_desc.h — shared-memory matrix descriptors of sm_90a's wgmma (wgmma_ops.cuh), host and device: the host
// tests check that moving a descriptor on (wgmma_desc_at) gives the bits of one built for the new address
// (cuda_spec_test, label unit).
#pragma once

#include <cstdint>

#include "kernels/formats.h"

namespace attncheck::cuda {

// Shared-memory matrix descriptor, 128-byte swizzle; addresses and offsets in bytes.
ATTN_HD_ALWAYS_INLINE std::uint64_t wgmma_desc(std::uint32_t smem_byte_addr, std::uint32_t lbo,
                                             std::uint32_t sbo) {
  return std::uint64_t((smem_byte_addr >> 4) & 0x3fff) | (std::uint64_t((lbo >> 4) & 0x3fff) << 16) |
         (std::uint64_t((sbo >> 4) & 0x3fff) << 32) | (std::uint64_t(1) << 62);
}
// desc's matrix moved byte_offset bytes on (a multiple of 16): the same bits as wgmma_desc(addr + byte_offset, ...),
// one add instead of the whole descriptor built again per k step (that was ~6 uniform instructions per wgmma in the
// SASS, ~100 M of fa2's 887 M at d128 seq 4096 by the profile's counts; session 46). No carry leaves the 14-bit address
// field: shared memory ends below 2^18 bytes (228 KiB on sm_90), so (addr + offset) >> 4 stays under 2^14.
ATTN_HD_ALWAYS_INLINE std::uint64_t wgmma_desc_at(std::uint64_t desc, std::uint32_t byte_offset) {
  return desc + (byte_offset >> 4);
}

}  // namespace attncheck::cuda
