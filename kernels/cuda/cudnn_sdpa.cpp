// cudnn_sdpa.cpp — the two operation graphs that cuDNN 9's fused flash-attention engines match, a plan cache
// keyed by shape, and their execution (see cudnn_sdpa.h).
//
// Graph shapes (what the engines pattern-match; learnt from cuDNN's documented SDPA lowering):
//   forward:  S = Q·Kᵀ (fp32; Kᵀ a strided view [b,hkv,d,nk] of K) → ·scale (by value) → [causal mask] →
//             M = max_j S, E = exp(S − M), L = Σ_j E, stats = M + log L (fp32, non-virtual), P = E / L (bf16
//             virtual) → O = P·V (bf16).
//   bias:     S = S + bias (bf16 [b,hq,nq,nk], non-virtual) after the scale, before the causal mask.
//   causal:   row = GEN_INDEX(axis 2), col = GEN_INDEX(axis 3) (int32); bottom-right alignment adds n_k and
//             subtracts n_q from row (by-value int32 scalars); keep = row ≥ col; S = keep ? S : −inf.
//   backward: δ = Σ_c dO∘O (fp32, non-virtual: cuDNN writes it, we return it as δ); S = Q·Kᵀ·scale − stats,
//             [bias, causal mask], P = exp(S); dV = Pᵀ·dO (Pᵀ a bf16 reshape); dP = dO·Vᵀ;
//             dS = P∘(dP − δ)·scale;
//             dK = dSᵀ·Q; dQ = dS·K accumulated in an fp32 buffer (non-virtual), then cast to bf16. With GQA,
//             dK and dV are computed per query head (virtual) and summed over each group by a reduction.
// Tensor ids are fixed (kUid*); virtual intermediates get ids from 1000. Intermediates are fp32.
#include "kernels/cuda/cudnn_sdpa.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "harness/problem.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_backend.h"
#include "kernels/cuda/device_buffer.h"

namespace attncheck::cuda::cudnn {
namespace {

enum : int64_t {
  kUidQ = 1, kUidK, kUidV, kUidO, kUidStats, kUidScale, kUidDO, kUidDQ, kUidDK, kUidDV,
  kUidDelta, kUidDQAccum, kUidNegInf, kUidOne, kUidNk, kUidNq, kUidBias,
};

constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT, kBF16 = CUDNN_DATA_BFLOAT16, kI32 = CUDNN_DATA_INT32,
                          kBool = CUDNN_DATA_BOOLEAN;

struct Shape4 {  // dims and strides of a [b][h][s][d] tensor and of its transposed view
  Dims dims, strides;
};
Shape4 bhsd(int64_t b, int64_t h, int64_t s, int64_t d) { return {{b, h, s, d}, {h * s * d, s * d, d, 1}}; }
Shape4 bhds_view(int64_t b, int64_t h, int64_t s, int64_t d) { return {{b, h, d, s}, {h * s * d, s * d, 1, d}}; }

// Scores → masked scores (bottom-right causal), shared by both graphs.
cudnnBackendDescriptor_t causal_mask(GraphBuilder& g, const SdpaShape& s, cudnnBackendDescriptor_t scores,
                                     const Dims& score_dims) {
  auto row = g.virt("row_index", kI32, score_dims), col = g.virt("col_index", kI32, score_dims);
  g.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, kF32, scores, nullptr, row, nullptr, 2);
  g.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, kF32, scores, nullptr, col, nullptr, 3);
  if (s.n_q != s.n_k) {  // bottom-right: query i sees key j iff j <= i + n_k − n_q
    auto row_plus = g.virt("row+nk", kI32, score_dims), row_shift = g.virt("row+nk-nq", kI32, score_dims);
    // (axis 3 on these, as cuDNN's own lowering of the bottom-right diagonal sets it)
    g.pointwise("row_add_nk", CUDNN_POINTWISE_ADD, kI32, row, g.scalar("n_k", kUidNk, kI32), row_plus, nullptr, 3);
    g.pointwise("row_sub_nq", CUDNN_POINTWISE_SUB, kI32, row_plus, g.scalar("n_q", kUidNq, kI32), row_shift, nullptr,
                3);
    row = row_shift;
  }
  auto keep = g.virt("causal_keep", kBool, score_dims);
  g.pointwise("row_ge_col", CUDNN_POINTWISE_CMP_GE, kBool, row, col, keep);
  auto masked = g.virt("S_masked", kF32, score_dims);
  g.pointwise("causal_select", CUDNN_POINTWISE_BINARY_SELECT, kF32, scores, g.scalar("-inf", kUidNegInf, kF32),
              masked, keep);
  return masked;
}

