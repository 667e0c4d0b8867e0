// builtin_kernels.cpp — register_builtin_kernels(): the CPU models (fa2, fa2-fixed, paper, paper-fixed, and
// another fix, fa2-psum), the null controls (oracle, stochastic) and the accuracy baseline (plain), plus the registry
// factories for parameterised model names. See builtin_kernels.h for the naming rule.
// Run the tests: ctest -R BuiltinKernels;  list them: attncheck list
#include "kernels/cpu/builtin_kernels.h"

#include <cmath>

#include <fmt/format.h>

#include "kernels/cpu/flash_model.h"
#include "kernels/cpu/null_controls.h"
#include "kernels/cpu/plain_attention.h"

namespace attncheck {
namespace {

constexpr int kMaxTile = Kernel::kMaxTile;

bool is_fixed(const std::string& base) { return base == "fa2-fixed" || base == "paper-fixed"; }

std::string canonical_name(const std::string& base, const NumericsSpec& s) {
  const NumericsSpec d = builtin_spec(base);
  std::string params;
  auto add = [&](const char* key, double v) { params += fmt::format("{}{}={}", params.empty() ? "" : ",", key, v); };
  if (s.max_policy.beta != d.max_policy.beta) add("beta", s.max_policy.beta);
  if (s.max_policy.tolerance != d.max_policy.tolerance) add("tol", s.max_policy.tolerance);
  if (s.tile_q != d.tile_q) add("tile_q", s.tile_q);
  if (s.tile_k != d.tile_k) add("tile_k", s.tile_k);
  return params.empty() ? base : base + "[" + params + "]";
}

int tile_param(const std::string& base, const char* key, double v) {
  if (!(v >= 1 && v <= kMaxTile) || v != std::floor(v))
    throw Error(fmt::format("kernel {}: {}={} must be an integer in [1, {}]", base, key, v, kMaxTile));
  return static_cast<int>(v);
}

void check_tiles(const std::string& who, int tile_q, int tile_k) {
  if (tile_q < 1 || tile_k < 1 || tile_q > kMaxTile || tile_k > kMaxTile)
    throw Error(fmt::format("kernel {}: tiles {}x{} out of range [1, {}]", who, tile_q, tile_k, kMaxTile));
}

// Kernels computed by a function of the instance (no spec): oracle, stochastic, plain.
class FunctionKernel : public Kernel {
 public:
  using Fwd = ForwardOutput (*)(const Instance&);
  using Bwd = BackwardOutput (*)(const Instance&);
  FunctionKernel(std::string name, std::string summary, bool null_control, Fwd f, Bwd b, bool seeded_by_input = false)
      : name_(std::move(name)), summary_(std::move(summary)), null_control_(null_control), seeded_(seeded_by_input),
        fwd_(f), bwd_(b) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return summary_; }
  KernelCaps caps() const override {
    KernelCaps c;
    c.backward = c.causal = c.mask = c.bias = c.gqa = true;
    c.null_control = null_control_;
    c.rounding_seeded_by_input = seeded_;
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return fwd_(in); }
  // The backward recomputes what it needs from the instance (the reference, or plain's own forward).
  BackwardOutput backward(const Instance& in, const ForwardOutput&) const override { return bwd_(in); }

 private:
  std::string name_, summary_;
  bool null_control_, seeded_;
  Fwd fwd_;
  Bwd bwd_;
};

}  // namespace

ModelKernel::ModelKernel(std::string base, NumericsSpec spec)
    : base_(std::move(base)), spec_(std::move(spec)), name_(canonical_name(base_, spec_)) {
  spec_.name = name_;
}

