// torch_sdpa_plugin.cpp — PyTorch's scaled_dot_product_attention (libtorch 2.x, CUDA) under test through the
// attncheck plugin ABI (../attncheck_plugin.h): four kernels, each forcing one SDPA backend.
//
//   plugin:torch_flash      SDPBackend::flash_attention      O and LSE from at::_scaled_dot_product_flash_attention
//   plugin:torch_efficient  SDPBackend::efficient_attention  O and LSE from at::_scaled_dot_product_efficient_attention
//   plugin:torch_cudnn      SDPBackend::cudnn_attention      O and LSE from at::_scaled_dot_product_cudnn_attention
//   plugin:torch_math       SDPBackend::math                 O from SDPA; LSE computed HERE (the math backend
//                                                            returns none): fp64 logsumexp of scale·QKᵀ, to fp32
//
// Per call: the host bf16 bit patterns (strided, elements) are viewed with at::from_blob, copied to cuda:0,
// made contiguous [B][H][n][d]; GQA is done by expanding K and V to heads_q (exact copies); for the fused
// backends head_dim is zero-padded to a multiple of 8 (exact: zero columns add nothing to q·k, and the extra
// columns of O are cut off), as SDPA itself pads for flash. Then:
//   1. the gate: at::scaled_dot_product_attention with ONLY the kernel's backend enabled (global SDP flags set
//      on every call), dropout 0, the problem's scale passed explicitly. If SDPA refuses ("No available
//      kernel"), the call returns ATTNCHECK_ERR_UNSUPPORTED (a skip) with SDPA's reasons; other errors are
//      reported as ATTNCHECK_ERR_INTERNAL (a finding). O is this call's output: the path users take.
//   2. LSE: the backend's private op on the same inputs (it returns logsumexp); its O is compared bit for bit
//      with step 1's (a note on stderr, at most 3 per kernel, if they differ). If the private op throws, or its LSE has an unexpected
//      shape, LSE falls back to the fp64 computation and a note goes to stderr (once per kernel).
// Causal: attncheck's causal is bottom-right aligned (FlashAttention); SDPA's is_causal is top-left. For
// n_q == n_k they coincide and is_causal=true is passed. For n_q != n_k: torch_math and torch_efficient get an
// explicit boolean keep-mask (j <= i + n_k - n_q); torch_flash and torch_cudnn decline (UNSUPPORTED). Rows
// that see no key are left as SDPA computes them (not patched to O = 0, LSE = -inf): attncheck judges them.
// No keep-mask, no bias (caps say so), forward only, bf16 in and out.
//
// Build (standalone, on a machine with PyTorch 2.x):
//   cmake -S harness/plugin/torch_sdpa -B /tmp/tb -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
//   cmake --build /tmp/tb -j
// Run (attncheck initialises CUDA itself, and CUDA does not survive fork: call in-process):
//   ATTNCHECK_PLUGIN_ISOLATION=0 attncheck check --plugin /tmp/tb/libattncheck_torch_sdpa_plugin.so -k plugin:torch_flash
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "attncheck_plugin.h"

#if __has_include(<torch/version.h>)
#include <torch/version.h>  // TORCH_VERSION (libtorch's C++ API include dir, part of find_package(Torch))
#endif
#ifndef TORCH_VERSION
#define TORCH_VERSION "(unknown)"
#endif

namespace {

enum class Backend { kFlash, kEfficient, kCudnn, kMath };

struct KernelSelf {
  Backend backend;
  const char* name;
  bool warned_lse_fallback = false;
  int o_mismatch_notes = 0;
};

KernelSelf g_flash{Backend::kFlash, "torch_flash"};
KernelSelf g_efficient{Backend::kEfficient, "torch_efficient"};
KernelSelf g_cudnn{Backend::kCudnn, "torch_cudnn"};
KernelSelf g_math{Backend::kMath, "torch_math"};

// Collects libtorch warnings (SDPA's reasons for declining a backend) instead of printing them per call.
class CollectWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    if (text.size() < 2000) text += warning.msg() + "; ";
  }
  std::string text;
};

// FA3 is a libtorch >= 2.9 switch inside the flash backend; report its state if this libtorch has it.
template <typename C>
auto fa3_state(C& c, int) -> decltype(c.userEnabledFA3SDP(), int()) {
  return c.userEnabledFA3SDP() ? 1 : 0;
}
template <typename C>
int fa3_state(C&, long) {
  return -1;
}

