// kernel_target.h — the body of the kernel fuzz target, shared by the libFuzzer entry point and the replay
// main (so gcc, gdb and CI run exactly the code libFuzzer runs).
//
// One input = one decoded FuzzInput (fuzz_input.h). run_input:
//   1. applies the kernel's capabilities to the family (drops mask/bias/GQA the kernel lacks),
//   2. runs the kernel on instance 0 and the fp64 reference, records the error and events as feedback,
//   3. runs the kernel on the probe instance (instance 0 + value edits) for sanitizer-visible faults,
//   4. checks every per-instance property on the family (Budget::instances = ATTNCHECK_FUZZ_INSTANCES), through
//      a MemoKernel (memo_kernel.h: the kernel runs once per distinct instance; `deterministic` gets the kernel),
//   5. when the input's bias flag is set, checks the across-instance (bias) properties on a small batch; a failure
//      is checked again on a fresh sample of the family (bias_confirmation.h: one check at T = 32 fails an unbiased
//      kernel about once in 3·10^5) and is a finding only when that fails too. One the fresh sample does not confirm
//      is said on stderr in one line ("attncheck-fuzz: NOT CONFIRMED, not a finding: ..."), written nowhere, and
//      not a crash (RunResult::unconfirmed).
// Steps 2, 4 and 5 depend on the family alone, so a family met again (other value edits, the bias flag) replays
// them from memos (family_memo_, bias_memo_): same verdicts, findings and feedback counters, and only the probe
// runs (tests FuzzTarget.FamilyReplay*, FuzzTarget.BiasBatch*).
// A property failure is a finding: the case is written FIRST (write_finding into the findings dir), its
// path and replay command printed, and then the process abort()s so libFuzzer keeps the input as an artifact.
// An attncheck::Error (a generator or kernel rejecting the input) is not a finding: the input is skipped.
// Any other exception escapes, which libFuzzer reports as a crash (bad input must give an Error, never that).
//
// Environment (read once):
//   ATTNCHECK_FUZZ_KERNEL     kernel under test (default "paper"); "planted" = the test-only kernel of
//                             planted_kernel.h (a deep defect for the feedback A/B test)
//   ATTNCHECK_FUZZ_FINDINGS   findings dir (default corpus/findings)
//   ATTNCHECK_FUZZ_FEEDBACK   0 disables the error-guided extra counters (for A/B measurements);
//                             "error" keeps only the per-generator O error ladder
//   ATTNCHECK_FUZZ_INSTANCES  per-instance property budget (default 1: instance 0, the one observed)
//   ATTNCHECK_FUZZ_BIAS_T     bias property batch size T (default 32, at least 24: property.h)
//   ATTNCHECK_FUZZ_PROPERTIES comma-separated property names to check (default: all but unbiased_at_ties, which
//                             would draw a second batch of T instances on every bias input: name it to add it)
//   ATTNCHECK_FUZZ_CONFIRM_BIAS  0 = a bias failure is a finding as it is, unconfirmed (step 5): for a caller that
//                             confirms each group itself (`attncheck fuzz` passes it); default 1
//   ATTNCHECK_FUZZ_QUIET      1 = no per-finding text on stderr besides the path
//   ATTNCHECK_FUZZ_CONTINUE   1 = keep fuzzing after a finding (no abort): the first finding of each
//                             (property, generator) pair is written and printed, later ones only counted.
//                             Used by the smoke tests and `attncheck fuzz`, so one run sees every kind.
//   ATTNCHECK_FUZZ_PLUGINS    plugin libraries to load before the kernel is looked up, one PATH[:OPTIONS] per line
//                             (what `attncheck fuzz --plugin` passes): a plugin:<name> kernel is then fuzzed through
//                             the same isolated, guarded calls as `check`; ATTNCHECK_PLUGIN_* apply as there. A kernel
//                             fault (crash, hang, error, stray write) is a finding of the property whose check met it,
//                             replayed by `attncheck replay --plugin`; on the probe instance alone (the family's own
//                             instance ran) it abort()s, so libFuzzer keeps the input as a crash artifact.
//   ATTNCHECK_FUZZ_ERROR_FD   a file descriptor (3 or more, inherited) on which a finding that could not be saved is
//                             said, one line each ("attncheck-fuzz: error: cannot save a finding (...)"): `attncheck
//                             fuzz` passes a pipe's write end, which fork-mode jobs inherit though their stderr goes
//                             to libFuzzer's temporary logs
//   ATTNCHECK_FUZZ_PLANTED_BASE      the planted kernel's base kernel (default fa2)
//   ATTNCHECK_FUZZ_PLANTED_FEATURES  how many input features its defect needs at once (default 9; planted_kernel.h)
// Read elsewhere, not checked by config_from_env: ATTNCHECK_FUZZ_STATS=1 prints what the process reached at exit
// (runs, long and multi-tile runs, largest O error, error cells; KernelTarget's constructor, any other value is
// off); ATTNCHECK_FUZZ_MUTATOR=0 turns the structure-aware mutator off (kernel_fuzzer.cpp);
// ATTNCHECK_FUZZ_DEVICE_PIN=0 turns off one GPU per libFuzzer worker (device_slot.h).
// config_from_env() throws Error naming the variable for a value it cannot read (an unknown property, a number out
// of range, FEEDBACK other than 1/0/error, QUIET, CONTINUE or CONFIRM_BIAS other than 0/1): the target exits 2 at its start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/fuzz/feedback.h"
#include "harness/fuzz/fuzz_input.h"
#include "harness/fuzz/memo_kernel.h"
#include "harness/fuzz/planted_kernel.h"
#include "harness/kernel.h"
#include "properties/property.h"
#include "reference/memo.h"

