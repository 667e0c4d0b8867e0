// builtin_kernels.h — the CPU kernel classes behind register_builtin_kernels() (harness/kernel.h).
//
// ModelKernel wraps one NumericsSpec (fa2, fa2-fixed, paper, paper-fixed and their parameterised forms);
// its name is canonical: the base name, then in brackets only the parameters that differ from the base's
// defaults, in the order beta, tol, tile_q, tile_k — e.g. "paper-fixed[beta=4,tol=0.002]", "fa2[tile_q=16]".
// Registry factories: "fa2" and "paper" take tile_q, tile_k; "fa2-fixed" and "paper-fixed" also take beta
// (> 1) and tol (>= 0). Tiles are integers in [1, 65536].
// Run the tests: ctest -R BuiltinKernels
#pragma once

#include <memory>
#include <string>

#include "harness/kernel.h"
#include "kernels/numerics_spec.h"

namespace attncheck {

class ModelKernel : public Kernel {
 public:
  // base: the builtin spec's name; spec: that spec with any parameters applied.
  ModelKernel(std::string base, NumericsSpec spec);
  std::string name() const override { return name_; }
  std::string summary() const override;
  KernelCaps caps() const override;
  ForwardOutput forward(const Instance& in) const override;
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override;
  std::unique_ptr<Kernel> with_tiles(int tile_q, int tile_k) const override;
  const NumericsSpec& spec() const { return spec_; }
  const NumericsSpec* numerics() const override { return &spec_; }

 private:
  std::string base_;
  NumericsSpec spec_;
  std::string name_;
};

// A model kernel from a base name and registry parameters; throws Error on unknown or out-of-range ones.
std::unique_ptr<Kernel> make_model_kernel(const std::string& base, const KernelParams& params);

}  // namespace attncheck
