// memo.h — one-entry, per-thread memos for pure functions of an Instance (reference_forward/backward,
// make_instance), so that the properties checked on ONE input (the fuzz target runs ten of them on the same
// instance) compute the fp64 reference and generate the instance once instead of once per property.
//
// Invariants: a memo returns a copy of what the function returned for a bit-identical key (vectors compared
// bitwise, so −0 vs +0 and NaN payloads are different keys); it never changes a result, only skips recomputing
// it. Errors are never memoised (the function runs again and throws again). Only small keys are memoised
// (kMemoMaxElements), so large CLI runs hold no extra memory. thread_local: no sharing, no locks.
// Tested by fuzz_input_test (FuzzMemo.*: a hit gives what a fresh call gives; a changed input misses).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "harness/problem.h"
#include "kernels/formats.h"

namespace attncheck::memo {

// Tensors up to this many elements (per tensor) are memoised: a short fuzz input (n, d <= 32, a few heads) is
// ~2^12..2^14; the longest (harness/fuzz/fuzz_input.h: batch 1, 2 heads, n_q = n_k = 256, d = 128) has 2 · 256 · 256
// = 2^17 scores (mask, bias, P) and 2^16 elements of Q, K, V. At 2^16 each property generated it and ran its fp64
// reference again: the per-instance checks took 1.4-3x as long (paper, stochastic), with the bias flag 1.1-1.9x.
// A memo entry of 2^17 doubles is 1 MiB.
constexpr std::size_t kMemoMaxElements = std::size_t(1) << 17;

// Bitwise equality. Not libc's memcmp: under libFuzzer every unequal memcmp during a run is hooked and recorded
// (a memo miss is one), which cost more than the comparison; blocks of 8 elements compared without branches.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  const std::size_t n = a.size();
  constexpr std::size_t kBlock = 8;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    bool differ = false;
    for (std::size_t l = 0; l < kBlock; ++l) differ |= std::memcmp(&a[i + l], &b[i + l], sizeof(T)) != 0;
    if (differ) return false;
  }
  for (; i < n; ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  return true;
}

// Problem's fields as of this writing: a field added to Problem usually changes its size, and the build then
// says to compare it here (padding could hide a small one: keep the list in step with problem.h).
struct ProblemFields {
  int batch, heads_q, heads_kv, n_q, n_k, head_dim;
  double scale;
  bool causal, has_mask, has_bias;
  Format input_format;
};
static_assert(sizeof(Problem) == sizeof(ProblemFields), "Problem changed: update memo::same_problem");

inline bool same_problem(const Problem& a, const Problem& b) {
  return a.batch == b.batch && a.heads_q == b.heads_q && a.heads_kv == b.heads_kv && a.n_q == b.n_q &&
         a.n_k == b.n_k && a.head_dim == b.head_dim && std::memcmp(&a.scale, &b.scale, sizeof(double)) == 0 &&
         a.causal == b.causal && a.has_mask == b.has_mask && a.has_bias == b.has_bias &&
         a.input_format == b.input_format;
}

inline bool small(const Instance& in) {
  return in.problem.q_size() <= kMemoMaxElements && in.problem.kv_size() <= kMemoMaxElements &&
         in.problem.scores_size() <= kMemoMaxElements;
}

// The inputs the reference reads (not the seed: the reference is not stochastic); d_o only when asked.
inline bool same_reference_inputs(const Instance& a, const Instance& b, bool with_d_o) {
  return same_problem(a.problem, b.problem) && same_bits(a.q, b.q) && same_bits(a.k, b.k) && same_bits(a.v, b.v) &&
         same_bits(a.mask, b.mask) && same_bits(a.bias, b.bias) && (!with_d_o || same_bits(a.d_o, b.d_o));
}

// The one-entry memo itself, one per thread and per Tag: the value computed for the last key remembered.
// find(same) returns it when same(key) holds; remember() stores a new pair (invalid while being copied, so a
// throwing copy leaves no half-written entry). Callers compute first and remember only what returned normally.
template <class Tag, class Key, class Value>
struct OneEntry {
  static OneEntry& mine() {
    thread_local OneEntry m;
    return m;
  }
  template <class Same>
  const Value* find(Same same) const {
    return valid && same(key) ? &value : nullptr;
  }
  void remember(const Key& k, const Value& v) {
    valid = false;
    key = k;
    value = v;
    valid = true;
  }
  void remember(const Key& k, Value&& v) {
    valid = false;
    key = k;
    value = std::move(v);
    valid = true;
  }
  bool valid = false;
  Key key;
  Value value;
};

// Instances that cannot change. make_instance_shared (properties/family.h) hands out shared_ptr<const Instance>:
// objects created const, which nobody may write. A memo entry that keeps such a pointer (its "owner") answers a
// call on the same object without comparing the tensors (the fuzz target asks ten properties about one shared
// instance: a dozen full compares per input were ~2% of a run): the object is alive, because the entry holds a
// reference, and const, so its bits are the ones the entry was made from. Other objects are compared as before.
// make_instance_shared records the instance it returns last (adopt_shared below); shared_owner(in) is that pointer
// when `in` is that very object, else null. Only small instances (the memo's sizes) are recorded.
inline std::shared_ptr<const Instance>& last_shared_instance() {
  thread_local std::shared_ptr<const Instance> p;
  return p;
}
inline std::shared_ptr<const Instance> shared_owner(const Instance& in) {
  const std::shared_ptr<const Instance>& p = last_shared_instance();
  return p.get() == &in ? p : nullptr;
}