void select_backend(Backend b) {
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(b == Backend::kFlash);
  ctx.setSDPUseMemEfficient(b == Backend::kEfficient);
  ctx.setSDPUseCuDNN(b == Backend::kCudnn);
  ctx.setSDPUseMath(b == Backend::kMath);
}

at::Tensor host_view(const attncheck_tensor& t, at::ScalarType type) {
  std::vector<int64_t> sizes(t.shape, t.shape + t.rank), strides(t.stride, t.stride + t.rank);
  return at::from_blob(t.data, sizes, strides, at::TensorOptions().dtype(type).device(at::kCPU));
}

at::Tensor to_device(const attncheck_tensor& t) {
  return host_view(t, at::kBFloat16).to(at::Device(at::kCUDA, 0)).contiguous();
}

// keep[i][j] = (j <= i + n_k - n_q): attncheck's bottom-right causal visibility, on the device.
at::Tensor causal_keep(int64_t nq, int64_t nk) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(at::Device(at::kCUDA, 0));
  const at::Tensor i = at::arange(nq, opts).unsqueeze(1);
  const at::Tensor j = at::arange(nk, opts).unsqueeze(0);
  return j.le(i + (nk - nq));
}

// LSE_i = log Σ_j exp(scale·q_i·k_j) over visible keys, in fp64 (bf16 products are exact in fp64 and d is small,
// so this is within a few fp64 ulps of exact), rounded once to fp32. -inf for a row with no visible key.
at::Tensor lse_fp64(const at::Tensor& q, const at::Tensor& k, double scale, const std::optional<at::Tensor>& keep) {
  at::Tensor s = at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) * scale;
  if (keep) s = s.masked_fill(keep->logical_not(), -std::numeric_limits<double>::infinity());
  return at::logsumexp(s, {-1}, false).to(at::kFloat);
}

// Brings a backend's logsumexp to [B][H][n_q] fp32, or returns an undefined tensor when its shape is unexpected.
at::Tensor normalise_lse(at::Tensor lse, int64_t b, int64_t h, int64_t nq) {
  if (!lse.defined()) return {};
  if (lse.dim() == 4 && lse.size(3) == 1) lse = lse.select(3, 0);
  if (lse.dim() != 3 || lse.size(0) != b || lse.size(1) != h || lse.size(2) < nq) return {};
  return lse.narrow(2, 0, nq).to(at::kFloat);
}

int fail(char* msg, size_t msg_size, int code, const std::string& text) {
  std::snprintf(msg, msg_size, "%s", text.c_str());
  return code;
}

int check_problem(const KernelSelf& self, const attncheck_problem& p, char* msg, size_t msg_size) {
  if (p.input_format != ATTNCHECK_FORMAT_BF16 || p.output_format != ATTNCHECK_FORMAT_BF16)
    return fail(msg, msg_size, ATTNCHECK_ERR_UNSUPPORTED, "bf16 inputs and output only");
  if (p.has_mask || p.has_bias)
    return fail(msg, msg_size, ATTNCHECK_ERR_UNSUPPORTED, "no keep-mask or bias in this adapter");
  if (p.causal && p.n_q != p.n_k && (self.backend == Backend::kFlash || self.backend == Backend::kCudnn))
    return fail(msg, msg_size, ATTNCHECK_ERR_UNSUPPORTED,
                "causal with n_q != n_k: SDPA's is_causal is top-left, attncheck's bottom-right, and this backend "
                "takes no explicit mask");
  return ATTNCHECK_OK;
}

int sdpa_supports(void* self, const attncheck_problem* p, int backward, char* msg, size_t msg_size) {
  if (backward) return fail(msg, msg_size, ATTNCHECK_ERR_UNSUPPORTED, "forward only");
  return check_problem(*static_cast<KernelSelf*>(self), *p, msg, msg_size);
}

