// host_packing.h — the host side shared by the CUDA kernel wrappers (cuda_kernels.cpp, cudnn_kernel.cpp):
// the instance checks, attncheck's tensors (doubles holding bf16 values) to bf16 bit rows zero-padded to the
// kernel's head dim, back again, a small parallel_for for big batches, and the backward's poisoned outputs.
// Host code only.
//
// Invariants: a value that is not exactly a bf16 value is an Error naming it (never silently rounded); padding
// columns are zero (zeros add nothing to q·k and give zero output columns, so a padded problem's results equal
// the unpadded one's bit for bit); unpack_rows reports elements still holding the output poison 0xFFFF (an
// all-ones NaN no arithmetic produces, device_buffer.h), so the caller can say which output was left unwritten.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/kernel.h"
#include "harness/problem.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/formats.h"

namespace attncheck::cuda {

// The kernels exist for head dims 64 and 128; smaller ones run zero-padded.
inline int padded_dim(int d) { return d <= 64 ? 64 : 128; }

// What every CUDA kernel checks before it packs an instance: the kernel `name` can run the problem (its caps), the
// problem is valid, and Q, K, V, keep-mask and bias have the problem's sizes. Error naming the first that fails.
inline void check_instance(const std::string& name, const KernelCaps& caps, const Instance& in, bool need_backward) {
  const std::string why = caps.unsupported_reason(in.problem, need_backward);
  if (!why.empty()) throw Error("kernel " + name + " cannot run " + in.problem.describe() + ": " + why);
  in.problem.validate();
  if (in.q.size() != in.problem.q_size() || in.k.size() != in.problem.kv_size() ||
      in.v.size() != in.problem.kv_size())
    throw Error("kernel " + name + ": Q, K, V sizes do not match " + in.problem.describe());
  if (in.problem.has_mask && in.mask.size() != in.problem.scores_size())
    throw Error("kernel " + name + ": keep-mask has the wrong size for " + in.problem.describe());
  if (in.problem.has_bias && in.bias.size() != in.problem.scores_size())
    throw Error("kernel " + name + ": bias has the wrong size for " + in.problem.describe());
}

// x as bf16 bits; Error (prefixed by `who`, naming `what`) when x is not exactly a bf16 value. A NaN is one (bf16
// has NaNs; a kernel's forward gives them, e.g. O from overflowing scores, and its backward must take them back): it
// goes in as the quiet NaN 0x7FC0 (any NaN computes the same; not the output poison 0xFFFF).
constexpr std::uint16_t kBf16CanonicalNan = 0x7fc0;
inline std::uint16_t to_bf16_bits(double x, const char* who, const char* what) {
  if (std::isnan(x)) return kBf16CanonicalNan;
  const float f = static_cast<float>(x);
  const std::uint32_t u = float_to_bits(f);
  if ((u & 0xffffu) != 0 || static_cast<double>(f) != x)
    throw Error(std::string(who) + ": " + what + " value " + std::to_string(x) + " is not a bf16 value");
  return static_cast<std::uint16_t>(u >> 16);
}

// Rows of width d (doubles) into rows of width kd (bf16 bits, zero-padded), starting at dst. The loop has no
// branch (it vectorises): a row's non-bf16 values are noticed after the row and named by to_bf16_bits.
inline void pack_rows(const std::vector<double>& src, int d, int kd, std::uint16_t* dst, const char* who,
                      const char* what) {
  const std::size_t rows = src.size() / std::size_t(d);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* s = &src[r * d];
    std::uint16_t* o = dst + r * kd;
    std::uint32_t bad = 0;
    for (int c = 0; c < d; ++c) {
      const float f = static_cast<float>(s[c]);
      const std::uint32_t u = float_to_bits(f);
      const bool nan = s[c] != s[c];
      bad |= nan ? 0u : (u & 0xffffu) | std::uint32_t(static_cast<double>(f) != s[c]);
      o[c] = nan ? kBf16CanonicalNan : static_cast<std::uint16_t>(u >> 16);
    }
    if (bad)
      for (int c = 0; c < d; ++c) (void)to_bf16_bits(s[c], who, what);  // throws, naming the value
    std::fill(o + d, o + kd, std::uint16_t(0));
  }
}

