// cuda_kernels.cpp — the CUDA kernels as attncheck Kernels (harness/kernel.h): cuda:fa2, cuda:fa2-fixed,
// cuda:paper, cuda:paper-fixed (fixed ones also parameterised: "cuda:fa2-fixed[beta=4,tol=0.002]"), and
// register_cuda_kernels(), which registers nothing without a CUDA device this build can run on.
//
// Host side of every call: inputs (doubles holding bf16 values) are converted to bf16 bits and zero-padded to
// the kernel's head dim (64 or 128; zeros change no sum, so results equal the unpadded problem's); outputs go
// to NaN-poisoned buffers with guard margins that are checked after every launch (device_buffer.h).
// forward_many concatenates instances of one shape along the batch dimension: one launch per shape.
// Run the GPU tests: ctest -L gpu (they skip without a device).
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "harness/kernel.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_twin.h"
#include "kernels/cuda/cudnn_kernel.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flash_bwd.h"
#include "kernels/cuda/flash_fwd.h"
#include "kernels/cuda/host_packing.h"

namespace attncheck {
namespace cuda {
namespace {

// forward_many's buffers, kept between calls (fuzzing calls it thousands of times): page-locked staging on the
// host, device inputs, poisoned outputs re-armed before every launch, one stream. Grown to the largest batch seen.
struct FwdWorkspace {
  explicit FwdWorkspace(const std::string& name) : o(name + " forward O"), lse(name + " forward LSE") {
    ATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~FwdWorkspace() { cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
  PinnedHost<std::uint16_t> hq, hk, hv, ho;
  PinnedHost<std::uint8_t> hmask;
  PinnedHost<float> hl, hbias;
  DeviceBuffer<std::uint16_t> dq, dk, dv;
  DeviceBuffer<std::uint8_t> dmask;
  DeviceBuffer<float> dbias;
  PoisonedOutput<std::uint16_t> o;
  PoisonedOutput<float> lse;
};

float scale_log2e_of(float scale) { return static_cast<float>(static_cast<double>(scale) * 1.4426950408889634); }

class CudaFlashKernel final : public Kernel {
 public:
  CudaFlashKernel(Variant v, float beta, float tol) : v_(v), beta_(beta), tol_(tol) {
    name_ = std::string("cuda:") + variant_name(v);
    if (variant_is_fixed(v) && (beta != 2.0f || tol != 1e-3f)) {
      name_ += "[";
      if (beta != 2.0f) name_ += "beta=" + fmt_num(beta);
      if (tol != 1e-3f) name_ += std::string(beta != 2.0f ? "," : "") + "tol=" + fmt_num(tol);
      name_ += "]";
    }
  }
  std::string name() const override { return name_; }
  std::string summary() const override {
    return std::string("CUDA flash attention (wgmma forward on sm_90a, mma.sync otherwise) with ") + variant_name(v_) +
           " numerics (kernels/cuda/flash_fwd.cu, flash_bwd.cu)";
  }
  KernelCaps caps() const override {
    KernelCaps c;
    c.backward = true;
    c.causal = true;
    c.gqa = true;
    c.mask = true;
    c.bias = true;
    c.device = "cuda:0";
    c.max_head_dim = 128;  // head dims up to 128 run zero-padded in the d = 64 or d = 128 kernel
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return std::move(forward_many({&in})[0]); }
  std::vector<ForwardOutput> forward_many(const std::vector<const Instance*>& ins) const override;
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override;
  CpuTwin cpu_twin() const override {
    return {make_twin_kernel(v_, beta_, tol_, name_), variant_spec(v_, beta_, tol_)};
  }

 private:
  // fmt's "{}": the fewest digits that read back as x, as the CPU models' names (%g's six named beta=2.0000002
  // "beta=2", another kernel on replay).
  static std::string fmt_num(float x) { return fmt::format("{}", x); }
  void check_supported(const Instance& in, bool need_backward) const {
    check_instance(name_, caps(), in, need_backward);
    // The launches' own check (flash_fwd.h), here too: forward_many makes its stream before it launches.
    check_heads_q(in.problem.heads_q, "kernel " + name_ + " cannot run " + in.problem.describe());
  }
  FwdParams base_params(const Problem& p) const {
    FwdParams f;
    f.heads_q = p.heads_q, f.heads_kv = p.heads_kv, f.n_q = p.n_q, f.n_k = p.n_k;
    f.scale = static_cast<float>(p.scale);
    f.scale_log2e = scale_log2e_of(f.scale);
    f.causal = p.causal;
    f.beta = beta_, f.tolerance = tol_;
    return f;
  }
  Variant v_;
  float beta_, tol_;
  std::string name_;
  mutable std::mutex ws_mu_;                  // one forward_many at a time per kernel object
  mutable std::unique_ptr<FwdWorkspace> ws_;  // made on first use
};

std::vector<ForwardOutput> CudaFlashKernel::forward_many(const std::vector<const Instance*>& ins) const {
  std::vector<ForwardOutput> out(ins.size());
  for (const Instance* in : ins) check_supported(*in, false);
  // Each group (everything the launch depends on but the batch) is one batch-concatenated launch.
  const std::vector<BatchGroup> groups = group_for_launch(ins, [](const Problem& p) {
    return std::make_tuple(p.heads_q, p.heads_kv, p.n_q, p.n_k, p.head_dim, p.scale, p.causal, p.has_mask,
                           p.has_bias);
  });
  // One call at a time per kernel object: the workspace is shared (results never depend on it).
  std::lock_guard<std::mutex> lock(ws_mu_);
  if (!ws_) ws_ = std::make_unique<FwdWorkspace>(name_);
  FwdWorkspace& w = *ws_;
  for (const BatchGroup& group : groups) {
    const std::vector<std::size_t>& idx = group.members;
    const std::vector<std::size_t>& batch_at = group.batch_at;
    const Problem& p0 = ins[idx[0]]->problem;
    const int d = p0.head_dim, kd = padded_dim(d);
    const std::size_t total_batch = group.total_batch();
    const std::size_t q_per_b = std::size_t(p0.heads_q) * p0.n_q, kv_per_b = std::size_t(p0.heads_kv) * p0.n_k;
    const std::size_t q_elems = total_batch * q_per_b * kd, kv_elems = total_batch * kv_per_b * kd;
    std::uint16_t* hq = w.hq.ensure(q_elems);
    std::uint16_t* hk = w.hk.ensure(kv_elems);
    std::uint16_t* hv = w.hv.ensure(kv_elems);
    parallel_for(idx.size(), [&](std::size_t g) {
      const Instance& in = *ins[idx[g]];
      pack_rows(in.q, d, kd, hq + batch_at[g] * q_per_b * kd, name_.c_str(), "Q");
      pack_rows(in.k, d, kd, hk + batch_at[g] * kv_per_b * kd, name_.c_str(), "K");
      pack_rows(in.v, d, kd, hv + batch_at[g] * kv_per_b * kd, name_.c_str(), "V");
    });
    // Keep-mask and bias: one value per score, [batch][heads_q][n_q][n_k].
    const std::size_t scores_per_b = q_per_b * p0.n_k, mask_elems = p0.has_mask ? total_batch * scores_per_b : 0;
    std::uint8_t* hm = p0.has_mask ? w.hmask.ensure(mask_elems) : nullptr;
    if (p0.has_mask) {
      for (std::size_t g = 0; g < idx.size(); ++g)
        std::copy(ins[idx[g]]->mask.begin(), ins[idx[g]]->mask.end(), hm + batch_at[g] * scores_per_b);
      w.dmask.ensure(mask_elems);
    }
    const std::size_t bias_elems = p0.has_bias ? total_batch * scores_per_b : 0;
    float* hb = p0.has_bias ? w.hbias.ensure(bias_elems) : nullptr;
    if (p0.has_bias) {
      parallel_for(idx.size(), [&](std::size_t g) {
        const std::vector<double>& bias = ins[idx[g]]->bias;
        for (std::size_t e = 0; e < bias.size(); ++e) hb[batch_at[g] * scores_per_b + e] = static_cast<float>(bias[e]);
      });
      w.dbias.ensure(bias_elems);
    }
    w.dq.ensure(q_elems), w.dk.ensure(kv_elems), w.dv.ensure(kv_elems);
    const cudaStream_t stream = w.stream;
    ATTN_CUDA_CHECK(cudaMemcpyAsync(w.dq.get(), hq, q_elems * 2, cudaMemcpyHostToDevice, stream));
    ATTN_CUDA_CHECK(cudaMemcpyAsync(w.dk.get(), hk, kv_elems * 2, cudaMemcpyHostToDevice, stream));
    ATTN_CUDA_CHECK(cudaMemcpyAsync(w.dv.get(), hv, kv_elems * 2, cudaMemcpyHostToDevice, stream));
    if (p0.has_mask)
      ATTN_CUDA_CHECK(cudaMemcpyAsync(w.dmask.get(), hm, mask_elems, cudaMemcpyHostToDevice, stream));
    if (p0.has_bias)
      ATTN_CUDA_CHECK(cudaMemcpyAsync(w.dbias.get(), hb, bias_elems * 4, cudaMemcpyHostToDevice, stream));
    w.o.arm(q_elems, stream);
    w.lse.arm(total_batch * q_per_b, stream);
    FwdParams f = base_params(p0);
    f.q = w.dq.get(), f.k = w.dk.get(), f.v = w.dv.get(), f.o = w.o.get(), f.lse = w.lse.get();
    f.batch = static_cast<int>(total_batch);  // fits: group_for_launch refuses a group past INT_MAX
    f.mask = p0.has_mask ? w.dmask.get() : nullptr;
    f.bias = p0.has_bias ? w.dbias.get() : nullptr;
    launch_flash_fwd(v_, kd, f, stream);
    // Guards checked here; O's payload poison during the unpack (one parallel pass instead of two).
    const std::uint16_t* ho = w.o.fetch_checked(w.ho, stream, /*check_payload=*/false);
    const float* hl = w.lse.fetch_checked(w.hl, stream);
    std::vector<char> untouched(idx.size(), 0);
    parallel_for(idx.size(), [&](std::size_t g) {
      ForwardOutput& r = out[idx[g]];
      const std::size_t nb = ins[idx[g]]->problem.batch;
      bool poisoned = false;
      unpack_rows(ho + batch_at[g] * q_per_b * kd, nb * q_per_b, d, kd, r.o, &poisoned);
      untouched[g] = poisoned;
      r.lse.assign(hl + batch_at[g] * q_per_b, hl + (batch_at[g] + nb) * q_per_b);
    });
    for (std::size_t g = 0; g < idx.size(); ++g)
      if (untouched[g])
        throw Error(name_ + " forward O: kernel left elements of batch instance " + std::to_string(g) +
                    " untouched (still the NaN poison)");
  }
  return out;
}

BackwardOutput CudaFlashKernel::backward(const Instance& in, const ForwardOutput& fwd) const {
  check_supported(in, true);
  const Problem& p = in.problem;
  if (in.d_o.size() != p.q_size()) throw Error("kernel " + name_ + ": backward needs dO of the Q size");
  if (fwd.o.size() != p.q_size() || fwd.lse.size() != p.rows())
    throw Error("kernel " + name_ + ": forward outputs do not match " + p.describe());
  const int d = p.head_dim, kd = padded_dim(d);
  const std::size_t q_rows = p.rows(), kv_rows = std::size_t(p.batch) * p.heads_kv * p.n_k;
  std::vector<std::uint16_t> hq(q_rows * kd), hk(kv_rows * kd), hv(kv_rows * kd), ho(q_rows * kd), hdo(q_rows * kd);
  pack_rows(in.q, d, kd, hq.data(), name_.c_str(), "Q");
  pack_rows(in.k, d, kd, hk.data(), name_.c_str(), "K");
  pack_rows(in.v, d, kd, hv.data(), name_.c_str(), "V");
  pack_rows(fwd.o, d, kd, ho.data(), name_.c_str(), "O");
  pack_rows(in.d_o, d, kd, hdo.data(), name_.c_str(), "dO");
  std::vector<float> hl(fwd.lse.begin(), fwd.lse.end());
  DeviceBuffer<std::uint16_t> dq_in(hq.size()), dk_in(hk.size()), dv_in(hv.size()), do_in(ho.size()),
      ddo_in(hdo.size());
  DeviceBuffer<float> dlse(hl.size());
  dq_in.upload(hq), dk_in.upload(hk), dv_in.upload(hv), do_in.upload(ho), ddo_in.upload(hdo), dlse.upload(hl);
  DeviceBuffer<std::uint8_t> dmask(p.has_mask ? p.scores_size() : 0);
  if (p.has_mask) dmask.upload(in.mask);
  DeviceBuffer<float> dbias(p.has_bias ? p.scores_size() : 0);
  if (p.has_bias) dbias.upload(std::vector<float>(in.bias.begin(), in.bias.end()));
  PoisonedGradients out(q_rows, kv_rows, kd, name_);
  // Per-query-head dK, dV for the GQA group sum; without GQA the dK/dV kernel writes dK, dV itself and never
  // touches these (flash_bwd.cu: `direct`), so they stay unallocated (null).
  const std::size_t head_ws = p.heads_q != p.heads_kv ? std::size_t(p.batch) * p.heads_q * p.n_k * kd : 0;
  DeviceBuffer<std::uint16_t> dk_head(head_ws), dv_head(head_ws);
  BwdParams b;
  b.q = dq_in.get(), b.k = dk_in.get(), b.v = dv_in.get(), b.o = do_in.get(), b.d_o = ddo_in.get();
  b.lse = dlse.get(), b.delta = out.delta.get(), b.dq = out.dq.get(), b.dk = out.dk.get(), b.dv = out.dv.get();
  b.dk_head = dk_head.get(), b.dv_head = dv_head.get();
  b.batch = p.batch, b.heads_q = p.heads_q, b.heads_kv = p.heads_kv, b.n_q = p.n_q, b.n_k = p.n_k;
  b.scale = static_cast<float>(p.scale), b.scale_log2e = scale_log2e_of(b.scale), b.causal = p.causal;
  b.mask = p.has_mask ? dmask.get() : nullptr;
  b.bias = p.has_bias ? dbias.get() : nullptr;
  launch_flash_bwd(v_, kd, b, nullptr);
  ATTN_CUDA_CHECK(cudaDeviceSynchronize());
  return out.fetch(d);
}

}  // namespace

std::unique_ptr<Kernel> make_cuda_kernel(Variant v, float beta, float tol) {
  return std::make_unique<CudaFlashKernel>(v, beta, tol);
}

}  // namespace cuda

namespace {

// β and tol of a fixed variant's parameters ("cuda:fa2-fixed[beta=4,tol=0.002]"); Error names the kernel.
std::pair<float, float> fixed_params(cuda::Variant v, const KernelParams& params, const std::string& prefix) {
  float beta = 2.0f, tol = 1e-3f;
  const Format max_fmt = cuda::variant_spec(v, beta, tol).max_fmt;  // where the shifted maximum is rounded
  for (const auto& [key, value] : params) {
    if (key == "beta") beta = fixed_policy_param(prefix + cuda::variant_name(v), key, value, max_fmt);
    else if (key == "tol") tol = fixed_policy_param(prefix + cuda::variant_name(v), key, value, max_fmt);
    else throw Error(prefix + cuda::variant_name(v) + ": unknown parameter '" + key + "' (known: beta, tol)");
  }
  return {beta, tol};
}

}  // namespace

int register_cuda_kernels(Registry& r) {
  using cuda::Variant;
  constexpr Variant kAll[] = {Variant::kFa2, Variant::kFa2Fixed, Variant::kPaper, Variant::kPaperFixed,
                              Variant::kFa2Psum};
  constexpr Variant kFixed[] = {Variant::kFa2Fixed, Variant::kPaperFixed};
  // The CPU twins (cuda_twin.h: each kernel's operations in its order; 99.99% of O bit for bit on the GPU tests),
  // with or without a device: a GPU finding replays on its twin where there is no GPU (`replay --kernel
  // twin:cuda:fa2-fixed`; 107 of 107 fuzz cases of session 28 with the GPU's verdict, 4 of them not on the CPU
  // models). Named "twin:" + the GPU kernel's name, parameters included (the kernel object names itself and touches
  // no device). Not in `check`'s default kernels (cmd_check.cpp takes cuda: and plugin: ones); not counted in n.
  for (Variant v : kAll) r.add(cuda::make_twin_kernel(v, 2.0f, 1e-3f, cuda::make_cuda_kernel(v, 2.0f, 1e-3f)->name()));
  for (Variant v : kFixed)
    r.add_factory(std::string("twin:cuda:") + cuda::variant_name(v), [v](const KernelParams& params) {
      const auto [beta, tol] = fixed_params(v, params, "twin:cuda:");
      return cuda::make_twin_kernel(v, beta, tol, cuda::make_cuda_kernel(v, beta, tol)->name());
    });
  if (std::string why; cuda_device_count(&why) == 0) {
    r.note_absent("cuda:", "no usable CUDA device (" + why + ")");
    return 0;
  }
  int n = 0;
  for (Variant v : kAll) {
    r.add(cuda::make_cuda_kernel(v, 2.0f, 1e-3f));
    ++n;
  }
  for (Variant v : kFixed)
    r.add_factory(std::string("cuda:") + cuda::variant_name(v), [v](const KernelParams& params) {
      const auto [beta, tol] = fixed_params(v, params, "cuda:");
      return cuda::make_cuda_kernel(v, beta, tol);
    });
  register_cudnn_kernels(r);  // cuda:cudnn, the vendor anchor, when libcudnn 9 loads (not counted in n)
  return n;
}

}  // namespace attncheck
