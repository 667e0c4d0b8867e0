// property.h — properties of attention kernels, each named as a sentence, and what running one returns.
//
// A property is checked on (kernel, family). Per-instance properties draw instances 0..budget-1 of the
// family and stop at the first failing instance; across-instance properties (unbiasedness) compute a
// statistic over T instances. A property that does not apply to a kernel (capabilities) is Skipped; a bias
// check whose kernel fails only on tensors where a null control (oracle, stochastic) fails too is Degenerate and is
// never reported as a kernel failure. Failures are shrunk (shrink.h) before they are reported or saved.
// Everything here is deterministic: same kernel, family and budget give the same Outcome.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/kernel.h"
#include "properties/family.h"

namespace attncheck {

enum class Status { kPass, kFail, kSkip, kDegenerate };
const char* status_name(Status s);  // "pass", "fail", "skip", "degenerate"
std::optional<Status> status_from_name(const std::string& name);  // status_name's inverse; nothing for another word

// The fewest instances `unbiased` tests a tensor with. Its threshold z_m (z_crit = 6, Šidák-adjusted: 6.26 for five
// tensors, 6.0 for one) is a normal quantile, but z = mean/(sd/√T) is Student's t with T − 1 degrees of freedom
// when the per-instance means are normal, and t's tails are far heavier at 6σ. The real level per check (five
// tensors; one tensor in brackets), 1 − (1 − 2·P(t_{T−1} ≥ z_m))^m, by the regularized incomplete beta function:
//   T = 4: 4e-2   T = 8: 2.1e-3   T = 16: 7.7e-5   T = 24: 1.1e-5 (4.1e-6)   T = 32: 3.0e-6   T = 64: 1.9e-7 (1.1e-7)
// against the nominal 2e-9. Below T = 24 an unbiased kernel fails more often than about once in 10^5 checks, so
// `unbiased` skips a budget of fewer instances (saying so), a time budget never stops it short of 24, and a tensor
// with fewer usable instances (exact values 0 or not finite) is not tested. At the default T = 64 a false failure
// is about one check in 5·10^6, before the ε floor and the null-control calibration, which lower it further.
// (An instance-level coin, every element ±1 ulp with one sign per instance, is not normal: at T = 24 its |z| is
// 7.23 when 22 of 24 signs agree and 5.44 at 21, so it fails with probability 2·(1 + 24 + 276)/2^24 = 3.6e-5;
// statistics_test.cpp runs it.)
inline constexpr int kMinBiasInstances = 24;
// The most instances `unbiased` takes (2^20). A check fails only with |mean| >= ε (0.05 ulp) and |z| >= z_m (~6.3),
// z = mean·√T/sd: at T = 2^20, for every tensor with sd below ε·√T/z_m ≈ 8 ulps a mean of ε already has |z| >= z_m,
// so the z test no longer binds there and more instances only narrow the mean (its standard error sd/√T, under
// 0.008 ulp). The statistic keeps ~20 bytes per instance and tensor (mean, away-from-zero mean, index: five tensors
// ~100 MiB here); a case file asking 10^9 grew without bound. Past it the check skips, saying so.
inline constexpr int kMaxBiasInstances = 1 << 20;

struct Budget {
  int instances = 64;          // per-instance properties: how many instances to try; bias: T
  double seconds = 0;          // 0 = no time limit; else stop drawing instances after this long
  // bias: fail only when |mean| >= epsilon_ulp ... ε is an effect size, not a noise bound (z is the noise test):
  // the smallest mean bias worth a failure. It sits between what correct rounding shows and what the paper's
  // failure shows: the correctly rounded `oracle` reaches |mean| 0.012 ulp on the default and bias suites (O on
  // tied_max_negative; `stochastic` 0.006), a margin of 4x; the paper's biased kernel shows 0.17-0.19 ulp in O on
  // the suite's four tie families as checked (T = 64, z 21-22; 0.161-0.199 on tied_max over seeds 1..100), 3.2x or
  // more above ε. (The README table's 0.22-0.24 ulp, z 7.7, are the shrunk minimal families, e.g. one query, three
  // keys, head dim 1: not the families a check first measures.) A bias below ε can still be significant (fa2's dV
  // leans +0.02 ulp at z 7.5-8.6 on the tie families) and is reported in the stats, not failed.
  // Those null numbers are the suites' own seeds. Over other seeds (`check --seed N`, bias suite, 2026-12-02) the
  // null sample means reach 0.020 ulp at T = 64 (oracle O, tied_max, N = 91; N = 1..100; stochastic 0.012) and
  // 0.029 at T = 24 (oracle O, max_zero, N = 37; N = 1..40): a margin of 2.5x and 1.7x, not 4x. The nulls still
  // never failed (0 of 2,600 checks at T = 64, 0 of 1,040 at T = 24) because z holds them too: their largest |z|
  // over those runs is 4.6 and 3.9 against z_m = 6.26 (properties_test.cpp runs N = 1..8 at T = 24).
  // At the ties (`unbiased_at_ties`, props_bias.cpp; seeds 1..100, default and bias suites, T = 64) the strata are
  // noisier: the oracle's largest mean is 0.037 ulp (dV:tied on the one-in-eight families, z −4.1), a margin of 1.4x,
  // and the nulls' largest |z| is 4.2: no failure in their 1,600 checks (8 families × 100 seeds × 2 controls; the
  // default suite's two at-ties entries repeat bias-suite checks); z carries the margin there.
  // ε is a hard line on a sample mean, so a kernel whose true mean lies within about two standard errors of it
  // flips with the seed: paper-fixed's dV on tied_max (−0.046 ulp, sd 0.0044 over 100 seeds, z −7.6 to −14.0) fails
  // 18 of 100 seeds at T = 64, 9 of 40 at T = 24 and 0 of 25 at T = 256; fa2's O on `low_rank, one-sign V, dO`
  // (−0.042 ulp, sd 0.0039) fails 4 of 100. A larger T settles such a verdict; ε and z_crit are unchanged here.
  double epsilon_ulp = 0.05;
  double z_crit = 6.0;         // ... and |z| >= z_crit (adjusted for the number of tensors tested)
};

// How a failure on a literal instance names it ("literal instance: dK(b0,hk0,j1,c0): ..."), where a family's
// instance reads "instance 39: ...".
inline constexpr const char* kLiteralInstance = "literal instance";

struct Outcome {
  std::string property;
  std::string kernel;
  Family family;               // after shrinking, when it failed
  // Set when the failing input is a literal instance (shrink.h: shrinking edited the family's instance itself, shape
  // and values): then it is the case, and `family` and `instance_index` name the instance it was shrunk from.
  std::shared_ptr<const Instance> literal;
  Status status = Status::kPass;
  std::string message;         // one line: why it failed / was skipped
  std::uint64_t instance_index = 0;     // the failing instance (per-instance properties)
  int instances_run = 0;
  nlohmann::json stats;        // property-specific numbers: max error, bound, mean ulp, z, T, away-from-zero ...
  std::string report;          // the human-readable minimal case (inputs, scores with ties marked, outputs, errors)
  double seconds = 0;          // time to first failure (or total time when it passed)
  double shrink_seconds = 0;
  int shrink_steps = 0;
  // A shrunk failure's verdict on the family as checked, before shrinking: the effect on the suite's family (the
  // shrunk family's statistic is the minimal case's, not the effect size: paper's O on tied_max is z 7.7 shrunk, 22.4
  // as checked). Empty and null where nothing was shrunk.
  std::string message_checked;
  nlohmann::json stats_checked;
};

struct Property {
  std::string name;        // identifier: "unbiased", "accurate", "constant_v", ...
  std::string sentence;    // "O, δ, dQ, dK, dV carry no systematic rounding bias", ...
  bool across_instances = false;
  bool needs_backward = false;
  // Check the property without shrinking.
  std::function<Outcome(const Kernel&, const Family&, const Budget&)> check;
  // Per-instance properties: the same check on one literal instance (run_literal, property_util.h; the family gives
  // the tiles). Empty for a statistic over instances.
  std::function<Outcome(const Kernel&, const Family&, const std::shared_ptr<const Instance>&)> check_literal;
};

const std::vector<Property>& all_properties();
const Property& get_property(const std::string& name);  // throws Error listing the known names

// Check, and when it fails shrink the family (and instance) to a minimal failing case and fill `report`.
Outcome check_and_shrink(const Property& p, const Kernel& k, const Family& f, const Budget& b);

// A suite: which properties run on which families.
struct SuiteEntry {
  std::string property;
  Family family;
  std::string label;  // how reports name this entry's family ("tied_max, tiles 8x8"); "" = the generator
};
std::vector<SuiteEntry> suite(const std::string& name);  // "default", "bias", "gpu", "quick"; throws Error otherwise
std::vector<std::string> suite_names();
std::string suite_purpose(const std::string& name);  // one line: what the suite is for (`list suites`, README)
// The seed of a suite entry's family in a run with seed N (`attncheck check --seed N`): its own seed mixed with N, so
// another N draws other instances of the same families.
std::uint64_t reseeded(std::uint64_t family_seed, std::uint64_t run_seed);

}  // namespace attncheck