// bf16 rows of width kd (the first d columns used) -> doubles. `poisoned`, when given, is set when an element
// still holds the output poison 0xFFFF (checked here, in a parallel unpack, instead of a serial pass).
inline void unpack_rows(const std::uint16_t* src, std::size_t rows, int d, int kd, std::vector<double>& out,
                        bool* poisoned = nullptr) {
  out.resize(rows * d);
  std::uint32_t poison = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < d; ++c) {
      const std::uint16_t b = src[r * kd + c];
      poison |= std::uint32_t(b == 0xffffu);
      out[r * d + c] = bits_to_float(std::uint32_t(b) << 16);
    }
  if (poisoned) *poisoned = poison != 0;
}

// forward_many's batching: instances that one launch can run together (equal key(problem), which holds
// everything the launch depends on except the batch), concatenated along the batch dimension. A launch's batch is
// an int (FwdParams, cudnn::SdpaShape): a group past INT_MAX is an Error here, before any CUDA call, not a
// negative batch after the cast.
struct BatchGroup {
  std::vector<std::size_t> members;   // indices into the caller's instances, in their order
  std::vector<std::size_t> batch_at;  // first batch entry of each member; back() = the launch's batch
  std::size_t total_batch() const { return batch_at.back(); }
};
template <class KeyFn>
std::vector<BatchGroup> group_for_launch(const std::vector<const Instance*>& ins, KeyFn key) {
  std::map<decltype(key(ins[0]->problem)), std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < ins.size(); ++i) by_key[key(ins[i]->problem)].push_back(i);
  std::vector<BatchGroup> out;
  for (auto& entry : by_key) {
    BatchGroup g;
    g.members = std::move(entry.second);
    g.batch_at.assign(g.members.size() + 1, 0);
    for (std::size_t m = 0; m < g.members.size(); ++m)
      g.batch_at[m + 1] = g.batch_at[m] + static_cast<std::size_t>(ins[g.members[m]]->problem.batch);
    if (g.total_batch() > std::size_t(std::numeric_limits<int>::max()))
      throw Error("forward_many: " + std::to_string(g.members.size()) + " instances of one shape add up to a batch " +
                  "of " + std::to_string(g.total_batch()) + ", more than a launch takes (its batch is an int, at " +
                  "most " + std::to_string(std::numeric_limits<int>::max()) + "); pass them in several calls");
    out.push_back(std::move(g));
  }
  return out;
}

// Runs fn(i) for i in [0, n) on up to hardware_concurrency threads (16 at most); small n runs inline.
// The first exception a worker throws (e.g. a non-bf16 input) is rethrown here after all workers joined.
template <class Fn>
void parallel_for(std::size_t n, Fn fn) {
  const std::size_t threads = std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), 16);
  if (n < 64 || threads == 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      try {
        for (std::size_t i = w; i < n; i += threads) fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  if (first) std::rethrow_exception(first);
}

// A backward pass's outputs on the device — δ (fp32, one per query row) and dQ, dK, dV (bf16 rows of the padded
// head dim kd) — NaN-poisoned with guard margins, and their checked download into a BackwardOutput of head dim d.
struct PoisonedGradients {
  PoisonedGradients(std::size_t q_rows, std::size_t kv_rows, int kd, const std::string& who)
      : q_rows(q_rows), kv_rows(kv_rows), kd(kd), delta(q_rows, who + " backward delta"),
        dq(q_rows * kd, who + " backward dQ"), dk(kv_rows * kd, who + " backward dK"),
        dv(kv_rows * kd, who + " backward dV") {}
  // Call after the kernel finished (synchronised).
  BackwardOutput fetch(int d) const {
    BackwardOutput r;
    const std::vector<float> hdelta = delta.fetch_checked();
    r.delta.assign(hdelta.begin(), hdelta.end());
    unpack_rows(dq.fetch_checked().data(), q_rows, d, kd, r.dq);
    unpack_rows(dk.fetch_checked().data(), kv_rows, d, kd, r.dk);
    unpack_rows(dv.fetch_checked().data(), kv_rows, d, kd, r.dv);
    return r;
  }
  std::size_t q_rows, kv_rows;
  int kd;
  PoisonedOutput<float> delta;
  PoisonedOutput<std::uint16_t> dq, dk, dv;
};

}  // namespace attncheck::cuda