namespace attncheck::fuzz {

struct TargetConfig {
  std::string kernel = "paper";
  std::string findings_dir = "corpus/findings";
  bool feedback = true;
  bool feedback_error_only = false;
  int instances = 1;
  int bias_instances = 32;
  bool confirm_bias = true;  // step 5: a bias failure is a finding only when a fresh sample fails too
  std::vector<std::string> properties;  // empty = all
  bool quiet = false;
  bool keep_going = false;
  std::string planted_base = "fa2";
  int planted_features = 9;
  std::vector<std::string> plugins;  // plugin libraries to load first (PATH or PATH:OPTIONS, as --plugin takes them)
  int error_fd = -1;                 // where a failed save is also said (ATTNCHECK_FUZZ_ERROR_FD), or -1
};

TargetConfig config_from_env();

// What run_input saw (for tests and the replay main).
struct RunResult {
  bool skipped = false;         // the input was rejected with an Error (message in `message`)
  bool finding = false;         // a property failed (then `finding_path` holds the written case)
  std::string property;
  std::string finding_path;
  std::string save_error;       // a finding whose case could not be written: why (also on stderr; retried next time)
  std::string message;
  std::string unconfirmed;      // a bias failure that a fresh sample did not confirm: the line said (not a finding)
  double max_ulp_o = 0;
};

// A memo by family: its canonical bytes (encode_input), found by their hash and confirmed bit for bit with
// memo::same_bits (libc's memcmp is hooked by libFuzzer on every unequal call). Cleared when it holds kMaxEntries.
template <class V, std::size_t kMaxEntries>
class FamilyMemo {
 public:
  V* find(const std::vector<std::uint8_t>& key) {
    const auto it = m_.find(hash(key));
    return it != m_.end() && memo::same_bits(it->second.first, key) ? &it->second.second : nullptr;
  }
  V& put(const std::vector<std::uint8_t>& key, V v) {
    if (m_.size() >= kMaxEntries) m_.clear();
    auto& slot = m_[hash(key)];  // a colliding other family is replaced
    slot = {key, std::move(v)};
    return slot.second;
  }

