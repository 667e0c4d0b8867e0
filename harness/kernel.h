// kernel.h — the one interface every kernel under test implements (CPU models, CUDA kernels, plugins),
// and the registry that names them.
//
// A kernel reads an Instance and returns its outputs as doubles holding exactly the values it produced.
// It must not keep state between calls that changes results (the determinism property checks this; the
// stochastic null control derives its random stream from Instance::seed and the input, so it is
// deterministic per input too). Unsupported features (a mask on a kernel without masks, backward on a
// forward-only kernel) throw attncheck::Error: a property skips kernels whose capabilities exclude it.
//
// `attncheck list` prints the registry. Built-in kernels register through register_builtin_kernels();
// CUDA kernels through register_cuda_kernels() when the build has CUDA and a device is present;
// plugins through the plugin loader. No static-initialiser registration: static libraries drop it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/problem.h"
#include "kernels/numerics_spec.h"

namespace attncheck {

struct KernelCaps {
  bool backward = false;
  bool causal = true;
  bool mask = false;   // explicit keep-mask
  bool bias = false;   // additive bias
  bool gqa = true;     // heads_kv < heads_q
  std::vector<Format> input_formats{Format::kBF16};
  Format output_format = Format::kBF16;  // O, dQ, dK, dV; LSE and δ are fp32
  std::string device = "cpu";            // "cpu", "cuda:0", "plugin"
  int max_head_dim = 0;                  // 0 = any
  std::vector<int> head_dims;            // empty = any up to max_head_dim; else only these
  bool null_control = false;             // oracle and stochastic: must pass every property
  // stochastic: its rounding stream is drawn from the whole input, so changing masked keys re-rounds the other
  // rows too (each within one rounding). masked_value and causal_prefix allow that one rounding to such a kernel
  // only; every other kernel must keep those rows' bits.
  bool rounding_seeded_by_input = false;

  // Why this kernel cannot run the problem, or "" when it can.
  std::string unsupported_reason(const Problem& p, bool need_backward) const;
  std::string describe() const;  // "fwd+bwd causal mask bias gqa bf16->bf16 cpu"
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;  // one line for `attncheck list`
  virtual KernelCaps caps() const = 0;
  virtual ForwardOutput forward(const Instance& in) const = 0;
  // Backward from the kernel's own forward outputs (O, LSE) and in.d_o.
  virtual BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const;
  // Many instances at once: GPU kernels override this to batch launches; the default loops.
  virtual std::vector<ForwardOutput> forward_many(const std::vector<const Instance*>& ins) const;
  // A copy of this kernel with other tile sizes (CPU models: down to 1x1, so shrinking can shrink tiles);
  // nullptr when the kernel's tiles are fixed. Families carry a tile config; properties apply it here.
  // kMaxTile: the largest tile the CPU models take, and a family may name (validate_family: 0 to it, 0 = the kernel's
  // own), so a case file or `check --family` naming more is a usage error, not a failing check.
  static constexpr int kMaxTile = 65536;
  virtual std::unique_ptr<Kernel> with_tiles(int tile_q, int tile_k) const;
  // For a GPU kernel: its CPU twin, a CPU kernel that does the forward's operations in the GPU's order (tensor-core
  // sums, reductions), bit for bit except where the host's exp/log stand in for the GPU's, and the numerics both
  // follow (their rounding points: gpu_matches_cpu_model derives its bound from them). The backward, run from the
  // GPU's own O and LSE, is compared with the twin's backward where its caps say it has one, else with
  // model_backward of `spec`. A twin with a backward promises the GPU backward's dot products bit for bit too
  // (s = q·k, dP = dO·v: the property then allows no difference before exp); give a twin no backward otherwise.
  // No twin (kernel null) for CPU kernels, which are their own models, and for kernels nobody has twinned.
  struct CpuTwin {
    std::unique_ptr<Kernel> kernel;
    NumericsSpec spec;
  };
  virtual CpuTwin cpu_twin() const { return {}; }
  // The rounding points this kernel follows, where it declares them: the CPU models (fa2, paper and their
  // variants) return their NumericsSpec, tiles included. Null for a kernel that does not: the null controls, plugins,
  // and the CUDA kernels (their exp and tensor-core sums are not the spec's: cpu_twin() relates them to it). The
  // invariance properties derive a sharper rounding envelope from a declared spec (properties/property_util.h), so
  // a kernel must not declare a spec it does not follow.
  virtual const NumericsSpec* numerics() const { return nullptr; }
};

// Parameters of a kernel name such as "paper-fixed[beta=4,tol=0.002]".
using KernelParams = std::map<std::string, double>;
using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelParams&)>;

class Registry {
 public:
  static Registry& global();
  void add(std::unique_ptr<Kernel> k);               // throws Error on a duplicate name
  // A parameterised family of kernels: get("base[k=v,...]") builds (once) and registers the instance.
  // The factory throws Error on an unknown or out-of-range parameter.
  void add_factory(const std::string& base, KernelFactory f);
  const Kernel* find(const std::string& name) const;  // nullptr when absent (plain names only)
  const Kernel& get(const std::string& name);         // throws Error listing the known names
  // Why the kernels whose names start with `prefix` are not registered here ("cuda:": no device, a build
  // without CUDA; "cuda:cudnn": libcudnn did not load): get() says it when asked for one of them.
  void note_absent(const std::string& prefix, const std::string& why);
  std::vector<const Kernel*> all() const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::map<std::string, KernelFactory> factories_;
  std::map<std::string, std::string> absent_;  // prefix -> why
};

// Splits "base[k=v,k2=v2]" into base and parameters; throws Error on malformed text, naming it as `what` ("kernel
// name", "--family").
std::pair<std::string, KernelParams> parse_named_params(const std::string& name, const std::string& what);
std::pair<std::string, KernelParams> parse_kernel_name(const std::string& name);  // what = "kernel name"
// A fixed kernel's β ("beta") or tolerance ("tol") as the fp32 number the fix computes with; Error naming `kernel`
// where that number does not do what the value says: β must move a maximum of 1 once β·r is rounded to max_fmt
// (fp32: β > 1; bf16, the paper's: β > 1 + 2^-8), tol must be finite and >= 0, and 0 only where given as 0
// (paper-fixed[beta=1.00000001] and [beta=1.001] ran as paper under the fixed name; beta=1e308 was inf; tol=1e-320 0).
float fixed_policy_param(const std::string& kernel, const std::string& key, double value, Format max_fmt);

// Registers fa2, fa2-fixed, paper, paper-fixed, oracle, stochastic (and helper kernels such as `plain`).
void register_builtin_kernels(Registry& r);
// Registers cuda:* kernels when built with CUDA and a device is present; returns how many. No-op otherwise.
int register_cuda_kernels(Registry& r);
// Everything a program normally wants: builtins, then CUDA kernels where available. Idempotent.
Registry& default_registry();

}  // namespace attncheck
