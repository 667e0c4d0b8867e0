// test_kernels.h — small synthetic kernels for the properties' own tests (test-only, header-only): the exact
// result rounded once (like `oracle`), optionally mutated, so that each test shows a property failing on a
// kernel with one known defect and passing without it. Forward only (caps().backward = false).
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
  FnKernel(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return "test kernel " + name_; }
  KernelCaps caps() const override {
    KernelCaps c;
    c.mask = true;
    return c;
  }
  ForwardOutput forward(const Instance& in) const override { return fn_(in); }

 private:
  std::string name_;
  Fn fn_;
};

// The exact result of `in`, O rounded once to bf16 (round to nearest even), LSE to fp32.
inline ForwardOutput rounded_reference(const Instance& in) {
  const ReferenceForward r = reference_forward(in);
  ForwardOutput out{r.o, r.lse};
  for (double& x : out.o) x = round_to(x, Format::kBF16);
  for (double& x : out.lse) x = round_to(x, Format::kF32);
  return out;
}

inline std::unique_ptr<Kernel> make_kernel(std::string name, FnKernel::Fn fn) {
  return std::make_unique<FnKernel>(std::move(name), std::move(fn));
}

}  // namespace attncheck::testing
