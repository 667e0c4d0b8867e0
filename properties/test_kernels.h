// test_kernels.h — small synthetic kernels for the properties' own tests (test-only, header-only): the exact
// result rounded once (like `oracle`), optionally mutated, so that each test shows a property failing on a
// kernel with one known defect and passing without it. Forward only (caps().backward = false) unless given a
// backward function; that one is called with the instance alone (like `oracle`, it ignores the kernel's O, LSE).
// A kernel given a twin (set_twin) plays a GPU kernel for gpu_matches_cpu_model.
#pragma once

#include <cmath>
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

// A kernel (a built-in CPU model) with a planted defect that still declares the model's numerics: what a kernel that
// claims a spec and breaks it shows the invariance properties. `edit_in` changes the instance before the model runs,
// `edit_out` the outputs after (either may be null); with_tiles tiles the model and keeps both edits.
class ModelDefect : public Kernel {
 public:
  using EditIn = std::function<Instance(const Instance&)>;
  using EditOut = std::function<void(const Instance&, ForwardOutput&)>;
  ModelDefect(std::string name, std::shared_ptr<const Kernel> model, EditIn edit_in, EditOut edit_out)
      : name_(std::move(name)), model_(std::move(model)), in_(std::move(edit_in)), out_(std::move(edit_out)) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return "test kernel " + name_ + " (" + model_->name() + ", a planted defect)"; }
  KernelCaps caps() const override {
    KernelCaps c = model_->caps();
    c.backward = false;
    return c;
  }
  ForwardOutput forward(const Instance& in) const override {
    ForwardOutput o = model_->forward(in_ ? in_(in) : in);
    if (out_) out_(in, o);
    return o;
  }
  std::unique_ptr<Kernel> with_tiles(int tile_q, int tile_k) const override {
    std::shared_ptr<const Kernel> t = model_->with_tiles(tile_q, tile_k);
    return t ? std::make_unique<ModelDefect>(name_, t, in_, out_) : nullptr;
  }
  const NumericsSpec* numerics() const override { return model_->numerics(); }

 private:
  std::string name_;
  std::shared_ptr<const Kernel> model_;
  EditIn in_;
  EditOut out_;
};

// Key 0's weight times f in every row (a bias of log f on its scores): a defect tied to a key position.
inline Instance first_key_weighted(const Instance& in, double f) {
  Instance t = in;
  const Problem& p = in.problem;
  if (!p.has_bias) t.bias.assign(p.scores_size(), 0.0);
  t.problem.has_bias = true;
  // score_at(b, h, i, 0) of every row; the bias is fp32
  for (std::size_t r = 0; r < p.rows(); ++r) t.bias[r * p.n_k] += round_to(std::log(f), Format::kF32);
  return t;
}

// O times (1 + 2^-4), rounded back to bf16: a normalisation off by a constant factor.
inline void o_scaled(ForwardOutput& o) {
  for (double& x : o.o) x = round_to(x * (1 + 0x1.0p-4), Format::kBF16);
}

inline std::unique_ptr<Kernel> make_kernel(std::string name, FnKernel::Fn fn, FnKernel::BackwardFn bwd = nullptr) {
  return std::make_unique<FnKernel>(std::move(name), std::move(fn), std::move(bwd));
}

}  // namespace attncheck::testing