int sdpa_forward(void* self_ptr, const attncheck_forward_args* a, char* msg, size_t msg_size) {
  auto& self = *static_cast<KernelSelf*>(self_ptr);
  try {
    if (a->struct_size < sizeof *a) return fail(msg, msg_size, ATTNCHECK_ERR_INVALID, "expects ABI 1.0 arguments");
    const attncheck_problem& p = a->problem;
    if (const int rc = check_problem(self, p, msg, msg_size); rc != ATTNCHECK_OK) return rc;
    if (!at::hasCUDA()) return fail(msg, msg_size, ATTNCHECK_ERR_DEVICE, "libtorch sees no CUDA device");
    const int64_t b = p.batch, hq = p.heads_q, hkv = p.heads_kv, nq = p.n_q, nk = p.n_k, d = p.head_dim;
    const int64_t group = hq / hkv;
    const double scale = static_cast<double>(p.scale);  // exact: SDPA's kernels take it back to fp32

    at::Tensor q = to_device(a->q);
    at::Tensor k = to_device(a->k);
    at::Tensor v = to_device(a->v);
    if (group > 1) {  // GQA: query head h reads kv head h / group; expansion copies values exactly
      k = k.unsqueeze(2).expand({b, hkv, group, nk, d}).reshape({b, hq, nk, d});
      v = v.unsqueeze(2).expand({b, hkv, group, nk, d}).reshape({b, hq, nk, d});
    }
    const at::Tensor q_exact = q, k_exact = k;  // for the fp64 LSE
    const bool fused = self.backend != Backend::kMath;
    const int64_t pad = fused ? (8 - d % 8) % 8 : 0;
    if (pad > 0) {
      q = at::constant_pad_nd(q, {0, pad}, 0);
      k = at::constant_pad_nd(k, {0, pad}, 0);
      v = at::constant_pad_nd(v, {0, pad}, 0);
    }

    std::optional<at::Tensor> keep;  // bottom-right visibility, for LSE and non-square causal masks
    if (p.causal) keep = causal_keep(nq, nk);
    const bool square_causal = p.causal && nq == nk;
    std::optional<at::Tensor> attn_mask;
    if (p.causal && !square_causal) attn_mask = keep;  // math / efficient only (check_problem)

    // Step 1: SDPA with only this backend enabled.
    select_backend(self.backend);
    CollectWarnings warnings;
    at::Tensor o;
    {
      c10::WarningUtils::WarningHandlerGuard guard(&warnings);
      try {
        o = at::scaled_dot_product_attention(q, k, v, attn_mask, 0.0, square_causal, scale);
      } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        const int code = what.find("No available kernel") != std::string::npos ? ATTNCHECK_ERR_UNSUPPORTED
                                                                               : ATTNCHECK_ERR_INTERNAL;
        return fail(msg, msg_size, code, std::string(self.name) + ": SDPA: " + what + " [" + warnings.text + "]");
      }
    }

    // Step 2: LSE from the backend's own op where it has one.
    at::Tensor lse, o_private;
    std::string lse_note;
    if (self.backend != Backend::kMath) {
      c10::WarningUtils::WarningHandlerGuard guard(&warnings);
      try {
        if (self.backend == Backend::kFlash) {
          auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, square_causal, false, scale);
          o_private = std::get<0>(r);
          lse = std::get<1>(r);
        } else if (self.backend == Backend::kEfficient) {
          std::optional<at::Tensor> bias;
          if (attn_mask) {  // SDPA's own conversion: additive -inf bias, rows padded to 16 elements for alignment
            const int64_t nk16 = (nk + 15) / 16 * 16;
            at::Tensor full = at::zeros({b, hq, nq, nk16}, q.options());
            at::Tensor view = full.narrow(3, 0, nk);
            view.masked_fill_(keep->logical_not(), -std::numeric_limits<float>::infinity());
            bias = view;
          }
          auto r = at::_scaled_dot_product_efficient_attention(q, k, v, bias, true, 0.0, square_causal, scale);
          o_private = std::get<0>(r);
          lse = std::get<1>(r);
        } else {
          auto r = at::_scaled_dot_product_cudnn_attention(q, k, v, std::nullopt, true, 0.0, square_causal, false,
                                                           scale);
          o_private = std::get<0>(r);
          lse = std::get<1>(r);
        }
        lse = normalise_lse(lse, b, hq, nq);
        if (!lse.defined()) lse_note = "unexpected logsumexp shape";
      } catch (const c10::Error& e) {
        lse = at::Tensor();
        lse_note = e.what_without_backtrace();
      }
      // Bit for bit (as int16, so NaN == NaN); a few notes per kernel, with the problem's shape.
      if (o_private.defined() && self.o_mismatch_notes < 3) {
        const bool same_shape = o_private.sizes() == o.sizes();
        const int64_t differ =
            same_shape ? o_private.view(at::kShort).ne(o.view(at::kShort)).sum().item<int64_t>() : -1;
        if (differ != 0) {
          ++self.o_mismatch_notes;
          std::fprintf(stderr,
                       "[%s] note: the private op's O differs from SDPA's in %lld elements (-1: shape) on b%d hq%d "
                       "hkv%d nq%d nk%d d%d causal=%d (reported: SDPA's)\n",
                       self.name, static_cast<long long>(differ), p.batch, p.heads_q, p.heads_kv, p.n_q, p.n_k,
                       p.head_dim, p.causal);
        }
      }
    }
    if (!lse.defined()) {
      if (self.backend != Backend::kMath && !self.warned_lse_fallback) {
        self.warned_lse_fallback = true;
        std::fprintf(stderr, "[%s] note: backend LSE unavailable (%s); LSE computed in fp64 instead\n", self.name,
                     lse_note.substr(0, 300).c_str());
      }
      lse = lse_fp64(q_exact, k_exact, scale, keep);
    }

    // Copy back into the caller's strided host buffers (.to(kCPU) waits for the device).
    if (pad > 0) o = o.narrow(3, 0, d);
    host_view(a->o, at::kBFloat16).copy_(o.to(at::kCPU));
    host_view(a->lse, at::kFloat).copy_(lse.to(at::kCPU));
    return ATTNCHECK_OK;
  } catch (const c10::Error& e) {
    return fail(msg, msg_size, ATTNCHECK_ERR_INTERNAL, std::string(self.name) + ": " + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return fail(msg, msg_size, ATTNCHECK_ERR_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(msg, msg_size, ATTNCHECK_ERR_INTERNAL, std::string(self.name) + ": " + e.what());
  }
}

int sdpa_init(const char* options, char* msg, size_t msg_size) {
  if (options && *options) return fail(msg, msg_size, ATTNCHECK_ERR_INVALID, "torch_sdpa takes no options");
  // Runs in the harness process: no CUDA work here, only what this libtorch is (stderr, once).
  std::fprintf(stderr, "[torch_sdpa] libtorch %s, flash-attention-3 switch: %d (-1: not in this libtorch)\n",
               TORCH_VERSION, fa3_state(at::globalContext(), 0));
  return ATTNCHECK_OK;
}

constexpr uint64_t kCaps = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA;

attncheck_kernel_desc make_desc(KernelSelf* self, const char* summary) {
  attncheck_kernel_desc k{};
  k.struct_size = sizeof(attncheck_kernel_desc);
  k.name = self->name;
  k.summary = summary;
  k.caps = kCaps;
  k.input_formats = ATTNCHECK_FORMAT_BIT(ATTNCHECK_FORMAT_BF16);
  k.output_format = ATTNCHECK_FORMAT_BF16;
  k.self = self;
  k.supports = sdpa_supports;
  k.forward = sdpa_forward;
  return k;
}

const attncheck_kernel_desc kKernels[] = {
    make_desc(&g_flash, "PyTorch SDPA, flash backend (cuda:0), O and LSE from _scaled_dot_product_flash_attention"),
    make_desc(&g_efficient, "PyTorch SDPA, memory-efficient backend (cuda:0), LSE from _scaled_dot_product_efficient_attention"),
    make_desc(&g_cudnn, "PyTorch SDPA, cuDNN backend (cuda:0), LSE from _scaled_dot_product_cudnn_attention"),
    make_desc(&g_math, "PyTorch SDPA, math backend (cuda:0); LSE computed by the adapter in fp64 (math returns none)"),
};

const attncheck_plugin kPlugin = {
    sizeof(attncheck_plugin), ATTNCHECK_PLUGIN_ABI_VERSION_MAJOR, ATTNCHECK_PLUGIN_ABI_VERSION_MINOR,
    "torch_sdpa",           4,                                   kKernels,
    sdpa_init,
};

}  // namespace

extern "C" ATTNCHECK_PLUGIN_EXPORT const attncheck_plugin* attncheck_plugin_v1(void) { return &kPlugin; }