cudnnBackendDescriptor_t add_bias(GraphBuilder& g, cudnnBackendDescriptor_t scores, const Dims& score_dims) {
  auto out = g.virt("S+bias", kF32, score_dims);
  g.pointwise("bias_add", CUDNN_POINTWISE_ADD, kF32, scores,
              g.tensor("bias", kUidBias, kBF16, score_dims, packed_strides(score_dims)), out);
  return out;
}

Plan build_forward(cudnnHandle_t handle, const SdpaShape& s) {
  const int64_t b = s.batch, h = s.heads_q, hk = s.heads_kv, nq = s.n_q, nk = s.n_k, d = s.head_dim;
  GraphBuilder g("sdpa forward " + s.describe());
  const Shape4 q = bhsd(b, h, nq, d), kt = bhds_view(b, hk, nk, d), v = bhsd(b, hk, nk, d);
  const Dims sd{b, h, nq, nk}, rd{b, h, nq, 1};
  auto tq = g.tensor("Q", kUidQ, kBF16, q.dims, q.strides);
  auto tkt = g.tensor("K^T", kUidK, kBF16, kt.dims, kt.strides);
  auto tv = g.tensor("V", kUidV, kBF16, v.dims, v.strides);
  auto to = g.tensor("O", kUidO, kBF16, q.dims, q.strides);
  auto tstats = g.tensor("stats", kUidStats, kF32, rd, packed_strides(rd));
  auto s0 = g.virt("S", kF32, sd);
  g.matmul("bmm1 Q.K^T", tq, tkt, s0);
  auto s1 = g.virt("S_scaled", kF32, sd);
  g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, kF32, s0, g.scalar("scale", kUidScale, kF32), s1);
  if (s.bias) s1 = add_bias(g, s1, sd);
  if (s.causal) s1 = causal_mask(g, s, s1, sd);
  auto m = g.virt("row_max", kF32, rd), sub = g.virt("S-max", kF32, sd), e = g.virt("exp", kF32, sd);
  auto l = g.virt("row_sum", kF32, rd), logl = g.virt("log_sum", kF32, rd), p = g.virt("P", kBF16, sd);
  g.reduction("max", CUDNN_REDUCE_TENSOR_MAX, s1, m);
  g.pointwise("sub_max", CUDNN_POINTWISE_SUB, kF32, s1, m, sub);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, kF32, sub, nullptr, e);
  g.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, e, l);
  g.pointwise("log", CUDNN_POINTWISE_LOG, kF32, l, nullptr, logl);
  g.pointwise("stats=max+log", CUDNN_POINTWISE_ADD, kF32, m, logl, tstats);
  g.pointwise("P=exp/sum", CUDNN_POINTWISE_DIV, kF32, e, l, p);
  g.matmul("bmm2 P.V", p, tv, to);
  return g.build(handle);
}

