// test_instances.h — deterministic random attention instances for the plugin tests (no dependency on the
// property generators, so the loader is testable on its own).
//
// Q, K, V, dO are bf16 roundings of standard normal draws (Box–Muller on formats.h's counter-based
// uniform01), so scores spread over a few units and the running max moves between key tiles; the keep-mask
// keeps each key with probability 3/4; bias values are fp32 roundings of normals. Same (problem, seed), same
// instance. Used by plugin_loader_test and example_plugin_test.
#pragma once

#include <cstdint>

#include "harness/problem.h"

namespace attncheck::plugin_test {

Instance random_instance(const Problem& p, std::uint64_t seed);

// A Problem with the default scale and bf16 inputs.
Problem make_problem(int batch, int heads_q, int heads_kv, int n_q, int n_k, int head_dim, bool causal = false,
                     bool mask = false, bool bias = false);

}  // namespace attncheck::plugin_test
