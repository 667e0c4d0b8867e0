// onednn_plugin.cpp — a third-party CPU attention under test: oneDNN (Debian libdnnl-dev 2.6) primitives
// composed into plain (non-tiled) attention, exported through the attncheck plugin ABI as kernel `onednn`.
//
// Per (batch, query head), with kv head h / group (GQA):
//   S = scale · Q Kᵀ   oneDNN matmul, bf16 × bf16 -> f32 (scale as the matmul's output scale)
//   S += bias; hidden keys (causal bottom-right, keep-mask) -> -inf          (here, fp32)
//   LSE = m + log Σ exp(s - m)                                              (here, fp32, key order)
//   P = softmax(S)     oneDNN softmax, f32; rows with no visible key are zeroed (O = 0, LSE = -inf)
//   P̄ = bf16(P)        oneDNN reorder (round to nearest even), as a bf16 framework would store P
//   O = P̄ V            oneDNN matmul, bf16 × bf16 -> bf16 (f32 accumulation, rounded once)
// Q, K, V are read in place through strided memory descriptors (Kᵀ is a stride swap). The library is only
// used inside calls (attncheck runs those in forked children), never at load time.
// Built when CMake finds dnnl (harness/plugin/CMakeLists.txt); tested by onednn_plugin_test.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "attncheck_plugin.h"

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