Plan build_backward(cudnnHandle_t handle, const SdpaShape& s) {
  const int64_t b = s.batch, h = s.heads_q, hk = s.heads_kv, nq = s.n_q, nk = s.n_k, d = s.head_dim;
  GraphBuilder g("sdpa backward " + s.describe());
  const Shape4 q = bhsd(b, h, nq, d), kt = bhds_view(b, hk, nk, d), kv = bhsd(b, hk, nk, d);
  const Dims sd{b, h, nq, nk}, rd{b, h, nq, 1}, sdt{b, h, nk, nq};
  const Dims sdt_strides{h * nq * nk, nq * nk, 1, nk};  // the transposed view of a packed [b,h,nq,nk]
  auto tq = g.tensor("Q", kUidQ, kBF16, q.dims, q.strides);
  auto tkt = g.tensor("K^T", kUidK, kBF16, kt.dims, kt.strides);
  auto tvt = g.tensor("V^T", kUidV, kBF16, kt.dims, kt.strides);
  auto to = g.tensor("O", kUidO, kBF16, q.dims, q.strides);
  auto tdo = g.tensor("dO", kUidDO, kBF16, q.dims, q.strides);
  auto tstats = g.tensor("stats", kUidStats, kF32, rd, packed_strides(rd));
  auto tdq = g.tensor("dQ", kUidDQ, kBF16, q.dims, q.strides);
  auto tdk = g.tensor("dK", kUidDK, kBF16, kv.dims, kv.strides);
  auto tdv = g.tensor("dV", kUidDV, kBF16, kv.dims, kv.strides);
  auto tdelta = g.tensor("delta", kUidDelta, kF32, rd, packed_strides(rd));
  auto tdq_acc = g.tensor("dQ_accum", kUidDQAccum, kF32, q.dims, q.strides);
  auto scale = g.scalar("scale", kUidScale, kF32);
  // A key-side gradient (dK, dV) = a·b per query head; with GQA the heads of a group are summed into `out`.
  auto kv_gradient = [&](const std::string& grad, const std::string& product, cudnnBackendDescriptor_t a,
                         cudnnBackendDescriptor_t bb, cudnnBackendDescriptor_t out) {
    if (h == hk) {
      g.matmul("matmul " + product, a, bb, out);
      return;
    }
    auto full = g.virt(grad + " per q head", kBF16, {b, h, nk, d});
    g.matmul("matmul " + product, a, bb, full);
    g.reduction("sum " + grad + " over group", CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  // δ = Σ_c dO·O
  auto doo = g.virt("dO*O", kF32, q.dims), dsum = g.virt("sum dO*O", kF32, rd);
  g.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, kF32, tdo, to, doo);
  g.reduction("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, doo, dsum);
  g.pointwise("delta=sum*1", CUDNN_POINTWISE_MUL, kF32, dsum, g.scalar("one", kUidOne, kF32), tdelta);
  // P = exp(Q·Kᵀ·scale − stats), masked
  auto s0 = g.virt("S", kF32, sd), s1 = g.virt("S_scaled", kF32, sd), s2 = g.virt("S-stats", kF32, sd);
  g.matmul("matmul Q.K^T", tq, tkt, s0);
  g.pointwise("mul_scale", CUDNN_POINTWISE_MUL, kF32, s0, scale, s1);
  if (s.bias) s1 = add_bias(g, s1, sd);
  g.pointwise("sub_stats", CUDNN_POINTWISE_SUB, kF32, s1, tstats, s2);
  if (s.causal) s2 = causal_mask(g, s, s2, sd);
  auto p = g.virt("P", kF32, sd);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, kF32, s2, nullptr, p);
  // dV = Pᵀ·dO (per query head, then summed over the group with GQA)
  auto pt = g.virt("P^T", kBF16, sdt, sdt_strides);
  g.reshape("reshape P", p, pt);
  kv_gradient("dV", "P^T.dO", pt, tdo, tdv);
  // dS = P∘(dO·Vᵀ − δ)·scale
  auto dp = g.virt("dP", kF32, sd), dp_sub = g.virt("dP-delta", kF32, sd), dsp = g.virt("P*(dP-delta)", kF32, sd);
  auto ds = g.virt("dS", kF32, sd);
  g.matmul("matmul dO.V^T", tdo, tvt, dp);
  g.pointwise("sub_delta", CUDNN_POINTWISE_SUB, kF32, dp, tdelta, dp_sub);
  g.pointwise("mul_P", CUDNN_POINTWISE_MUL, kF32, dp_sub, p, dsp);
  g.pointwise("mul_scale_dS", CUDNN_POINTWISE_MUL, kF32, dsp, scale, ds);
  // dK = dSᵀ·Q
  auto dst = g.virt("dS^T", kBF16, sdt, sdt_strides);
  g.reshape("reshape dS", ds, dst);
  kv_gradient("dK", "dS^T.Q", dst, tq, tdk);
  // dQ = dS·K (K: a reshape of the Kᵀ view back to [b,hkv,nk,d])
  auto k = g.virt("K", kBF16, kv.dims, kv.strides);
  g.reshape("reshape K^T", tkt, k);
  g.matmul("matmul dS.K", ds, k, tdq_acc);
  g.pointwise("dQ=bf16(dQ_accum)", CUDNN_POINTWISE_IDENTITY, kF32, tdq_acc, nullptr, tdq);
  return g.build(handle);
}

// A cached plan with the buffers it needs besides the caller's: workspace, and for the backward the fp32 dQ
// accumulator (zeroed before each run).
struct CachedPlan {
  CachedPlan(Plan p, std::size_t dq_accum_elements)
      : plan(std::move(p)), workspace(std::size_t(plan.workspace_bytes)), dq_accum(dq_accum_elements) {}
  Plan plan;
  DeviceBuffer<std::uint8_t> workspace;
  DeviceBuffer<float> dq_accum;
};

struct State {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::string why_unavailable;
  bool tried = false;
  // (backward, batch, heads_q, heads_kv, n_q, n_k, head_dim, causal, bias)
  std::map<std::tuple<bool, int, int, int, int, int, int, bool, bool>, std::unique_ptr<CachedPlan>> plans;
};

// Never destroyed: plans, workspaces and the handle live until the process ends, so that no cuDNN or CUDA
// call runs during static destruction, when the CUDA runtime may already be torn down.
State& state() {
  static State* st = new State;
  return *st;
}

// Under st.mu. Creates the handle once; false (with the reason kept) when cuDNN or a device is missing.
bool ensure_handle(State& st) {
  if (!st.tried) {
    st.tried = true;
    const Api* a = load_api(&st.why_unavailable);
    if (a && cuda_device_count() == 0) st.why_unavailable = "no CUDA device";
    if (a && st.why_unavailable.empty()) {
      const cudnnStatus_t rc = a->create(&st.handle);
      if (rc != CUDNN_STATUS_SUCCESS) {
        st.handle = nullptr;
        st.why_unavailable = std::string("cudnnCreate failed: ") + a->get_error_string(rc);
      } else {
        trace("cuDNN %zu loaded, handle created", a->get_version());
      }
    }
  }
  return st.handle != nullptr;
}

CachedPlan& plan_for(State& st, bool backward, const SdpaShape& s) {
  if (!ensure_handle(st)) throw Error("cuDNN unavailable: " + st.why_unavailable);
  if (s.batch < 1 || s.heads_q < 1 || s.heads_kv < 1 || s.heads_q % s.heads_kv != 0 || s.n_q < 1 || s.n_k < 1 ||
      s.head_dim < 8 || s.head_dim % 8 != 0 || !std::isfinite(s.scale))
    throw Error("cuDNN SDPA: bad shape " + s.describe());
  const auto key =
      std::make_tuple(backward, s.batch, s.heads_q, s.heads_kv, s.n_q, s.n_k, s.head_dim, s.causal, s.bias);
  auto it = st.plans.find(key);
  if (it != st.plans.end()) return *it->second;
  auto c = std::make_unique<CachedPlan>(backward ? build_backward(st.handle, s) : build_forward(st.handle, s),
                                        backward ? std::size_t(s.batch) * s.heads_q * s.n_q * s.head_dim : 0);
  return *st.plans.emplace(key, std::move(c)).first->second;
}

}  // namespace

