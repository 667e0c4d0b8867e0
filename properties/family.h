// family.h — families of adversarial attention inputs (generators).
//
// A Family is a generator name, a Problem (shape, causal, mask/bias flags, scale, input format), a tile
// config for the CPU models, named numeric structure parameters, and a seed. Instance k of a family is a
// deterministic function of (family, k): make_instance never reads global state. Values are built from
// format bit patterns and special values (never RapidCheck's real()), so they are exactly representable.
// Shrinking (shrink.h) works on a Family's fields; statistical properties draw many instances of one family.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/problem.h"

namespace attncheck {

struct Family {
  std::string generator;                  // e.g. "normal", "low_rank", "tied_max", "near_tie", ...
  Problem problem;                        // shape and flags of every instance
  int tile_q = 0;                         // CPU-model tile config; 0 = the kernel's default
  int tile_k = 0;
  std::map<std::string, double> params;   // generator-specific structure (rank, ties, gap, ...)
  std::uint64_t seed = 1;

  double param(const std::string& key, double fallback) const {
    auto it = params.find(key);
    return it == params.end() ? fallback : it->second;
  }
  std::string describe() const;  // one line: generator, shape, tiles, params, seed
};

struct GeneratorInfo {
  std::string name;
  std::string summary;                       // one line for `attncheck list`
  std::map<std::string, double> defaults;    // parameters and their default values
};

const std::vector<GeneratorInfo>& generators();
// Every parameter name a family may set (family.cpp gives their meanings and domains), sorted.
std::vector<std::string> family_param_names();
// The generator's default family at a default shape; throws Error for an unknown generator name.
Family default_family(const std::string& generator);
// Instance `index` of the family (with dO filled, for backward properties). Throws Error on a bad family,
// including a parameter outside its domain (domains: family.cpp).
Instance make_instance(const Family& f, std::uint64_t index);
// The same instance, shared and read-only: the memo's own (no copy of the tensors) when it holds this one.
std::shared_ptr<const Instance> make_instance_shared(const Family& f, std::uint64_t index);

nlohmann::json family_to_json(const Family& f);
Family family_from_json(const nlohmann::json& j);  // throws Error naming the bad field
// A 64-bit seed in JSON: a number up to 2^53, else "0x" and 16 hex digits. JSON readers that hold numbers as
// doubles (jq, JavaScript) rounded a --seed-mixed family seed, and an edited case then replayed as generator drift.
nlohmann::json seed_to_json(std::uint64_t seed);

}  // namespace attncheck