// A one-entry memo keyed by an instance: its owner when it is a shared one (no copy; found by identity first),
// else a copy compared by `same`.
template <class Tag, class Value>
struct InstanceEntry {
  static InstanceEntry& mine() {
    thread_local InstanceEntry m;
    return m;
  }
  const Instance& key() const { return owner ? *owner : copy; }
  template <class Same>
  const Value* find(const Instance& in, Same same) const {
    if (!valid) return nullptr;
    if (owner && owner.get() == &in) return &value;
    return same(key()) ? &value : nullptr;
  }
  template <class V>
  void remember(const Instance& in, V&& v) {  // invalid while being written (see OneEntry)
    valid = false;
    owner = shared_owner(in);
    if (!owner) copy = in;  // (a stale copy stays allocated while an owner is the key: reused next time)
    value = std::forward<V>(v);
    valid = true;
  }
  bool valid = false;
  std::shared_ptr<const Instance> owner;
  Instance copy;
  Value value;
};

// Instance::validate()'s per-element rules (harness/problem.cpp): Q, K, V, dO values of the input format; a
// keep-mask of 0/1; a bias of fp32 values, neither NaN nor +inf. Everything else it checks (the problem, the
// tensor sizes) is a function of the problem and the sizes alone. FuzzMemo.IncrementalValidation... pins these
// rules to validate() element by element.
inline bool valid_input_value(double x, Format f) { return representable(x, f); }
inline bool valid_bias_value(double x) { return representable(x, Format::kF32) && !std::isnan(x) && x != HUGE_VAL; }
inline bool valid_mask_value(std::uint8_t x) { return x <= 1; }

// Every element of `now` whose bits differ from `was` (same size) satisfies ok(). Blocks of equal bits are
// skipped after a branch-free compare (no memcmp: libFuzzer hooks every unequal memcmp).
template <class T, class Ok>
bool changed_elements_ok(const std::vector<T>& now, const std::vector<T>& was, Ok ok) {
  if (now.size() != was.size()) return false;
  constexpr std::size_t kBlock = 32;
  for (std::size_t b = 0; b < now.size(); b += kBlock) {
    const std::size_t end = std::min(now.size(), b + kBlock);
    bool differ = false;
    for (std::size_t i = b; i < end; ++i) differ |= std::memcmp(&now[i], &was[i], sizeof(T)) != 0;
    if (!differ) continue;
    for (std::size_t i = b; i < end; ++i)
      if (std::memcmp(&now[i], &was[i], sizeof(T)) != 0 && !ok(now[i])) return false;
  }
  return true;
}

// Instance::validate(), remembering the last instance it passed on this thread (the root). An instance with
// bit-identical inputs (Q, K, V, dO, mask, bias, problem) is not checked again: validate is a pure function of
// exactly those fields, and the make_instance → reference_forward → reference_backward chain of one input
// otherwise validates it three times. An instance with the root's problem and tensor sizes is checked only where
// its elements differ from the root's, by the per-element rules above: the rest of validate() is the same
// function of the same problem and sizes, and each unchanged element passed it already. This is what makes the
// transformed copies the properties derive from a validated instance (logit_shift changes one column) cheap to
// validate. Such an instance does not replace the root; anything else is validated in full and becomes the root.
inline void validate_once(const Instance& in) {
  auto& m = InstanceEntry<struct ValidateTag, bool>::mine();
  if (m.valid) {
    if (m.owner && m.owner.get() == &in) return;  // the root itself (a shared, immutable instance)
    const Instance& root = m.key();
    const Format f = in.problem.input_format;
    const auto input_ok = [f](double x) { return valid_input_value(x, f); };
    if (same_problem(in.problem, root.problem) && changed_elements_ok(in.q, root.q, input_ok) &&
        changed_elements_ok(in.k, root.k, input_ok) && changed_elements_ok(in.v, root.v, input_ok) &&
        changed_elements_ok(in.d_o, root.d_o, input_ok) && changed_elements_ok(in.mask, root.mask, valid_mask_value) &&
        changed_elements_ok(in.bias, root.bias, valid_bias_value))
      return;
  }
  in.validate();  // throws: the memo stays as it was
  if (small(in)) m.remember(in, true);
}

// Called by make_instance_shared with the instance it is about to return (validated: make_instance validates every
// instance it builds, through validate_once): later calls see it as shared_owner, and it becomes the validation
// root by identity, so the properties' calls on it and the copies derived from it compare against it directly.
inline void adopt_shared(const std::shared_ptr<const Instance>& in) {
  if (!small(*in)) return;
  last_shared_instance() = in;
  auto& m = InstanceEntry<struct ValidateTag, bool>::mine();
  if (m.valid && m.owner == in) return;
  m.remember(*in, true);  // *in passed validate_once when it was built (its bits have not changed since: const)
}

}  // namespace attncheck::memo
