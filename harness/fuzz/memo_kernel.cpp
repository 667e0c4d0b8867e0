// memo_kernel.cpp — MemoKernel (memo_kernel.h): forward/backward answered once per distinct input.
#include "harness/fuzz/memo_kernel.h"

#include <cstring>
#include <optional>
#include <utility>

#include "kernels/cpu/builtin_kernels.h"
#include "reference/memo.h"

namespace attncheck::fuzz {

namespace {
// One entry: the first instance asked for after clear(), which the target makes instance 0 of the fuzz input
// (its forward, backward and trace). Every later hit is on that instance: the properties' transformed copies
// (constant_v's, key_permutation's, logit_shift's two, masked_value's, causal_prefix's) are each run once, so
// keeping them cost an Instance copy and a longer search per call and never saved a run. A copy that equals
// instance 0 bit for bit (constant_v on a family whose V is already constant) still hits its entry.

bool same_instance(const Instance& a, const Instance& b) {
  return a.seed == b.seed && memo::same_reference_inputs(a, b, true);
}
bool same_output(const ForwardOutput& a, const ForwardOutput& b) {
  return memo::same_bits(a.o, b.o) && memo::same_bits(a.lse, b.lse);
}
}  // namespace

struct MemoKernel::Store {
  struct Entry {
    int tile_q, tile_k;
    std::shared_ptr<const Instance> owner;  // the key when it is a shared instance (memo.h): found by identity
    Instance in;                            // else a copy
    const Instance& key() const { return owner ? *owner : in; }
    ForwardOutput fwd;
    bool has_trace = false;
    ModelTrace trace;
    bool fwd_lent = false, bwd_lent = false;  // lend-once mode: this entry already answered once
    bool has_bwd = false;
    ForwardOutput bwd_from;  // the forward outputs the backward was computed from
    BackwardOutput bwd;
  };
  std::optional<Entry> entry;  // the one entry (see above)
  int hits = 0;
  bool lend_once = false;
  Entry* find(const Instance& in, int tq, int tk) {
    Entry* e = entry ? &*entry : nullptr;
    return e && e->tile_q == tq && e->tile_k == tk && (e->owner.get() == &in || same_instance(e->key(), in)) ? e
                                                                                                             : nullptr;
  }
};

MemoKernel::MemoKernel(const Kernel& base) : MemoKernel(base, std::make_shared<Store>(), 0, 0, nullptr) {}

MemoKernel::MemoKernel(const Kernel& base, std::shared_ptr<Store> store, int tile_q, int tile_k,
                       std::unique_ptr<Kernel> owned)
    : base_(owned ? *owned : base), caps_(base.caps()), store_(std::move(store)), tile_q_(tile_q), tile_k_(tile_k),
      owned_(std::move(owned)) {}

ForwardOutput MemoKernel::forward(const Instance& in) const {
  if (!memo::small(in)) return base_.forward(in);
  if (Store::Entry* e = store_->find(in, tile_q_, tile_k_)) {
    if (!store_->lend_once || !e->fwd_lent) {
      e->fwd_lent = e->fwd_lent || store_->lend_once;
      ++store_->hits;
      return e->fwd;
    }
    return base_.forward(in);  // lend-once: a second, independent run
  }
  if (store_->lend_once || store_->entry) return base_.forward(in);
  Store::Entry e;
  e.tile_q = tile_q_;
  e.tile_k = tile_k_;
  e.owner = memo::shared_owner(in);
  if (!e.owner) e.in = in;
  if (const auto* model = dynamic_cast<const ModelKernel*>(&base_)) {
    e.fwd = model_forward(model->spec(), in, &e.trace);  // = ModelKernel::forward, with the trace kept
    e.has_trace = true;
  } else {
    e.fwd = base_.forward(in);
  }
  return store_->entry.emplace(std::move(e)).fwd;  // kept only once the call returned; moved, not copied
}

BackwardOutput MemoKernel::backward(const Instance& in, const ForwardOutput& fwd) const {
  Store::Entry* e = memo::small(in) ? store_->find(in, tile_q_, tile_k_) : nullptr;
  if (e && e->has_bwd && same_output(e->bwd_from, fwd) && (!store_->lend_once || !e->bwd_lent)) {
    e->bwd_lent = e->bwd_lent || store_->lend_once;
    ++store_->hits;
    return e->bwd;
  }
  BackwardOutput out = base_.backward(in, fwd);
  if (e && !e->has_bwd && !store_->lend_once) {
    e->has_bwd = true;
    e->bwd_from = fwd;
    e->bwd = out;
  }
  return out;
}

const ModelTrace* MemoKernel::trace_of(const Instance& in) const {
  const Store::Entry* e = memo::small(in) ? store_->find(in, tile_q_, tile_k_) : nullptr;
  return e && e->has_trace ? &e->trace : nullptr;
}

void MemoKernel::set_lend_once(bool on) { store_->lend_once = on; }

std::unique_ptr<Kernel> MemoKernel::with_tiles(int tile_q, int tile_k) const {
  std::unique_ptr<Kernel> t = base_.with_tiles(tile_q, tile_k);
  if (!t) return nullptr;  // fixed tiles: properties use this kernel as it is
  // The reference first: argument evaluation order is unspecified, and gcc moves `t` into the last parameter
  // before evaluating `*t` when both are in one call (a null dereference in gcc builds).
  const Kernel& tiled_kernel = *t;
  return std::unique_ptr<Kernel>(new MemoKernel(tiled_kernel, store_, tile_q, tile_k, std::move(t)));
}

void MemoKernel::clear() {
  store_->entry.reset();
  store_->hits = 0;
  store_->lend_once = false;
}

int MemoKernel::hits() const { return store_->hits; }

}  // namespace attncheck::fuzz
