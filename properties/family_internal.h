// family_internal.h — what generators.cpp exposes to the properties, the report and the tests: the score
// layout of the "lead" construction (which keys are tied, at what raw score) and family validation.
// Not a contract: used inside properties/ only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "properties/family.h"

namespace attncheck {

struct LeadLayout {
  bool active = false;     // the family uses the lead construction (q_i0 = 1; keys' dim 0 sets the score)
  int ties = 0;            // most tied (or near-tied) keys per (b, kv head); each draws [ties_min, ties]
  bool near = false;       // near ties: lead A + n·step, distinct n in -3..3
  double a = 0;            // raw score of the tied keys (A)
  double step = 0;         // near-tie step (raw)
  double gap_raw = 0;      // G: other keys' lead is <= A − G
  double other_lead = 0;   // the other keys' dim-0 value
  double noise = 0;        // ν: |noise values| < ν, (d−1)·ν² <= G/2
};

LeadLayout lead_layout(const Family& f);

// The domain of a generator parameter (family.cpp lists them with their meaning). Integer parameters are
// read rounded to the nearest integer, so an integer domain accepts any value that rounds into [lo, hi];
// a flag must be exactly 0 or 1; a real lies in [lo, hi] ((lo, hi] when lo_open). The fuzzer's decoder can
// map its bytes into these, so that no input is wasted on a family make_instance rejects.
struct ParamDomain {
  enum class Kind { kInteger, kFlag, kReal } kind;
  double lo, hi;
  bool lo_open;
  std::string meaning;
};
// std::nullopt for a name without a domain (names no generator reads are ignored by make_instance, not rejected).
std::optional<ParamDomain> param_domain(const std::string& key, Format input_format);
bool in_domain(const ParamDomain& d, double value);
std::string describe_domain(const ParamDomain& d);
// The nearest value of the domain (flags: nonzero -> 1; integers: rounded, then clamped; reals: clamped, an
// open lower end moved to the smallest double above it; NaN -> lo). For decoders that must always produce a
// valid family: in_domain(d, clamp_to_domain(d, v)) holds for every v.
double clamp_to_domain(const ParamDomain& d, double value);
// Positions of the tied keys of (b, kv head) in instance `index` (empty when the family has none).
std::vector<int> tie_positions(const Family& f, std::uint64_t index, int b, int hkv);
// Counts limited by the shape (pad and first_masked < n_k, rank <= head_dim, ties <= n_k (near ties: 7), ties_min <=
// ties, sink_pos <= n_k - ties_min): the generators read a larger value as the limit, so that shrinking the shape
// keeps a family valid. shape_limit: the most `key` acts as in f, where f's generator reads it (nullopt: not read
// here, or no limit of the shape's); why: the limit in words ("n_k - 1").
struct ShapeLimit {
  int most;
  std::string why;
};
std::optional<ShapeLimit> shape_limit(const Family& f, const std::string& key);
// f's parameters that act as other than they say, in key order: a count past its shape's limit (pad 1000 at n_k 32
// acts as 31), and a value the generator rounds to the input format (constant_v's c = 1.00001 is V = 1 in bf16;
// tie_level, the tied score's magnitude, likewise). why: "at most 31: n_k - 1", "the nearest bf16 value".
struct ClampedParam {
  std::string key;
  double given;
  double acting;
  std::string why;
};
std::vector<ClampedParam> clamped_params(const Family& f);
// f with each of those written as it acts: the same instances, bit for bit, read as they are made (a shrunk case
// at n_k 4 reads pad 3, not the pad 7 it started with).
Family with_acting_params(Family f);
// Throws Error for an unknown generator, a bad shape, negative tiles, non-finite parameters or a parameter
// outside its domain (the domains are listed in family.cpp; the message names the parameter and its domain).
void validate_family(const Family& f);

}  // namespace attncheck
