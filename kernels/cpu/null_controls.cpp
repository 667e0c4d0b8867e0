// null_controls.cpp — oracle and stochastic: the fp64 reference rounded once (see null_controls.h).
// Run the tests: ctest -R BuiltinKernels
#include "kernels/cpu/null_controls.h"

#include <cstring>

#include "reference/reference.h"

namespace attncheck {
namespace {

enum Stream : std::uint64_t { kO = 0, kLse = 1, kDq = 2, kDk = 3, kDv = 4, kDelta = 5 };

std::uint64_t fold(std::uint64_t h, std::uint64_t x) { return mix64(h ^ mix64(x)); }

std::uint64_t fold_doubles(std::uint64_t h, const std::vector<double>& xs) {
  h = fold(h, xs.size());
  for (double x : xs) {
    std::uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    h = fold(h, u);
  }
  return h;
}

void round_nearest(std::vector<double>& xs, Format f) {
  for (double& x : xs) x = round_to(x, f);
}

void round_random(std::vector<double>& xs, Format f, std::uint64_t base, Stream t) {
  const std::uint64_t seed = mix64(base + t);
  for (std::size_t e = 0; e < xs.size(); ++e) xs[e] = round_stochastic(xs[e], f, uniform01(seed, e));
}

void check_backward(const Instance& in, const char* who) {
  if (in.d_o.size() != in.problem.q_size())
    throw Error(std::string(who) + ": the instance has no dO (or the wrong size)");
}

}  // namespace

std::uint64_t input_hash(const Instance& in, bool include_d_o) {
  const Problem& p = in.problem;
  std::uint64_t h = 0x6174746e636865ull;  // "attnche"
  for (std::uint64_t x : {std::uint64_t(p.batch), std::uint64_t(p.heads_q), std::uint64_t(p.heads_kv),
                          std::uint64_t(p.n_q), std::uint64_t(p.n_k), std::uint64_t(p.head_dim),
                          std::uint64_t(p.causal), std::uint64_t(p.has_mask), std::uint64_t(p.has_bias),
                          std::uint64_t(p.input_format)})
    h = fold(h, x);
  h = fold_doubles(h, {p.scale});
  h = fold_doubles(h, in.q);
  h = fold_doubles(h, in.k);
  h = fold_doubles(h, in.v);
  h = fold(h, in.mask.size());
  for (std::uint8_t m : in.mask) h = fold(h, m);
  h = fold_doubles(h, in.bias);
  if (include_d_o) h = fold_doubles(h, in.d_o);
  return h;
}

ForwardOutput oracle_forward(const Instance& in) {
  ReferenceForward r = reference_forward(in);
  round_nearest(r.o, Format::kBF16);
  round_nearest(r.lse, Format::kF32);
  return {std::move(r.o), std::move(r.lse)};
}

BackwardOutput oracle_backward(const Instance& in) {
  check_backward(in, "oracle");
  ReferenceBackward r = reference_backward(in);
  round_nearest(r.dq, Format::kBF16);
  round_nearest(r.dk, Format::kBF16);
  round_nearest(r.dv, Format::kBF16);
  round_nearest(r.delta, Format::kF32);
  return {std::move(r.dq), std::move(r.dk), std::move(r.dv), std::move(r.delta)};
}

ForwardOutput stochastic_forward(const Instance& in) {
  ReferenceForward r = reference_forward(in);
  const std::uint64_t base = mix64(in.seed ^ input_hash(in, false));
  round_random(r.o, Format::kBF16, base, kO);
  round_random(r.lse, Format::kF32, base, kLse);
  return {std::move(r.o), std::move(r.lse)};
}

BackwardOutput stochastic_backward(const Instance& in) {
  check_backward(in, "stochastic");
  ReferenceBackward r = reference_backward(in);
  const std::uint64_t base = mix64(in.seed ^ input_hash(in, true));
  round_random(r.dq, Format::kBF16, base, kDq);
  round_random(r.dk, Format::kBF16, base, kDk);
  round_random(r.dv, Format::kBF16, base, kDv);
  round_random(r.delta, Format::kF32, base, kDelta);
  return {std::move(r.dq), std::move(r.dk), std::move(r.dv), std::move(r.delta)};
}

}  // namespace attncheck
