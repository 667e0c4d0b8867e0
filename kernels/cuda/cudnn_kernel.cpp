// cudnn_kernel.cpp — cuDNN's fused SDPA (cudnn_sdpa.h) as the attncheck Kernel `cuda:cudnn`, forward and
// backward, and register_cudnn_kernels(), which registers it only when a CUDA device is present and libcudnn 9
// loads (a build without cuDNN headers compiles this file to a registrar that registers nothing).
//
// Host side, as in cuda_kernels.cpp: inputs (doubles holding bf16 values) are converted to bf16 bits and
// zero-padded to head dim 64 or 128 (zeros change no dot product and give zero output columns, so results
// equal the unpadded problem's; the scale is the problem's own); outputs go to NaN-poisoned buffers with guard
// margins, checked after every call (device_buffer.h). forward_many concatenates instances of one shape along
// the batch. δ is cuDNN's own rowsum(dO∘O), which its backward graph writes to memory.
// Causal masking is bottom-right aligned, as attncheck defines it, including n_q > n_k (rows that see no key).
// An explicit keep-mask and an additive bias go in as cuDNN's bias tensor, which has the input type (bf16):
// bias value (0 without one) where kept, −inf where masked. A bias value that is not a bf16 value cannot be
// given to cuDNN exactly: such a problem is declined (attncheck::Unsupported, the check is skipped).
// Run the GPU tests: ctest -L gpu -R cudnn   (they skip without a device or without libcudnn).
#include "kernels/cuda/cudnn_kernel.h"

#if defined(ATTNCHECK_HAVE_CUDNN)
#include <algorithm>
#include <tuple>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/host_packing.h"
#include "kernels/formats.h"

namespace attncheck::cuda {
namespace {

cudnn::SdpaShape shape_of(const Problem& p, int batch) {
  cudnn::SdpaShape s;
  s.batch = batch, s.heads_q = p.heads_q, s.heads_kv = p.heads_kv, s.n_q = p.n_q, s.n_k = p.n_k;
  s.head_dim = padded_dim(p.head_dim), s.causal = p.causal, s.scale = static_cast<float>(p.scale);
  s.bias = p.has_mask || p.has_bias;
  return s;
}

// cuDNN's bias tensor for one instance ([batch][heads_q][n_q][n_k] bf16 bits) at dst: bias + (−inf if masked).
void pack_bias(const Instance& in, std::uint16_t* dst) {
  const Problem& p = in.problem;
  constexpr std::uint16_t kNegInf = 0xff80;  // bf16 −inf
  for (std::size_t e = 0; e < p.scores_size(); ++e) {
    if (p.has_mask && !in.mask[e]) {
      dst[e] = kNegInf;
      continue;
    }
    const double b = p.has_bias ? in.bias[e] : 0.0;
    const float f = static_cast<float>(b);
    if ((float_to_bits(f) & 0xffffu) != 0 || static_cast<double>(f) != b)
      throw Unsupported("cuda:cudnn: bias value " + std::to_string(b) +
                        " is not a bf16 value (cuDNN's bias tensor has the input type)");
    dst[e] = static_cast<std::uint16_t>(float_to_bits(f) >> 16);
  }
}

class CudnnKernel final : public Kernel {
 public:
  std::string name() const override { return "cuda:cudnn"; }
  std::string summary() const override {
    return "cuDNN " + std::to_string(cudnn::version()) +
           " fused flash attention (backend graph API, kernels/cuda/cudnn_sdpa.cpp): the vendor anchor";
  }
  KernelCaps caps() const override {
    KernelCaps c;
    c.backward = true;
    c.causal = true;
    c.mask = true;  // through the bias tensor (−inf)
    c.bias = true;  // bf16 values only (others are declined at run time)
    c.gqa = true;
    c.device = "cuda:0";
    c.max_head_dim = 128;  // head dims up to 128 run zero-padded as d = 64 or d = 128
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return std::move(forward_many({&in})[0]); }
  std::vector<ForwardOutput> forward_many(const std::vector<const Instance*>& ins) const override;
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override;

