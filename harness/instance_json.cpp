// instance_json.cpp — an Instance as JSON with every value pinned as the hex bits of its declared format.
//
// Layout (corpus/README.md, "instance"): problem {batch, heads_q, heads_kv, n_q, n_k, head_dim, scale (fp32
// hex), causal, has_mask, has_bias, input_format}, seed (16 hex digits), and tensors q, k, v, d_o (optional),
// mask (when has_mask), bias (when has_bias), each {shape, format, bits} (mask: {shape, values} of 0/1).
// Shapes are the row-major layouts of problem.h. Allowed values: Q, K, V, dO finite (the properties assume
// finite input; NaN/inf inputs are rejected, not silently replayed); bias finite or -inf (an additive mask),
// never NaN or +inf. Bits are written lower-case with exactly bits/4 digits, so a file pins every bit.
// Tested by corpus_test.cpp (round trip, each rejection class).
#include <cmath>
#include <cstring>

#include "harness/corpus.h"
#include "harness/json_fields.h"

namespace attncheck {

using json_fields::At;
using nlohmann::json;

namespace {

int hex_digits(Format f) { return format_info(f).bits / 4; }

enum class Allow { kFinite, kFiniteOrNegInf };

json shape_json(std::initializer_list<int> dims) { return json(std::vector<int>(dims)); }

json tensor_json(const std::vector<double>& t, const json& shape, Format f, const char* name) {
  json bits = json::array();
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!representable(t[i], f))
      throw Error(std::string("instance_to_json: ") + name + "[" + std::to_string(i) + "] is not a " + format_name(f) + " value");
    bits.push_back(json_fields::to_hex(encode(t[i], f), hex_digits(f)));
  }
  return json{{"shape", shape}, {"format", format_name(f)}, {"bits", bits}};
}

void check_shape(const json& obj, const json& want, const At& at) {
  const json& shape = json_fields::field(obj, "shape", at);
  if (shape != want) (at / "shape").fail("is " + shape.dump() + ", the problem needs " + want.dump());
}

std::vector<double> tensor_from(const json& obj, const json& want_shape, Format f, Allow allow, const At& at) {
  json_fields::only_fields(obj, {"shape", "format", "bits"}, at);
  check_shape(obj, want_shape, at);
  const std::string fmt = json_fields::string_at(json_fields::field(obj, "format", at), at / "format");
  if (fmt != format_name(f)) (at / "format").fail("is \"" + fmt + "\", expected \"" + format_name(f) + "\"");
  const json& bits = json_fields::array(json_fields::field(obj, "bits", at), at / "bits");
  std::size_t want = 1;
  for (const auto& d : want_shape) want *= d.get<std::size_t>();
  if (bits.size() != want)
    (at / "bits").fail("has " + std::to_string(bits.size()) + " values, the shape needs " + std::to_string(want));
  std::vector<double> out(want);
  for (std::size_t i = 0; i < want; ++i) {
    const At ai = (at / "bits")[i];
    const double v = decode(json_fields::hex_at(bits[i], ai, hex_digits(f)), f);
    if (std::isnan(v)) ai.fail(bits[i].get<std::string>() + " is NaN in " + format_name(f) + ", not allowed here");
    if (std::isinf(v) && !(allow == Allow::kFiniteOrNegInf && v < 0))
      ai.fail(bits[i].get<std::string>() + " is " + (v < 0 ? "-inf" : "+inf") + " in " + format_name(f) + ", not allowed here");
    out[i] = v;
  }
  return out;
}

Problem problem_from(const json& j, const At& at) {
  json_fields::only_fields(j, {"batch", "heads_q", "heads_kv", "n_q", "n_k", "head_dim", "scale", "scale_decimal", "causal",
                               "has_mask", "has_bias", "input_format"}, at);
  auto dim = [&](const char* key) {
    return static_cast<int>(json_fields::int_at(json_fields::field(j, key, at), at / key, 1, 1 << 24));
  };
  Problem p;
  p.batch = dim("batch");
  p.heads_q = dim("heads_q");
  p.heads_kv = dim("heads_kv");
  p.n_q = dim("n_q");
  p.n_k = dim("n_k");
  p.head_dim = dim("head_dim");
  const auto scale_bits = json_fields::hex_at(json_fields::field(j, "scale", at), at / "scale", 8);
  p.scale = decode(scale_bits, Format::kF32);
  if (!std::isfinite(p.scale)) (at / "scale").fail("must be a finite fp32 value");
  p.causal = json_fields::bool_at(json_fields::field(j, "causal", at), at / "causal");
  p.has_mask = json_fields::bool_at(json_fields::field(j, "has_mask", at), at / "has_mask");
  p.has_bias = json_fields::bool_at(json_fields::field(j, "has_bias", at), at / "has_bias");
  const std::string fmt = json_fields::string_at(json_fields::field(j, "input_format", at), at / "input_format");
  try {
    p.input_format = parse_format(fmt);
  } catch (const Error& e) {
    (at / "input_format").fail(e.what());
  }
  try {
    p.validate();
  } catch (const Error& e) {
    at.fail(e.what());
  }
  return p;
}

}  // namespace

