// property.cpp — the property registry: all_properties() gathers the groups (props_basic.cpp,
// props_invariance.cpp, props_bias.cpp); get_property() and status names. check_and_shrink is in shrink.cpp,
// suites in suites.cpp.
#include "properties/property.h"

#include "properties/props.h"

namespace attncheck {

const char* status_name(Status s) {
  switch (s) {
    case Status::kPass: return "pass";
    case Status::kFail: return "fail";
    case Status::kSkip: return "skip";
    case Status::kDegenerate: return "degenerate";
  }
  return "?";
}

std::optional<Status> status_from_name(const std::string& name) {
  for (Status st : {Status::kPass, Status::kFail, Status::kSkip, Status::kDegenerate})
    if (name == status_name(st)) return st;
  return std::nullopt;
}

const std::vector<Property>& all_properties() {
  static const std::vector<Property> kAll = [] {
    std::vector<Property> all;
    for (auto group : {basic_properties(), invariance_properties(), bias_properties()})
      for (auto& p : group) all.push_back(std::move(p));
    return all;
  }();
  return kAll;
}

const Property& get_property(const std::string& name) {
  std::string known;
  std::vector<std::string> names;
  for (const auto& p : all_properties()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
    names.push_back(p.name);
  }
  throw Error("unknown property '" + name + "'" + did_you_mean(name, names) + " (known: " + known + ")");
}

}  // namespace attncheck