int onednn_forward(void*, const attncheck_forward_args* a, char* msg, size_t msg_size) {
  try {
    const attncheck_problem& p = a->problem;
    if (a->struct_size < sizeof *a || p.input_format != ATTNCHECK_FORMAT_BF16 || p.output_format != ATTNCHECK_FORMAT_BF16) {
      std::snprintf(msg, msg_size, "expects ABI 1.0 arguments, bf16 inputs and bf16 output");
      return ATTNCHECK_ERR_INVALID;
    }
    const memory::dim nq = p.n_q, nk = p.n_k, d = p.head_dim;
    const int group = p.heads_q / p.heads_kv;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);

    // Views of one head's slice: strides in elements straight from the ABI tensors.
    const auto* qs = a->q.stride;
    const auto* ks = a->k.stride;
    const auto* vs = a->v.stride;
    const auto* os = a->o.stride;
    const memory::desc q_md({nq, d}, dt::bf16, memory::dims{qs[2], qs[3]});
    const memory::desc kt_md({d, nk}, dt::bf16, memory::dims{ks[3], ks[2]});  // Kᵀ by swapping strides
    const memory::desc v_md({nk, d}, dt::bf16, memory::dims{vs[2], vs[3]});
    const memory::desc o_md({nq, d}, dt::bf16, memory::dims{os[2], os[3]});
    const memory::desc s_md({nq, nk}, dt::f32, tag::ab);
    const memory::desc pbar_md({nq, nk}, dt::bf16, tag::ab);

    dnnl::primitive_attr qk_attr;
    qk_attr.set_output_scales(0, {p.scale});
    const dnnl::matmul qk(dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md, kt_md, s_md), qk_attr, eng));
    const dnnl::softmax_forward softmax(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md, 1), eng));
    const dnnl::reorder to_bf16(dnnl::reorder::primitive_desc(eng, s_md, eng, pbar_md));
    const dnnl::matmul pv(dnnl::matmul::primitive_desc(dnnl::matmul::desc(pbar_md, v_md, o_md), eng));

    std::vector<float> s(static_cast<std::size_t>(nq * nk));
    std::vector<std::uint16_t> pbar(s.size());
    memory s_mem(s_md, eng, s.data()), pbar_mem(pbar_md, eng, pbar.data());
    const auto* mask = static_cast<const std::uint8_t*>(a->mask.data);
    const auto* bias = static_cast<const float*>(a->bias.data);
    const auto* ms = a->mask.stride;
    const auto* bs = a->bias.stride;
    const auto* ls = a->lse.stride;

    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        const int hk = h / group;
        auto* qp = static_cast<std::uint16_t*>(a->q.data) + b * qs[0] + h * qs[1];
        auto* kp = static_cast<std::uint16_t*>(a->k.data) + b * ks[0] + hk * ks[1];
        auto* vp = static_cast<std::uint16_t*>(a->v.data) + b * vs[0] + hk * vs[1];
        auto* op = static_cast<std::uint16_t*>(a->o.data) + b * os[0] + h * os[1];
        memory q_mem(q_md, eng, qp), kt_mem(kt_md, eng, kp), v_mem(v_md, eng, vp), o_mem(o_md, eng, op);
        qk.execute(strm, {{DNNL_ARG_SRC, q_mem}, {DNNL_ARG_WEIGHTS, kt_mem}, {DNNL_ARG_DST, s_mem}});
        strm.wait();

        std::vector<bool> empty_row(static_cast<std::size_t>(nq), false);
        for (memory::dim i = 0; i < nq; ++i) {
          float* row = &s[static_cast<std::size_t>(i * nk)];
          float m = -INFINITY;
          for (memory::dim j = 0; j < nk; ++j) {
            const bool hidden = (p.causal && j > i + nk - nq) ||
                                (p.has_mask && !mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]]);
            if (hidden) row[j] = -INFINITY;
            else if (p.has_bias) row[j] += bias[b * bs[0] + h * bs[1] + i * bs[2] + j * bs[3]];
            if (row[j] > m) m = row[j];
          }
          float* lse = static_cast<float*>(a->lse.data) + b * ls[0] + h * ls[1] + i * ls[2];
          if (m == -INFINITY) {  // no visible key: softmax would be NaN; the contract says O = 0, LSE = -inf
            empty_row[static_cast<std::size_t>(i)] = true;
            *lse = -INFINITY;
            for (memory::dim j = 0; j < nk; ++j) row[j] = 0.0f;
            continue;
          }
          float sum = 0.0f;
          for (memory::dim j = 0; j < nk; ++j) sum += std::exp(row[j] - m);
          *lse = m + std::log(sum);
        }
        softmax.execute(strm, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, s_mem}});
        strm.wait();
        for (memory::dim i = 0; i < nq; ++i)  // zero rows stay zero only if we say so: softmax(0...) is uniform
          if (empty_row[static_cast<std::size_t>(i)])
            for (memory::dim j = 0; j < nk; ++j) s[static_cast<std::size_t>(i * nk + j)] = 0.0f;
        to_bf16.execute(strm, s_mem, pbar_mem);
        pv.execute(strm, {{DNNL_ARG_SRC, pbar_mem}, {DNNL_ARG_WEIGHTS, v_mem}, {DNNL_ARG_DST, o_mem}});
        strm.wait();
      }
    return ATTNCHECK_OK;
  } catch (const dnnl::error& e) {
    // oneDNN 2.x implements bf16 matmul only on CPUs with AVX-512 (avx512_core and up); elsewhere (an AVX2 CPU)
    // every problem is declined here with this reason, and attncheck skips it.
    const bool unimplemented = e.status == dnnl_unimplemented;
    std::snprintf(msg, msg_size, "oneDNN: %s (status %d%s)", e.what(), static_cast<int>(e.status),
                  unimplemented ? ": no implementation on this CPU; bf16 matmul needs AVX-512 in oneDNN 2.x" : "");
    return unimplemented ? ATTNCHECK_ERR_UNSUPPORTED : ATTNCHECK_ERR_INTERNAL;
  } catch (const std::exception& e) {
    std::snprintf(msg, msg_size, "%s", e.what());
    return ATTNCHECK_ERR_INTERNAL;
  }
}

attncheck_kernel_desc make_desc() {
  attncheck_kernel_desc d{};
  d.struct_size = sizeof d;
  d.name = "onednn";
  d.summary = "oneDNN 2.x matmul + softmax + matmul (plain attention: f32 S, bf16 P, bf16 O)";
  d.caps = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_MASK | ATTNCHECK_CAP_BIAS | ATTNCHECK_CAP_GQA;
  d.input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16);
  d.output_format = ATTNCHECK_FORMAT_BF16;
  d.forward = onednn_forward;
  return d;
}

const attncheck_kernel_desc kKernels[] = {make_desc()};

const attncheck_plugin kPlugin = {sizeof(attncheck_plugin), ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR,
                                  ATTNCHECK_PLUGIN_ABI_VERSION_MINOR, "onednn", 1, kKernels, nullptr};

}  // namespace

extern "C" ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }
