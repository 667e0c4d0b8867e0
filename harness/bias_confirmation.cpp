// bias_confirmation.cpp — a raw bias failure checked again on a fresh sample (why and invariants in the header).
#include "harness/bias_confirmation.h"

#include <algorithm>
#include <sstream>

namespace attncheck {

Confirmation confirm_on_a_fresh_sample(const Property& prop, const Kernel& kernel, const Family& raw_family,
                                       const Budget& raw_budget) {
  Confirmation c;
  Family fresh = raw_family;
  fresh.seed = c.seed = reseeded(raw_family.seed, kConfirmSeed);
  c.budget = raw_budget;
  c.budget.instances = std::max(128, 4 * raw_budget.instances);
  c.budget.seconds = 0;  // the whole sample: a time budget would make the confirmation depend on the machine
  c.outcome = prop.check(kernel, fresh, c.budget);
  return c;
}

bool needs_confirmation(const Outcome& raw) {
  return raw.status == Status::kFail && !is_kernel_fault_message(raw.message) && !names_a_non_finite_output(raw.stats);
}

bool names_a_non_finite_output(const nlohmann::json& stats) {
  return stats.is_object() && stats.contains("not_finite");
}

std::string deciding_numbers(const Outcome& o) {
  if (!o.stats.is_object() || !o.stats.contains("tensor") || !o.stats.contains("mean_ulp")) return "";
  std::ostringstream s;  // default stream formatting: `attncheck fuzz`'s summaries print these numbers this way
  s << o.stats["tensor"].get<std::string>() << " mean " << o.stats.value("mean_ulp", 0.0) << " ulp, z "
    << o.stats.value("z", 0.0);
  return s.str();
}

}  // namespace attncheck