 private:
  void check_supported(const Instance& in, bool need_backward) const {
    check_instance("cuda:cudnn", caps(), in, need_backward);
  }
};

std::vector<ForwardOutput> CudnnKernel::forward_many(const std::vector<const Instance*>& ins) const {
  std::vector<ForwardOutput> out(ins.size());
  for (const Instance* in : ins) check_supported(*in, false);
  // Each group (everything the launch depends on but the batch) is one batch-concatenated launch.
  const std::vector<BatchGroup> groups = group_for_launch(ins, [](const Problem& p) {
    return std::make_tuple(p.heads_q, p.heads_kv, p.n_q, p.n_k, p.head_dim, p.scale, p.causal,
                           p.has_mask || p.has_bias);
  });
  for (const BatchGroup& group : groups) {
    const std::vector<std::size_t>& idx = group.members;
    const std::vector<std::size_t>& batch_at = group.batch_at;
    const Problem& p0 = ins[idx[0]]->problem;
    const int d = p0.head_dim, kd = padded_dim(d);
    const std::size_t total = group.total_batch();
    const std::size_t q_per_b = std::size_t(p0.heads_q) * p0.n_q, kv_per_b = std::size_t(p0.heads_kv) * p0.n_k;
    const cudnn::SdpaShape shape = shape_of(p0, static_cast<int>(total));  // fits: group_for_launch checked
    const std::size_t bias_per_b = shape.bias ? q_per_b * p0.n_k : 0;
    std::vector<std::uint16_t> hq(total * q_per_b * kd), hk(total * kv_per_b * kd), hv(total * kv_per_b * kd),
        hb(total * bias_per_b);
    for (std::size_t g = 0; g < idx.size(); ++g) {
      const Instance& in = *ins[idx[g]];
      pack_rows(in.q, d, kd, &hq[batch_at[g] * q_per_b * kd], "cuda:cudnn", "Q");
      pack_rows(in.k, d, kd, &hk[batch_at[g] * kv_per_b * kd], "cuda:cudnn", "K");
      pack_rows(in.v, d, kd, &hv[batch_at[g] * kv_per_b * kd], "cuda:cudnn", "V");
      if (shape.bias) pack_bias(in, &hb[batch_at[g] * bias_per_b]);
    }
    DeviceBuffer<std::uint16_t> dq(hq.size()), dk(hk.size()), dv(hv.size()), db(hb.size());
    dq.upload(hq), dk.upload(hk), dv.upload(hv), db.upload(hb);
    PoisonedOutput<std::uint16_t> o(hq.size(), "cuda:cudnn forward O");
    PoisonedOutput<float> lse(total * q_per_b, "cuda:cudnn forward LSE");
    cudnn::sdpa_forward(shape, dq.get(), dk.get(), dv.get(), shape.bias ? db.get() : nullptr, o.get(), lse.get(),
                        nullptr);
    ATTN_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<std::uint16_t> ho = o.fetch_checked();
    const std::vector<float> hl = lse.fetch_checked();
    for (std::size_t g = 0; g < idx.size(); ++g) {
      ForwardOutput& r = out[idx[g]];
      const std::size_t nb = ins[idx[g]]->problem.batch;
      unpack_rows(&ho[batch_at[g] * q_per_b * kd], nb * q_per_b, d, kd, r.o);
      r.lse.assign(hl.begin() + batch_at[g] * q_per_b, hl.begin() + (batch_at[g] + nb) * q_per_b);
    }
  }
  return out;
}

BackwardOutput CudnnKernel::backward(const Instance& in, const ForwardOutput& fwd) const {
  check_supported(in, true);
  const Problem& p = in.problem;
  if (in.d_o.size() != p.q_size()) throw Error("kernel cuda:cudnn: backward needs dO of the Q size");
  if (fwd.o.size() != p.q_size() || fwd.lse.size() != p.rows())
    throw Error("kernel cuda:cudnn: forward outputs do not match " + p.describe());
  const int d = p.head_dim, kd = padded_dim(d);
  const std::size_t q_rows = p.rows(), kv_rows = std::size_t(p.batch) * p.heads_kv * p.n_k;
  std::vector<std::uint16_t> hq(q_rows * kd), hk(kv_rows * kd), hv(kv_rows * kd), ho(q_rows * kd), hdo(q_rows * kd);
  pack_rows(in.q, d, kd, hq.data(), "cuda:cudnn", "Q");
  pack_rows(in.k, d, kd, hk.data(), "cuda:cudnn", "K");
  pack_rows(in.v, d, kd, hv.data(), "cuda:cudnn", "V");
  pack_rows(fwd.o, d, kd, ho.data(), "cuda:cudnn", "O");
  pack_rows(in.d_o, d, kd, hdo.data(), "cuda:cudnn", "dO");
  const std::vector<float> hl(fwd.lse.begin(), fwd.lse.end());
  const cudnn::SdpaShape shape = shape_of(p, p.batch);
  std::vector<std::uint16_t> hb(shape.bias ? p.scores_size() : 0);
  if (shape.bias) pack_bias(in, hb.data());
  DeviceBuffer<std::uint16_t> bq(hq.size()), bk(hk.size()), bv(hv.size()), bo(ho.size()), bdo(hdo.size()),
      bb(hb.size());
  DeviceBuffer<float> bl(hl.size());
  bq.upload(hq), bk.upload(hk), bv.upload(hv), bo.upload(ho), bdo.upload(hdo), bl.upload(hl), bb.upload(hb);
  PoisonedGradients out(q_rows, kv_rows, kd, "cuda:cudnn");
  cudnn::sdpa_backward(shape, bq.get(), bk.get(), bv.get(), shape.bias ? bb.get() : nullptr, bo.get(), bdo.get(),
                       bl.get(), out.dq.get(), out.dk.get(), out.dv.get(), out.delta.get(), nullptr);
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  return out.fetch(d);
}

}  // namespace

std::unique_ptr<Kernel> make_cudnn_kernel() { return std::make_unique<CudnnKernel>(); }

}  // namespace attncheck::cuda

namespace attncheck {

int register_cudnn_kernels(Registry& r) {
  // Only that the library loads: the handle (and with it a CUDA context) waits for the first call.
  if (cuda_device_count() == 0) return 0;  // register_cuda_kernels noted why
  if (std::string why; !cuda::cudnn::loadable(&why)) {
    r.note_absent("cuda:cudnn", why);
    return 0;
  }
  r.add(cuda::make_cudnn_kernel());
  return 1;
}

}  // namespace attncheck

#else  // built without cuDNN's headers (CMake said so at configure time)

namespace attncheck {
namespace cuda {
std::unique_ptr<Kernel> make_cudnn_kernel() { return nullptr; }
}  // namespace cuda
int register_cudnn_kernels(Registry& r) {
  r.note_absent("cuda:cudnn", "this build has no cuDNN (CMake found no cudnn.h)");
  return 0;
}
}  // namespace attncheck

#endif
