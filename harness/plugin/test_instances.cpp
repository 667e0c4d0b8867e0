// test_instances.cpp — see test_instances.h.
#include "harness/plugin/test_instances.h"

#include <cmath>

#include "kernels/formats.h"

namespace attncheck::plugin_test {
namespace {

// A standard normal from two uniforms of the counter stream (Box–Muller); u1 in (0, 1].
double normal(std::uint64_t seed, std::uint64_t counter) {
  const double u1 = 1.0 - uniform01(seed, 2 * counter);
  const double u2 = uniform01(seed, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::vector<double> draw(std::size_t n, std::uint64_t seed, std::uint64_t stream, Format f) {
  std::vector<double> out(n);
  const std::uint64_t s = mix64(seed ^ mix64(stream));
  for (std::size_t i = 0; i < n; ++i) out[i] = round_to(normal(s, i), f);
  return out;
}

}  // namespace

Problem make_problem(int batch, int heads_q, int heads_kv, int n_q, int n_k, int head_dim, bool causal, bool mask,
                     bool bias) {
  Problem p = Problem::of_shape(batch, heads_q, heads_kv, n_q, n_k, head_dim, causal);
  p.has_mask = mask;
  p.has_bias = bias;
  return p;
}

Instance random_instance(const Problem& p, std::uint64_t seed) {
  Instance in;
  in.problem = p;
  in.seed = seed;
  in.q = draw(p.q_size(), seed, 1, p.input_format);
  in.k = draw(p.kv_size(), seed, 2, p.input_format);
  in.v = draw(p.kv_size(), seed, 3, p.input_format);
  in.d_o = draw(p.q_size(), seed, 4, p.input_format);
  if (p.has_mask) {
    in.mask.resize(p.scores_size());
    const std::uint64_t s = mix64(seed ^ mix64(5));
    for (std::size_t i = 0; i < in.mask.size(); ++i) in.mask[i] = uniform01(s, i) < 0.75 ? 1 : 0;
  }
  if (p.has_bias) in.bias = draw(p.scores_size(), seed, 6, Format::kF32);
  in.validate();
  return in;
}

}  // namespace attncheck::plugin_test
