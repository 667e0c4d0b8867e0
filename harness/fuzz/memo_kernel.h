// memo_kernel.h — a kernel wrapper for the fuzz target that runs the kernel once per distinct input.
//
// The per-instance properties checked on one fuzz input ask the kernel for the forward outputs of the same
// instance again and again (accurate, finite, within_v_range, masked_row, key_permutation, masked_value,
// causal_prefix: seven calls; accurate, finite, masked_value and causal_prefix also for the same backward).
// MemoKernel answers a repeated call on a bit-identical instance (Q, K, V, dO, mask, bias, seed, problem, and the
// family's tiles) with the first call's outputs. A kernel must be deterministic per input (kernel.h), so this changes
// no verdict of those properties; the `deterministic` property itself must get the plain kernel (the target does that),
// so a kernel that is not deterministic is still caught. The memo lives for one fuzz input (clear()).
//
// `deterministic` runs the kernel twice on one instance and compares: in lend-once mode (set_lend_once) a memo
// entry answers only the FIRST call on its instance (that output came from a real, earlier run) and every later
// call runs the kernel afresh without touching the memo, so the property still compares two independent runs
// and costs one run instead of two.
// When the wrapped kernel is a CPU model (ModelKernel), forward() also keeps the model's event trace
// (ModelTrace: ties, p̄ == 1, shifted tiles) for the fuzz feedback: trace_of(). The trace is an out-parameter of
// model_forward and does not change its outputs, so the memoised outputs are ModelKernel::forward's.
//
// Invariants: at most one instance is kept (the first asked for after clear(), the fuzz input's
// instance 0; the properties' transformed copies are run once each and not kept, memo_kernel.cpp); a call
// that throws is not memoised; with_tiles() returns a wrapper that shares the memo (tiles are part of the key).
#pragma once

#include <memory>
#include <vector>

#include "harness/kernel.h"
#include "kernels/cpu/flash_model.h"

namespace attncheck::fuzz {

class MemoKernel : public Kernel {
 public:
  explicit MemoKernel(const Kernel& base);
  std::string name() const override { return base_.name(); }
  std::string summary() const override { return base_.summary(); }
  KernelCaps caps() const override { return caps_; }
  ForwardOutput forward(const Instance& in) const override;
  BackwardOutput backward(const Instance& in, const ForwardOutput& fwd) const override;
  std::unique_ptr<Kernel> with_tiles(int tile_q, int tile_k) const override;
  CpuTwin cpu_twin() const override { return base_.cpu_twin(); }  // the memo's kernel's twin, not memoised
  const NumericsSpec* numerics() const override { return base_.numerics(); }  // the same numerics as its kernel

  void clear();                       // forget everything (the target calls it once per fuzz input)
  int hits() const;                   // calls answered from the memo (tests)
  void set_lend_once(bool on);        // shared by every tiled copy (see above)
  // The model trace of the memoised forward of `in` (this wrapper's tiles); nullptr when there is none (not a
  // CPU model, or not run through this memo).
  const ModelTrace* trace_of(const Instance& in) const;

  struct Store;

 private:
  MemoKernel(const Kernel& base, std::shared_ptr<Store> store, int tile_q, int tile_k,
             std::unique_ptr<Kernel> owned);
  const Kernel& base_;
  KernelCaps caps_;
  std::shared_ptr<Store> store_;
  int tile_q_ = 0, tile_k_ = 0;       // 0, 0 = the kernel's own tiles
  std::unique_ptr<Kernel> owned_;     // the tiled copy this wrapper forwards to
};

}  // namespace attncheck::fuzz