std::string SdpaShape::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "b%d hq%d hkv%d nq%d nk%d d%d%s%s", batch, heads_q, heads_kv, n_q, n_k, head_dim,
                causal ? " causal" : "", bias ? " bias" : "");
  return buf;
}

bool available(std::string* why) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const bool ok = ensure_handle(st);
  if (!ok && why) *why = st.why_unavailable;
  return ok;
}

bool loadable(std::string* why) {
  std::string reason;  // load_api is call_once: no lock needed
  const bool ok = load_api(&reason) != nullptr;
  if (!ok && why) *why = reason;
  return ok;
}

long version() {
  const Api* a = load_api(nullptr);
  return a ? long(a->get_version()) : 0;
}

void set_trace(std::FILE* out) { trace_stream() = out; }

void clear_plan_cache() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.plans.clear();
}

void sdpa_forward(const SdpaShape& s, const void* q, const void* k, const void* v, const void* bias, void* o,
                  float* stats, cudaStream_t stream) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  CachedPlan& c = plan_for(st, false, s);
  float scale = s.scale, neg_inf = -std::numeric_limits<float>::infinity();
  std::int32_t nk = s.n_k, nq = s.n_q;
  std::vector<int64_t> uids{kUidQ, kUidK, kUidV, kUidO, kUidStats, kUidScale};
  std::vector<void*> ptrs{const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, stats, &scale};
  if (s.bias != (bias != nullptr)) throw Error("cuDNN SDPA: bias pointer and shape.bias disagree");
  if (s.bias) uids.push_back(kUidBias), ptrs.push_back(const_cast<void*>(bias));
  if (s.causal) {
    uids.push_back(kUidNegInf), ptrs.push_back(&neg_inf);
    if (s.n_q != s.n_k) uids.insert(uids.end(), {kUidNk, kUidNq}), ptrs.insert(ptrs.end(), {&nk, &nq});
  }
  check(api().set_stream(st.handle, stream), "cudnnSetStream");
  execute(st.handle, c.plan, uids, ptrs, c.workspace.get());
}

