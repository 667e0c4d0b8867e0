// cuda_spec_test.cpp — the compile-time specs of the CUDA kernels (device_spec.h) equal builtin_spec(name) of
// the CPU models, field by field, so a change on either side fails here; and the wgmma descriptors the forward
// moves on per k step (wgmma_desc.h) are the ones built for each address. Host only (label unit).
// Run: ctest -R cuda_spec
#include <gtest/gtest.h>

#include "kernels/cuda/device_spec.h"
#include "kernels/cuda/wgmma_desc.h"
#include "kernels/numerics_spec.h"

namespace attncheck::cuda {
namespace {

template <class S>
void expect_same(const std::string& name) {
  const NumericsSpec b = builtin_spec(name);
  EXPECT_EQ(S::qk_fmt, b.qk_fmt);
  EXPECT_EQ(S::scale_in_exp, b.scale_in_exp);
  EXPECT_EQ(S::s_fmt, b.s_fmt);
  EXPECT_EQ(S::max_fmt, b.max_fmt);
  EXPECT_EQ(S::exp2_folded, b.exp_mode == ExpMode::kExp2Folded);
  EXPECT_EQ(S::p_fmt, b.p_fmt);
  EXPECT_EQ(S::pv_in_fmt, b.pv_in_fmt);
  EXPECT_EQ(S::block_sum_fmt, b.block_sum_fmt);
  EXPECT_EQ(S::block_out_fmt, b.block_out_fmt);
  EXPECT_EQ(S::rescale_fmt, b.rescale_fmt);
  EXPECT_EQ(S::acc_fmt, b.acc_fmt);
  EXPECT_EQ(S::rowsum_fmt, b.rowsum_fmt);
  EXPECT_EQ(S::reciprocal_normalise, b.reciprocal_normalise);
  EXPECT_EQ(S::out_div_fmt, b.out_div_fmt);
  EXPECT_EQ(S::out_fmt, b.out_fmt);
  EXPECT_EQ(S::lse_fmt, b.lse_fmt);
  EXPECT_EQ(S::log_l_fmt, b.log_l_fmt);
  EXPECT_EQ(S::normalise_by_pv_sum, b.normalise_by_pv_sum);
  EXPECT_EQ(S::mask_value, static_cast<float>(b.mask_value));
  EXPECT_EQ(S::block_sum_min, static_cast<float>(b.block_sum_min));
  EXPECT_EQ(S::tile_q, b.tile_q);
  EXPECT_EQ(S::tile_k, b.tile_k);
  EXPECT_EQ(S::fixed, b.max_policy.kind == MaxPolicy::kPaperShift);
  if (S::fixed) {
    EXPECT_EQ(b.max_policy.beta, 2.0);  // the CUDA kernels' default β and tolerance (runtime parameters)
    EXPECT_EQ(static_cast<float>(b.max_policy.tolerance), 1e-3f);
  }
  EXPECT_EQ(S::delta_prod_fmt, b.delta_prod_fmt);
  EXPECT_EQ(S::delta_fmt, b.delta_fmt);
  EXPECT_EQ(S::bwd_p_fmt, b.bwd_p_fmt);
  EXPECT_EQ(S::dp_fmt, b.dp_fmt);
  EXPECT_EQ(S::ds_term_fmt, b.ds_term_fmt);
  EXPECT_EQ(S::ds_fmt, b.ds_fmt);
  EXPECT_EQ(S::grad_partial_fmt, b.grad_partial_fmt);
  EXPECT_EQ(S::grad_acc_fmt, b.grad_acc_fmt);
  EXPECT_EQ(S::grad_out_fmt, b.grad_out_fmt);
}

TEST(CudaSpec, Fa2MatchesBuiltin) { expect_same<Fa2>("fa2"); }
TEST(CudaSpec, Fa2FixedMatchesBuiltin) { expect_same<Fa2Fixed>("fa2-fixed"); }
TEST(CudaSpec, PaperMatchesBuiltin) { expect_same<Paper>("paper"); }
TEST(CudaSpec, PaperFixedMatchesBuiltin) { expect_same<PaperFixed>("paper-fixed"); }
TEST(CudaSpec, Fa2PsumMatchesBuiltin) { expect_same<Fa2Psum>("fa2-psum"); }

// The wgmma chains build one descriptor and move it on per k16 step (wgmma_desc_at). That must be the descriptor
// wgmma_desc builds for the moved address, for every 16-byte-aligned address and offset whose sum lies in shared
// memory (below 2^18 bytes), with either layout's LBO (16: K-major Q and K; 64 keys · 128 bytes: V). Past 2^18 the
// address field carries into the bits above it (14-15, reserved): the precondition wgmma_desc.h states, shown failing.
TEST(WgmmaDesc, MovingADescriptorOnEqualsBuildingItForTheMovedAddress) {
  constexpr std::uint32_t kSmemEnd = 1u << 18;
  for (std::uint32_t lbo : {16u, 64u * 128u}) {
    std::uint64_t checked = 0, differ = 0;
    for (std::uint32_t a = 0; a < kSmemEnd; a += 16)
      for (std::uint32_t off = 0; a + off < kSmemEnd; off += 16) {
        ++checked;
        differ += wgmma_desc_at(wgmma_desc(a, lbo, 1024), off) != wgmma_desc(a + off, lbo, 1024);
      }
    EXPECT_EQ(checked, (kSmemEnd / 16) * (kSmemEnd / 16 + 1) / 2);
    EXPECT_EQ(differ, 0u) << "lbo " << lbo;
    EXPECT_NE(wgmma_desc_at(wgmma_desc(kSmemEnd - 16, lbo, 1024), 16), wgmma_desc(kSmemEnd, lbo, 1024));
  }
}

}  // namespace
}  // namespace attncheck::cuda
