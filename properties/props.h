// props.h — the property groups (one file each) that property.cpp gathers into all_properties(), and the bias
// statistic that the shrinker and the tests use directly. Not a contract: properties/ only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/property.h"

namespace attncheck {

std::vector<Property> basic_properties();       // props_basic.cpp
std::vector<Property> invariance_properties();  // props_invariance.cpp
std::vector<Property> bias_properties();        // props_bias.cpp
Property gpu_matches_cpu_model();               // props_gpu_twin.cpp (listed with the basic ones)
// gpu_matches_cpu_model on one instance ("" = holds, "skip:…", else the failure): the tests' way in for instances
// no generator draws (a −inf bias, values at the top of the range).
std::string gpu_matches_one(const Kernel& k, const Instance& in, nlohmann::json& stats);

struct BiasStatistic {
  bool fails = false;
  int instances = 0;        // the most usable instances of any tensor (the T of the statistic)
  int drawn = 0;            // instances drawn (a time budget may stop before b.instances)
  int tensors_measured = 0;  // tensors with at least kMinBiasInstances usable instances
  std::uint64_t exemplar = 0;  // an instance erring in the direction of the headline tensor's mean
  double z_crit = 0;       // after the Šidák adjustment
  std::string message;     // the failing tensors, one clause each
  std::map<std::string, std::string> clause;      // per failing tensor, its clause of `message`
  std::map<std::string, std::uint64_t> exemplar_of;  // per failing tensor, its exemplar (as `exemplar`)
  std::string not_finite;  // "" or the first output that is NaN/infinite where the exact value is finite (a failure)
  std::uint64_t not_finite_instance = 0;
  nlohmann::json stats;    // per tensor: mean_ulp, z, T, sd, away_mean_ulp; headline tensor, mean_ulp, z
};
// The statistic of props_bias.cpp without calibration (the family's tiles applied): `unbiased`'s, or with at_ties
// `unbiased_at_ties`'s. Error if b.instances is below kMinBiasInstances.
BiasStatistic bias_statistic(const Kernel& k, const Family& f, const Budget& b, bool at_ties = false);
// Šidák: the |z| threshold for m simultaneous two-sided tests at the single-test level of z_crit.
double sidak_z(double z_crit, int m);

}  // namespace attncheck