void sdpa_backward(const SdpaShape& s, const void* q, const void* k, const void* v, const void* bias, const void* o,
                   const void* d_o, const float* stats, void* dq, void* dk, void* dv, float* delta,
                   cudaStream_t stream) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  CachedPlan& c = plan_for(st, true, s);
  float scale = s.scale, neg_inf = -std::numeric_limits<float>::infinity(), one = 1.0f;
  std::int32_t nk = s.n_k, nq = s.n_q;
  std::vector<int64_t> uids{kUidQ, kUidK, kUidV, kUidO, kUidDO, kUidStats, kUidDQ, kUidDK, kUidDV, kUidDelta,
                            kUidDQAccum, kUidScale, kUidOne};
  std::vector<void*> ptrs{const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), const_cast<void*>(o),
                          const_cast<void*>(d_o), const_cast<float*>(stats), dq, dk, dv, delta, c.dq_accum.get(),
                          &scale, &one};
  if (s.bias != (bias != nullptr)) throw Error("cuDNN SDPA: bias pointer and shape.bias disagree");
  if (s.bias) uids.push_back(kUidBias), ptrs.push_back(const_cast<void*>(bias));
  if (s.causal) {
    uids.push_back(kUidNegInf), ptrs.push_back(&neg_inf);
    if (s.n_q != s.n_k) uids.insert(uids.end(), {kUidNk, kUidNq}), ptrs.insert(ptrs.end(), {&nk, &nq});
  }
  // cuDNN >= 9.6 initialises the accumulator itself; zeroing it costs one memset and removes the doubt.
  ATTN_CUDA_CHECK(cudaMemsetAsync(c.dq_accum.get(), 0, c.dq_accum.size() * sizeof(float), stream));
  check(api().set_stream(st.handle, stream), "cudnnSetStream");
  execute(st.handle, c.plan, uids, ptrs, c.workspace.get());
}

}  // namespace attncheck::cuda::cudnn
