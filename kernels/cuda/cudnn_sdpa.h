// cudnn_sdpa.h — cuDNN 9's fused scaled-dot-product attention (flash attention), forward and backward, through
// the backend graph API (no cudnn_frontend): graph building, heuristics, an execution-plan cache and execution.
//
// Tensors are bf16, row-major [batch][heads][seq][head_dim] (the layout of harness/problem.h), on the device;
// LSE ("stats" in cuDNN) and δ are fp32 [batch][heads_q][n_q]. K and V have heads_kv heads (GQA when fewer than
// heads_q; cuDNN broadcasts them and sums dK, dV over each group). Causal masking is bottom-right aligned
// (query i sees key j iff j <= i + n_k − n_q), built into the graph as FlashAttention defines it.
// libcudnn is loaded at run time (dlopen "libcudnn.so.9"), so programs start on machines without it:
// available() says whether it loaded and why not. Every backend call is checked; a failure throws
// attncheck::Error naming the descriptor and attribute with cuDNN's status and cudnnGetLastErrorString, except
// "this engine cannot run this graph", which throws attncheck::Unsupported (the check is then skipped).
// All entry points serialise on one mutex (one cuDNN handle, plans cached per shape).
// Run the diagnostic: build-gpu-cudnn/kernels/cuda/cudnn_test --gtest_filter='*Diagnostic*'
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace attncheck::cuda::cudnn {

// The shape of one call. head_dim must be one cuDNN supports (a multiple of 8, <= 128 here; the kernel
// wrapper pads to 64 or 128). scale is applied by value at execution (not part of the cached plan).
struct SdpaShape {
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1, head_dim = 64;
  bool causal = false;
  float scale = 1.0f;
  bool bias = false;  // an additive bf16 bias [batch][heads_q][n_q][n_k] on the scaled scores (−inf masks)
  std::string describe() const;
};

// Whether libcudnn loaded and a handle could be created; when false, *why says what failed. Creating the handle
// creates a CUDA context on the current device.
bool available(std::string* why = nullptr);
// Whether libcudnn 9 loads (no handle, no CUDA context): what registering cuda:cudnn needs, so that a process that
// never runs it (the CLI with CPU kernels, libFuzzer's fork parent) holds no context on GPU 0. The handle comes
// with the first call; if that fails, the call throws with the reason.
bool loadable(std::string* why = nullptr);
// cudnnGetVersion() of the loaded library (e.g. 91900), 0 when unavailable.
long version();

// Every backend step (descriptor, attribute, finalize, heuristics, plans) is printed to `out` while it is set
// (nullptr: quiet, the default). For the diagnostic test.
void set_trace(std::FILE* out);

// O = softmax(scale·QKᵀ (+bias) (+causal mask))·V, stats = LSE (natural log) per row. Device pointers (bias:
// nullptr unless s.bias); o and stats must not alias inputs. Runs on `stream`; returns without synchronising.
void sdpa_forward(const SdpaShape& s, const void* q, const void* k, const void* v, const void* bias, void* o,
                  float* stats, cudaStream_t stream);

// dQ, dK, dV from Q, K, V, O, dO and the forward's stats; delta receives cuDNN's δ = rowsum(dO∘O) (fp32,
// [batch][heads_q][n_q]). Runs on `stream`; returns without synchronising.
void sdpa_backward(const SdpaShape& s, const void* q, const void* k, const void* v, const void* bias,
                   const void* o, const void* d_o, const float* stats, void* dq, void* dk, void* dv, float* delta,
                   cudaStream_t stream);

// Drops every cached plan (and its workspace). Tests use it to time plan building.
void clear_plan_cache();

}  // namespace attncheck::cuda::cudnn
