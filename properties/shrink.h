// shrink.h — greedy shrinking of a failing (property, kernel, family) to a minimal failing family.
//
// Strategy (separate from the generators, as RapidCheck separates them): candidates simplify one family field
// at a time — n_q, n_k toward 1, head_dim smaller, batch and heads toward 1, tiles toward 1, ties and rank
// toward 1–2, values toward small integers and powers of two (`quant` mantissa bits, `erange` exponents) —
// and a candidate is accepted only when the same property still fails on it (for `unbiased`, the check
// includes calibration, so an accepted step is never Degenerate). The first accepted candidate restarts the
// scan; shrinking stops when no candidate is accepted, after max_steps, or after max_seconds. The bias budget
// (T) is kept: replays use the budget the failure was found with.
// Then, for a per-instance property (not a statistic over instances, not a kernel fault), the literal phase: the
// failing instance itself, made smaller (one batch, kv head or query head of a group; then rows, keys and head-dim
// columns dropped one at a time) and simpler (each value of Q, K, V, the bias and dO, dO only where the failure is a
// gradient's, to 0, the nearest power of two, 2 or 4 significant bits), while the same failure holds
// (Property::check_literal), the two in turn until neither changes anything. The outcome's `literal` is then the case: a generator stops where its parameters do (fa2's dK on
// tied_max stayed at 8x16 d16 with two heads), an instance does not. Within the same max_seconds.
// Run the tests: ctest -R shrink_test
#pragma once

#include <string>
#include <vector>

#include "properties/property.h"

namespace attncheck {

struct ShrinkOptions {
  // Wall-clock bound per failure. Default 20 s; the environment variable ATTNCHECK_SHRINK_SECONDS overrides
  // it for check_and_shrink (the CLI's suites keep shrinking bounded this way).
  double max_seconds = 20.0;
  int max_steps = 200;
  // The literal phase's own bound (shrink_failure): each value made simpler is a step, and a 4x13 d15 instance has
  // ~500 values in Q, K, V and dO.
  int max_literal_steps = 5000;
};

// Throws Error when ATTNCHECK_SHRINK_SECONDS is set but is not a finite number >= 0 (the CLI asks once before it runs).
ShrinkOptions default_shrink_options();

// The tensor a per-instance failure names: the message's first word after "instance N: " ("O", "LSE", "dQ",
// "delta", ...). A shrink step keeps it, so `accurate` does not trade an LSE failure for an unrelated dQ one.
std::string failure_kind(const std::string& message);

// Simpler neighbours of f, most aggressive first; every one validates.
std::vector<Family> shrink_candidates(const Family& f);

// One cut of the literal phase: the parts of an instance it keeps, as indices into that instance's own, in the order
// given: batches `bs`, kv heads `hks` (each with the query heads `in_group` of its group), query rows `is`, keys `js`
// and head-dim columns `cs`.
struct Cut {
  std::vector<int> bs, hks, in_group, is, js, cs;
};
// The instance made of what `c` keeps of `in` (the scale, flags, format and seed kept; mask and bias cut with the
// scores).
Instance sub_instance(const Instance& in, const Cut& c);
// Whether every query row of `cut` (sub_instance(in, c)) sees a key exactly where its row in `in` did. Cutting keys
// (the causal rule is aligned to the bottom right, j <= i + n_k − n_q; a keep-mask is cut with them) can leave a row
// that sees none, and a failure there is another one of the same tensor (a fully masked row's O and LSE): the literal
// phase takes no such cut. (Which keys a row sees may move, as a smaller family's do.)
bool keeps_rows_seeing(const Instance& in, const Instance& cut, const Cut& c);

// A kernel fault's kind, as shrinking keeps it: "kernel fault: K: crash: killed by SIGSEGV (...)" gives
// "plugin:x: crash: killed by SIGSEGV", an error or a stray write its kind alone ("plugin:x: out_of_bounds"); "" for
// a message that is no kernel fault (kernel_fault_message, harness/problem.h).
std::string fault_signature(const std::string& message);
// The signature without the kernel's name ("crash: killed by SIGSEGV"): what a replay under --kernel compares, and
// what a finding's file name keeps. "" for a message that is no kernel fault.
std::string fault_kind(const std::string& message);
// Whether a fault is shrunk: a crash, an error or a stray write is (each try is one call); a hang is not (each try
// would cost the call's whole time limit).
bool shrinks_fault(const std::string& message);

// Shrinks a failing outcome; returns the final failing outcome (family, instance, stats) with shrink_steps and
// shrink_seconds filled. `failing.status` must be kFail. A kernel fault (`failing.message` from kernel_fault_message)
// shrinks to families whose check faults with the same fault_signature.
Outcome shrink_failure(const Property& p, const Kernel& k, const Budget& b, const Outcome& failing,
                       const ShrinkOptions& opt);

}  // namespace attncheck
