// json_fields.cpp — typed JSON field access that names the file and field in every error (json_fields.h).
#include "harness/json_fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attncheck::json_fields {

void At::fail(const std::string& what) const {
  throw Error(origin + ": " + (path.empty() ? std::string("top level") : path) + ": " + what);
}

namespace {
std::string kind(const nlohmann::json& j) { return j.type_name(); }
}  // namespace

const nlohmann::json& field(const nlohmann::json& obj, const std::string& key, const At& at) {
  const nlohmann::json& o = object(obj, at);
  auto it = o.find(key);
  if (it == o.end()) (at / key).fail("missing field");
  return *it;
}

std::vector<std::string> keys_of(const nlohmann::json& obj) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : obj.items()) keys.push_back(key);
  return keys;
}

void only_fields(const nlohmann::json& obj, const std::vector<std::string>& known, const At& at) {
  for (const auto& [key, value] : object(obj, at).items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    (at / printable(key)).fail("unknown field (the fields here: " + list + ")");
  }
}

const nlohmann::json& object(const nlohmann::json& j, const At& at) {
  if (!j.is_object()) at.fail("expected an object, found " + kind(j));
  return j;
}

const nlohmann::json& array(const nlohmann::json& j, const At& at) {
  if (!j.is_array()) at.fail("expected an array, found " + kind(j));
  return j;
}

std::string string_at(const nlohmann::json& j, const At& at) {
  if (!j.is_string()) at.fail("expected a string, found " + kind(j));
  return j.get<std::string>();
}

bool bool_at(const nlohmann::json& j, const At& at) {
  if (!j.is_boolean()) at.fail("expected true or false, found " + kind(j));
  return j.get<bool>();
}

std::int64_t int_at(const nlohmann::json& j, const At& at, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) at.fail("integer out of range");
    v = static_cast<std::int64_t>(u);
  } else if (j.is_number_integer()) {
    v = j.get<std::int64_t>();
  } else {
    at.fail("expected an integer, found " + kind(j));
  }
  if (v < lo || v > hi) at.fail(std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::uint64_t uint_at(const nlohmann::json& j, const At& at) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  at.fail("expected a non-negative integer, found " + (j.is_number() ? j.dump() : kind(j)));
}

double number_at(const nlohmann::json& j, const At& at) {
  if (!j.is_number()) at.fail("expected a number, found " + kind(j));
  const double v = j.get<double>();
  if (!std::isfinite(v)) at.fail("expected a finite number");
  return v;
}

std::uint64_t hex_at(const nlohmann::json& j, const At& at, int digits) {
  if (!j.is_string()) at.fail("expected a hex string like \"0x" + std::string(digits, '0') + "\", found " + kind(j));
  const std::string s = j.get<std::string>();
  const bool prefixed = s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (!prefixed || s.size() != std::size_t(2 + digits))
    at.fail("\"" + s + "\" is not 0x followed by " + std::to_string(digits) + " hex digits");
  std::uint64_t v = 0;
  for (std::size_t i = 2; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else at.fail("\"" + s + "\" has a non-hex digit '" + std::string(1, c) + "'");
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

std::string to_hex(std::uint64_t bits, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(bits));
  return buf;
}

}  // namespace attncheck::json_fields
