// bias_confirmation.h — a raw failure of an across-instance (bias) property, checked again on a fresh sample of
// its family before it counts as a finding. Used by both fuzzing front ends: the kernel fuzz target
// (harness/fuzz/kernel_target.cpp, before it writes a finding or aborts) and `attncheck fuzz`
// (harness/cli/fuzz_command.cpp, before it minimises a raw group).
//
// Why. One `unbiased` check at the fuzz target's T = 32 fails an unbiased kernel about once in 3·10^5 (Student's t
// with 31 degrees of freedom past the Šidák z of 6.26, five tensors; property.h's table), and the ε floor does not
// save it there: the correctly rounded oracle's standard error on tied_max at T = 32 is up to 0.013 ulp (seeds
// 1..20), so a sample at z 6.26 has a mean of 0.08 ulp, past ε = 0.05. A campaign makes tens of bias checks a second
// (10^5 and more a night), so a night's fuzzing of a correctly rounding kernel could report a bias that is not
// there. The fresh sample (the family's seed mixed with kConfirmSeed, none of the raw case's instances) at
// T_c = max(128, 4·T) fails an unbiased kernel about once in 4·10^7 (2.8e-8: t with 127 degrees of freedom past
// 6.26, five tensors), so both about once in 10^13; a real bias is seen again with more power than it was found
// with (the standard error halves or better). A bias that is real but sits near ε (fa2's −0.042 ulp lean on low_rank
// with one-sign V, dO, sd 0.0039 over seeds, which the sample mean crosses on 4 of 100 seeds) is not confirmed either: it is below the
// effect size `unbiased` fails. `check` has no such step: its suites are a fixed, small set of checks at the table's
// level.
//
// Invariants: a pure function of (property, kernel, family, budget): the whole sample is drawn (no time budget), so
// the verdict does not depend on the machine; the fresh seed is reseeded(family seed, kConfirmSeed).
// Tests: FuzzTarget.ABiasFailureAFreshSampleDoesNotConfirmIsNotAFinding (ctest -R FuzzTarget), Cli.FuzzReports*.
#pragma once

#include <cstdint>
#include <string>

#include "harness/kernel.h"
#include "properties/property.h"

namespace attncheck {

constexpr std::uint64_t kConfirmSeed = 0x636f6e6669726d;  // "confirm"

struct Confirmation {
  Outcome outcome;         // the property's check on the fresh sample
  Budget budget;           // what it ran with: T_c instances, no time limit
  std::uint64_t seed = 0;  // the fresh family's seed
  bool confirmed() const { return outcome.status == Status::kFail; }
};

// Checks `prop` on a fresh sample of the raw failure's family (raw_budget: the budget the raw check ran with).
Confirmation confirm_on_a_fresh_sample(const Property& prop, const Kernel& kernel, const Family& raw_family,
                                       const Budget& raw_budget);

// Is a failed bias outcome a statistic that a fresh sample should confirm? Not a kernel fault, and not a NaN or
// infinite output where the exact value is finite ("not finite: ..."): those are one wrong value on the instance
// the outcome names, which a fresh sample need not draw again; they are findings as they are.
bool needs_confirmation(const Outcome& raw);
// The non-finite half of that, from a bias outcome's stats alone (a raw case keeps its stats, not its message): the
// statistic names a NaN or infinite output (`not_finite`, props_bias.cpp).
bool names_a_non_finite_output(const nlohmann::json& stats);

// A bias outcome's deciding numbers, "O mean -0.0412 ulp, z -9.1", or "" when its stats lack them.
std::string deciding_numbers(const Outcome& o);

}  // namespace attncheck
