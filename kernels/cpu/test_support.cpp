// test_support.cpp — deterministic random instances for the kernels/cpu unit tests (see test_support.h).
#include "kernels/cpu/test_support.h"

#include <cmath>

namespace attncheck::test {

Problem make_problem(int batch, int heads_q, int heads_kv, int n_q, int n_k, int d, bool causal) {
  return Problem::of_shape(batch, heads_q, heads_kv, n_q, n_k, d, causal);
}

double normal(std::uint64_t seed, std::uint64_t counter) {
  const double u1 = 1.0 - uniform01(seed, 2 * counter);  // in (0, 1]: log is finite
  const double u2 = uniform01(seed, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

Instance random_instance(const Problem& p, std::uint64_t seed, double v_scale) {
  Instance in;
  in.problem = p;
  in.seed = seed;
  std::uint64_t counter = 0;
  auto fill = [&](std::vector<double>& x, std::size_t n, double scale) {
    x.resize(n);
    for (double& e : x) e = round_to(scale * normal(seed, counter++), Format::kBF16);
  };
  fill(in.q, p.q_size(), 1.0);
  fill(in.k, p.kv_size(), 1.0);
  fill(in.v, p.kv_size(), v_scale);
  fill(in.d_o, p.q_size(), v_scale);
  if (p.has_mask) {
    in.mask.resize(p.scores_size());
    for (auto& m : in.mask) m = uniform01(seed ^ 0x6d61736bull, counter++) < 0.8;
  }
  if (p.has_bias) {
    in.bias.resize(p.scores_size());
    for (double& b : in.bias) b = round_to(normal(seed ^ 0x62696173ull, counter++), Format::kF32);
  }
  in.validate();
  return in;
}

}  // namespace attncheck::test
