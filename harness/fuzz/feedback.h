// feedback.h — error-guided feedback: numerical observations bucketed into libFuzzer extra counters.
//
// libFuzzer keeps an input in the corpus when it sets a (counter, hit-count bucket) pair never seen before.
// Code coverage alone says nothing about *how wrong* a kernel's output was, so every run of the kernel
// target also writes what it observed into a counter array in the `__libfuzzer_extra_counters` section
// (libFuzzer clears it before each input and reads it after). Inputs that reach a new error level, a new
// bias statistic level or a new special event stay in the corpus, and the fuzzer climbs towards deep
// numerical failures instead of wandering. Layout of the counters (all indices derived below):
//   [generator g][tensor t][ulp bucket]  max error per tensor (O in bf16 ulps at the exact value, LSE in fp32
//                                         ulps), half-log2 buckets (a finer ladder to climb): 0 exact,
//                                         1..26 for 2^-5 .. 2^7.5+, 27 NaN/inf
//   [generator g][mean bucket]           |mean signed O error| over the instance, same buckets
//   [bias |mean| bucket], [bias |z| bucket]  from the bias property (|z| in half-unit log2 steps)
//   [event]                              NaN/inf out, masked rows, tied maxima (p̄ == 1 for >= 2 keys),
//                                        all O errors of one sign, probe-instance specials
//   [property][status]                   per-property verdicts
// With gcc (no libFuzzer) the array still exists and is simply never read. Feedback can be switched off
// (ATTNCHECK_FUZZ_FEEDBACK=0) to measure what it buys: the counters then stay zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace attncheck::fuzz {

constexpr int kUlpBuckets = 28;
constexpr int kMaxGenerators = 32;  // generators beyond this share the last slot
constexpr int kTensors = 2;         // O, LSE
constexpr int kMaxProperties = 32;
constexpr int kStatuses = 4;

enum class Event : int {
  kNanOut = 0,
  kInfOut,
  kMaskedRow,
  kTiedMax2,      // a row whose max score is reached by exactly 2 keys (p̄ == 1 twice)
  kTiedMax3Plus,
  kNearTie,       // second largest score within one bf16 ulp of the max
  kOneSignErrors, // every nonzero O error of the instance has the same sign (>= 4 of them)
  kProbeNanOut,
  kProbeInfOut,
  kProbeRejected, // the kernel rejected the probe instance with an Error
  kBiasDegenerate,
  kBiasSkipped,
  // from the CPU model's ModelTrace (kernels/cpu/flash_model.h), hit count = how often it happened
  kPOne,            // rows where a visible p̄ was exactly 1 as fed to P̄V
  kExactTieTile,    // (row, tile) steps with >= 2 scores equal to the tile max
  kPolicyTie,       // paper fix: c > 1 within tolerance
  kShifted,         // paper fix: the max was shifted
  kUnshiftedTie,    // paper fix: c > 1 but r == 0, left unchanged (the published hole)
  kClampedSum,
  kZeroRowSum,
  kCount
};

// What one kernel run showed (filled by the target, bucketed here).
struct Observation {
  int generator = 0;
  double max_ulp_o = 0;          // NaN when a NaN/inf appeared where the exact value is finite
  double max_ulp_lse = 0;
  double mean_signed_ulp_o = 0;
  int nonzero_errors = 0;
  int positive_errors = 0;
};

// Half-log2 bucket of a nonnegative error in ulps: 0 for exactly 0, kUlpBuckets-1 for NaN/inf, else
// 1..kUlpBuckets-2 (1 ulp -> 11).
int ulp_bucket(double ulps);

void set_enabled(bool on);
bool enabled();
// Error-only mode (ATTNCHECK_FUZZ_FEEDBACK=error): only the per-generator O error ladder, nothing else.
void set_error_only(bool on);
void record(const Observation& o);
void record_event(Event e, int times = 1);
void record_bias(double abs_mean_ulp, double abs_z);
void record_property(int property_index, int status);
// The counter array (for tests: read what the last input set).
const std::uint8_t* counters();
std::size_t counter_count();
void clear();
// The nonzero counters, and adding such a list again (saturating, as every record does). The kernel target
// replays a family's feedback this way: it sets the counters aside (take_counters: returns them and clears),
// runs the family, keeps nonzero_counters(), and adds back what it set aside.
using CounterDelta = std::vector<std::pair<std::uint16_t, std::uint8_t>>;
CounterDelta nonzero_counters();
CounterDelta take_counters();
void add_counters(const CounterDelta& added);

}  // namespace attncheck::fuzz