std::string ModelKernel::summary() const {
  std::string s;
  if (base_ == "fa2-psum")
    s = "CPU model of FlashAttention-2 CUDA with the row sum over the bf16 p̄ that P̄V multiplies (a fix: O = Σ p̄ v / "
        "Σ p̄, weights summing to 1); fp32 S, exp2, acc_o; O rounded once";
  else if (base_ == "fa2" || base_ == "fa2-fixed")
    s = "CPU model of FlashAttention-2 CUDA: fp32 S, exp2, row sum and acc_o; bf16 p̄ into P̄V; O rounded once";
  else
    s = "CPU model of the paper's pure-PyTorch bf16 FA2: bf16 S, p̄, block outputs, running output and sums";
  if (is_fixed(base_))
    s += fmt::format("; paper's max shift (Alg. 1, beta={}, tol={})", spec_.max_policy.beta, spec_.max_policy.tolerance);
  return s + fmt::format("; tiles {}x{}", spec_.tile_q, spec_.tile_k);
}

KernelCaps ModelKernel::caps() const {
  KernelCaps c;
  c.backward = c.causal = c.mask = c.bias = c.gqa = true;
  return c;
}

ForwardOutput ModelKernel::forward(const Instance& in) const { return model_forward(spec_, in); }

BackwardOutput ModelKernel::backward(const Instance& in, const ForwardOutput& fwd) const {
  return model_backward(spec_, in, fwd);
}

std::unique_ptr<Kernel> ModelKernel::with_tiles(int tile_q, int tile_k) const {
  check_tiles(name_, tile_q, tile_k);
  NumericsSpec s = spec_;
  s.tile_q = tile_q;
  s.tile_k = tile_k;
  return std::make_unique<ModelKernel>(base_, std::move(s));
}

std::unique_ptr<Kernel> make_model_kernel(const std::string& base, const KernelParams& params) {
  NumericsSpec s = builtin_spec(base);  // throws on an unknown base
  for (const auto& [key, v] : params) {
    if (key == "tile_q") {
      s.tile_q = tile_param(base, "tile_q", v);
    } else if (key == "tile_k") {
      s.tile_k = tile_param(base, "tile_k", v);
    } else if ((key == "beta" || key == "tol") && is_fixed(base)) {
      // β <= 1 would not move a positive tied max above itself, so p̄ = 1 would survive (no fix at all). The model
      // computes with the fp32 value (flash_model_steps.h): that one must be in range. The spec keeps the value as
      // given (the kernel's name: tol=0.002).
      fixed_policy_param(base, key, v, s.max_fmt);
      (key == "beta" ? s.max_policy.beta : s.max_policy.tolerance) = v == 0 ? 0.0 : v;  // −0 is 0, named so
    } else {
      throw Error(fmt::format("kernel {}: unknown parameter '{}' (known: {})", base, key,
                              is_fixed(base) ? "beta, tol, tile_q, tile_k" : "tile_q, tile_k"));
    }
  }
  return std::make_unique<ModelKernel>(base, std::move(s));
}

void register_builtin_kernels(Registry& r) {
  for (const char* base : {"fa2", "fa2-fixed", "paper", "paper-fixed", "fa2-psum"}) {
    r.add(std::make_unique<ModelKernel>(base, builtin_spec(base)));
    const std::string b = base;
    r.add_factory(b, [b](const KernelParams& params) { return make_model_kernel(b, params); });
  }
  r.add(std::make_unique<FunctionKernel>(
      "oracle", "fp64 reference rounded once to nearest (O, dQ, dK, dV bf16; LSE, delta fp32): the best possible",
      true, &oracle_forward, &oracle_backward));
  r.add(std::make_unique<FunctionKernel>(
      "stochastic", "fp64 reference stochastically rounded (unbiased; deterministic per input and seed)", true,
      &stochastic_forward, &stochastic_backward, /*seeded_by_input=*/true));  // null_controls.h: the whole input
  r.add(std::make_unique<FunctionKernel>(
      "plain", "non-tiled bf16 attention as PyTorch eager computes it (baseline of FlashAttention's accuracy rule)",
      false, &plain_forward, &plain_backward));
}

}  // namespace attncheck