 private:
  static std::uint64_t hash(const std::vector<std::uint8_t>& k) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (std::uint8_t b : k) h = (h ^ b) * 1099511628211ull;
    return h;
  }
  std::unordered_map<std::uint64_t, std::pair<std::vector<std::uint8_t>, V>> m_;
};

class KernelTarget {
 public:
  explicit KernelTarget(TargetConfig cfg);
  // Runs one input. On a finding: writes the case, then abort() unless abort_on_finding is false.
  RunResult run_input(const std::uint8_t* data, std::size_t size, bool abort_on_finding = true);
  const TargetConfig& config() const { return cfg_; }
  std::uint64_t bias_batches_run() const { return bias_batches_; }  // fresh step-5 batches (not from bias_memo_)
  std::uint64_t family_replays() const { return family_replays_; }  // inputs whose steps 2 and 4 came from family_memo_

 private:
  double observe(const Family& fam, const Instance& inst);  // step 2 (kernel_target.cpp)

  TargetConfig cfg_;
  const Kernel* kernel_ = nullptr;
  std::unique_ptr<Kernel> planted_;
  bool takes_tiles_ = true;             // kernel_->with_tiles gives a tiled copy (else the family's tiles are 0)
  std::unique_ptr<MemoKernel> memo_;  // kernel_ behind a one-input memo, for every property but `deterministic`
  std::vector<const Property*> per_instance_, across_;
  std::vector<int> property_index_;  // index into all_properties() for the feedback slot
  std::vector<char> lend_once_;      // per per_instance_ entry: `deterministic` (the memo lends it one run)
  std::set<std::pair<std::string, std::string>> reported_;  // keep_going: (property, generator) written
  // Memos by family (its canonical encoding, edits and the bias flag left out). Steps 2, 4 and 5 depend on the
  // family alone, not on the value edits, and every kernel is a function of its input, so a family met again
  // gives the same observations, verdicts and feedback: they are replayed instead of recomputed.
  struct FamilyRun {
    std::shared_ptr<const Instance> inst;  // instance 0, for the probe
    CounterDelta added;                    // what steps 2 and 4 added to the feedback counters
    double max_ulp_o = 0;
    std::vector<std::pair<const Property*, Outcome>> failures;  // step 4's, reported again in the same order
    bool faulted = false;  // the kernel faulted on instance 0 (step 2): the family's own finding says so
  };
  // Steps 2 and 4. An instance is at most ~330 KB at the decoder's largest shape (tens of KB typically).
  FamilyMemo<FamilyRun, 1024> family_memo_;
  // Step 5's outcomes (findings included), a few KB each, with what their confirmation said: a failure that a fresh
  // sample did not confirm carries its stderr line (bias_confirmation.h), said when its batch runs, not on replays.
  struct BiasRun {
    Outcome raw;
    std::string unconfirmed;  // "" = passed, or a confirmed (or unconfirmable: a kernel fault) failure
  };
  BiasRun bias_run(const Property& p, const Family& fam, const Budget& b, const std::uint8_t* data,
                  std::size_t size) const;
  FamilyMemo<std::vector<BiasRun>, 4096> bias_memo_;
  std::uint64_t bias_batches_ = 0, family_replays_ = 0;
};

// The largest |kernel − exact| / ulp(scale, output format) (NaN when the kernel is non-finite where the
// exact value is finite), and the mean signed value, where scale = max(|exact|, rms of the exact row of
// `row_len` values). The row scale keeps the measure meaningful where O cancels to near zero (design.md:
// a per-element ulp there reads 10^4 ulps of pure noise); with row_len = 1 it is the per-element ulp.
// Used by the target (feedback).
struct ErrorSummary {
  double max_ulp = 0, mean_signed_ulp = 0;
  int nonzero = 0, positive = 0;
};
ErrorSummary o_error(const std::vector<double>& got, const std::vector<double>& exact, Format out_fmt, int row_len);

}  // namespace attncheck::fuzz
