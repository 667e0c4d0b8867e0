// json_fields.h — typed, path-naming access to fields of a parsed JSON document (corpus files, reports).
//
// Every accessor takes the origin (a file name) and the field's dotted path ("instance.q.bits[3]") and throws
// attncheck::Error "<origin>: <path>: <what is wrong>" instead of nlohmann's type_error, so a bad file always
// yields one line that names the file and the field. Used by corpus.cpp and instance_json.cpp.
// Tested through corpus_test.cpp (malformed-file cases).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/problem.h"

namespace attncheck::json_fields {

// Where a field sits: the file and the dotted path inside it.
struct At {
  std::string origin;
  std::string path;
  At operator/(const std::string& key) const { return {origin, path.empty() ? key : path + "." + key}; }
  At operator[](std::size_t i) const { return {origin, path + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const;
};

const nlohmann::json& field(const nlohmann::json& obj, const std::string& key, const At& at);  // required
// Fails unless `obj` is an object whose keys are all in `known`, naming the first other key and the known ones: a
// misspelt field ("cuasal") was passed over, so a hand-edited case checked something other than what it said.
void only_fields(const nlohmann::json& obj, const std::vector<std::string>& known, const At& at);
std::vector<std::string> keys_of(const nlohmann::json& obj);  // an object's keys (for only_fields from a written one)
const nlohmann::json& object(const nlohmann::json& j, const At& at);
const nlohmann::json& array(const nlohmann::json& j, const At& at);
std::string string_at(const nlohmann::json& j, const At& at);
bool bool_at(const nlohmann::json& j, const At& at);
std::int64_t int_at(const nlohmann::json& j, const At& at, std::int64_t lo, std::int64_t hi);
std::uint64_t uint_at(const nlohmann::json& j, const At& at);
double number_at(const nlohmann::json& j, const At& at);  // finite

// "0x" followed by exactly `digits` hex digits (either case); the value, or fail().
std::uint64_t hex_at(const nlohmann::json& j, const At& at, int digits);
std::string to_hex(std::uint64_t bits, int digits);

}  // namespace attncheck::json_fields
