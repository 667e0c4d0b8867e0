// test_kernels.h — small synthetic kernels for the properties' own tests (test-only, header-only): the exact
// result rounded once (like `oracle`), optionally mutated, so that each test shows a property failing on a
// kernel with one known defect and passing without it. Forward only (caps().backward = false) unless given a
// backward function; that one is called with the instance alone (like `oracle`, it ignores the kernel's O, LSE).
// A kernel given a twin (set_twin) plays a GPU kernel for gpu_matches_cpu_model.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "harness/kernel.h"
#include "reference/reference.h"

namespace attncheck::testing {

class FnKernel : public Kernel {
 public:
  using Fn = std::function<ForwardOutput(const Instance&)>;
  using BackwardFn = std::function<BackwardOutput(const Instance&)>;
  FnKernel(std::string name, Fn fn, BackwardFn bwd = nullptr)
      : name_(std::move(name)), fn_(std::move(fn)), bwd_(std::move(bwd)) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return "test kernel " + name_; }
  KernelCaps caps() const override {
    KernelCaps c;
    c.mask = c.bias = true;
    c.backward = bwd_ != nullptr;
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return fn_(in); }
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override {
    return bwd_ ? bwd_(in) : Kernel::backward(in, fwd);  // the base throws: no backward pass
  }
  // `twin_bwd` (optional) gives the twin a backward: then gpu_matches_cpu_model takes the twin's sums for the GPU's.
  void set_twin(Fn twin, NumericsSpec spec, BackwardFn twin_bwd = nullptr) {
    twin_ = std::move(twin), twin_spec_ = std::move(spec), twin_bwd_ = std::move(twin_bwd);
  }
  CpuTwin cpu_twin() const override {
    if (!twin_) return {};
    return {std::make_unique<FnKernel>("twin:" + name_, twin_, twin_bwd_), twin_spec_};
  }

 private:
  std::string name_;
  Fn fn_;
  BackwardFn bwd_;
  Fn twin_;
  NumericsSpec twin_spec_;
  BackwardFn twin_bwd_;
};

// The exact result of `in`, O rounded once to bf16 (round to nearest even), LSE to fp32.
inline ForwardOutput rounded_reference(const Instance& in) {
  const ReferenceForward r = reference_forward(in);
  ForwardOutput out{r.o, r.lse};
  for (double& x : out.o) x = round_to(x, Format::kBF16);
  for (double& x : out.lse) x = round_to(x, Format::kF32);
  return out;
}

// The exact gradients of `in` (δ from the exact O), dQ, dK, dV rounded once to bf16, δ to fp32: `oracle`'s backward.
inline BackwardOutput rounded_reference_backward(const Instance& in) {
  const ReferenceBackward r = reference_backward(in);
  BackwardOutput out{r.dq, r.dk, r.dv, r.delta};
  for (auto* t : {&out.dq, &out.dk, &out.dv})
    for (double& x : *t) x = round_to(x, Format::kBF16);
  for (double& x : out.delta) x = round_to(x, Format::kF32);
  return out;
}

inline std::unique_ptr<Kernel> make_kernel(std::string name, FnKernel::Fn fn, FnKernel::BackwardFn bwd = nullptr) {
  return std::make_unique<FnKernel>(std::move(name), std::move(fn), std::move(bwd));
}

}  // namespace attncheck::testing