json instance_to_json(const Instance& in) {
  const Problem& p = in.problem;
  const json qs = shape_json({p.batch, p.heads_q, p.n_q, p.head_dim});
  const json kvs = shape_json({p.batch, p.heads_kv, p.n_k, p.head_dim});
  const json ss = shape_json({p.batch, p.heads_q, p.n_q, p.n_k});
  json j;
  j["problem"] = {{"batch", p.batch},
                  {"heads_q", p.heads_q},
                  {"heads_kv", p.heads_kv},
                  {"n_q", p.n_q},
                  {"n_k", p.n_k},
                  {"head_dim", p.head_dim},
                  {"scale", json_fields::to_hex(encode(p.scale, Format::kF32), 8)},
                  {"scale_decimal", p.scale},  // for people; the hex is authoritative
                  {"causal", p.causal},
                  {"has_mask", p.has_mask},
                  {"has_bias", p.has_bias},
                  {"input_format", format_name(p.input_format)}};
  j["seed"] = json_fields::to_hex(in.seed, 16);
  j["q"] = tensor_json(in.q, qs, p.input_format, "q");
  j["k"] = tensor_json(in.k, kvs, p.input_format, "k");
  j["v"] = tensor_json(in.v, kvs, p.input_format, "v");
  if (!in.d_o.empty()) j["d_o"] = tensor_json(in.d_o, qs, p.input_format, "d_o");
  if (p.has_mask) j["mask"] = {{"shape", ss}, {"values", in.mask}};
  if (p.has_bias) j["bias"] = tensor_json(in.bias, ss, Format::kF32, "bias");
  return j;
}

Instance instance_from_json(const json& j, const std::string& origin) {
  const At at{origin, "instance"};
  json_fields::only_fields(j, {"problem", "seed", "q", "k", "v", "d_o", "mask", "bias"}, at);
  Instance in;
  in.problem = problem_from(json_fields::field(j, "problem", at), at / "problem");
  const Problem& p = in.problem;
  in.seed = json_fields::hex_at(json_fields::field(j, "seed", at), at / "seed", 16);
  const json qs = shape_json({p.batch, p.heads_q, p.n_q, p.head_dim});
  const json kvs = shape_json({p.batch, p.heads_kv, p.n_k, p.head_dim});
  const json ss = shape_json({p.batch, p.heads_q, p.n_q, p.n_k});
  const Format f = p.input_format;
  in.q = tensor_from(json_fields::field(j, "q", at), qs, f, Allow::kFinite, at / "q");
  in.k = tensor_from(json_fields::field(j, "k", at), kvs, f, Allow::kFinite, at / "k");
  in.v = tensor_from(json_fields::field(j, "v", at), kvs, f, Allow::kFinite, at / "v");
  if (j.contains("d_o")) in.d_o = tensor_from(j["d_o"], qs, f, Allow::kFinite, at / "d_o");
  if (p.has_mask) {
    const At am = at / "mask";
    const json& m = json_fields::field(j, "mask", at);
    json_fields::only_fields(m, {"shape", "values"}, am);
    check_shape(m, ss, am);
    const json& vals = json_fields::array(json_fields::field(m, "values", am), am / "values");
    if (vals.size() != p.scores_size())
      (am / "values").fail("has " + std::to_string(vals.size()) + " entries, the shape needs " + std::to_string(p.scores_size()));
    in.mask.resize(vals.size());
    for (std::size_t i = 0; i < vals.size(); ++i)
      in.mask[i] = static_cast<std::uint8_t>(json_fields::int_at(vals[i], (am / "values")[i], 0, 1));
  } else if (j.contains("mask")) {
    (at / "mask").fail("present but problem.has_mask is false");
  }
  if (p.has_bias) {
    in.bias = tensor_from(json_fields::field(j, "bias", at), ss, Format::kF32, Allow::kFiniteOrNegInf, at / "bias");
  } else if (j.contains("bias")) {
    (at / "bias").fail("present but problem.has_bias is false");
  }
  try {
    in.validate();
  } catch (const Error& e) {
    at.fail(e.what());
  }
  return in;
}

}  // namespace attncheck
