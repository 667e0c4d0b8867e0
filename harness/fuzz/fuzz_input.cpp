// fuzz_input.cpp — decoder and encoder of kernel-fuzzer inputs (layout documented in fuzz_input.h).
//
// Invariant: decode_input is total (any bytes, any length) and deterministic; it reads generators() only to
// name the generator and order its parameters. Every decoded Problem passes Problem::validate().
#include "harness/fuzz/fuzz_input.h"
#include "properties/family_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "kernels/formats.h"

namespace attncheck::fuzz {
namespace {

std::uint8_t byte_at(const std::uint8_t* data, std::size_t size, std::size_t i) { return i < size ? data[i] : 0; }

std::size_t generator_index(std::uint8_t b) {
  const std::size_t n = generators().size();
  return n == 0 ? 0 : b % n;
}

double decode_param(std::uint8_t b, double def) {
  if (b == 0) return def;
  if (b < 128) {
    const double step = (static_cast<int>(b) - 64) / 16.0;
    return def != 0 ? def * std::exp2(step) : step;
  }
  return static_cast<double>(static_cast<int>(b) - 144);
}

// decode_param, clamped into the parameter's domain (properties/family.cpp): every byte string decodes to a valid
// family, so libFuzzer spends no executions on inputs make_instance would reject.
double decode_param_in_domain(const std::string& key, std::uint8_t b, double def, Format input_format) {
  const double v = decode_param(b, def);
  const auto d = param_domain(key, input_format);
  return d ? clamp_to_domain(*d, v) : v;
}

std::uint8_t encode_param(double v, double def) {
  if (v == def) return 0;
  if (v == std::floor(v) && v >= -16 && v <= 111) return static_cast<std::uint8_t>(v + 144);
  double code;
  if (def != 0 && v / def > 0) {
    code = 64 + 16 * std::log2(v / def);
  } else {
    code = 64 + 16 * v;
  }
  return static_cast<std::uint8_t>(std::clamp(std::lround(code), 1l, 127l));
}

// Rows of tensor t (0 q, 1 k, 2 v, 3 dO): every tensor is [rows][head_dim].
std::vector<double>* tensor_of(Instance& in, int t) {
  switch (t & 3) {
    case 0: return &in.q;
    case 1: return &in.k;
    case 2: return &in.v;
    default: return &in.d_o;
  }
}

}  // namespace

double special_value(int arg, Format f) {
  const FormatInfo fi = format_info(f);
  const double min_sub = std::ldexp(1.0, fi.emin - (fi.precision - 1));
  const double min_norm = std::ldexp(1.0, fi.emin);
  const double table[] = {0.0,  HUGE_VAL, NAN,     fi.max_finite, min_sub, min_norm, 1.0,
                          0.5,  2.0,      0.00390625, 256.0,      3.0,     1.5,      0.0};
  constexpr int n = sizeof(table) / sizeof(table[0]);
  const double v = table[(arg & 0x7f) % n];
  const double signed_v = (arg & 0x80) ? -v : v;
  return round_to(signed_v, f);
}

int size_from_bytes(std::uint8_t low, std::uint8_t high, bool head_dim) {
  const int unit = head_dim ? kShortD : kShortN, steps = head_dim ? kLongDimSteps : kLongSteps;
  return 1 + low % unit + (high < steps ? unit * high : 0);
}

std::pair<std::uint8_t, std::uint8_t> bytes_for_size(int size, bool head_dim) {
  const int unit = head_dim ? kShortD : kShortN, steps = head_dim ? kLongDimSteps : kLongSteps;
  return {static_cast<std::uint8_t>((size - 1) % unit), static_cast<std::uint8_t>((size - 1) / unit % steps)};
}

bool is_long(const Problem& p) { return p.n_q > kShortN || p.n_k > kShortN || p.head_dim > kShortD; }

FuzzInput decode_input(const std::uint8_t* data, std::size_t size) {
  FuzzInput in;
  const std::uint8_t flags = byte_at(data, size, 0);
  const auto& gens = generators();
  const GeneratorInfo* gen = gens.empty() ? nullptr : &gens[generator_index(byte_at(data, size, 1))];
  Family& f = in.family;
  f.generator = gen ? gen->name : "normal";
  Problem& p = f.problem;
  p.n_q = size_from_bytes(byte_at(data, size, 2), byte_at(data, size, 18), false);
  p.n_k = size_from_bytes(byte_at(data, size, 3), byte_at(data, size, 19), false);
  p.head_dim = size_from_bytes(byte_at(data, size, 4), byte_at(data, size, 20), true);
  const std::uint8_t tq = byte_at(data, size, 5), tk = byte_at(data, size, 6);
  f.tile_q = tq == 0 ? 0 : 1 + (tq - 1) % p.n_q;
  f.tile_k = tk == 0 ? 0 : 1 + (tk - 1) % p.n_k;
  p.scale = std::ldexp(Problem::default_scale(p.head_dim), byte_at(data, size, 7) % 9 - 4);
  std::uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) seed |= static_cast<std::uint64_t>(byte_at(data, size, 8 + i)) << (8 * i);
  f.seed = seed;
  const bool long_input = is_long(p);
  p.heads_q = 1 + byte_at(data, size, 16) % (long_input ? kMaxLongHeads : kMaxHeads);
  p.heads_kv = ((flags & kFlagGqa) && p.heads_q % 2 == 0) ? p.heads_q / 2 : p.heads_q;
  p.batch = long_input ? 1 : 1 + byte_at(data, size, 17) % 2;
  p.causal = flags & kFlagCausal;
  p.has_bias = flags & kFlagBias;
  p.input_format = Format::kBF16;
  in.run_bias = (flags & kFlagRunBias) && !long_input;  // a long input's bias batch costs seconds (fuzz_input.h)

  std::size_t pos = kHeaderBytes;
  if (gen) {
    for (const auto& [key, def] : gen->defaults) {
      // Clamp into the parameter's domain (properties/family.cpp): every byte string still decodes to a valid
      // family, so libFuzzer spends no executions on inputs make_instance would reject.
      f.params[key] = decode_param_in_domain(key, byte_at(data, size, pos++), def, p.input_format);
    }
  }
  const int tie_rows = byte_at(data, size, kTieRowsByte);
  if (gen && gen->defaults.count("ties") && tie_rows >= 1 && tie_rows < kTieRowsSteps)
    f.params["tie_rows"] = static_cast<double>(tie_rows) / kTieRowsSteps;  // exact: k/8
  if ((flags & kFlagMask) && f.param("mask", 0) == 0 && f.params.count("mask")) f.params["mask"] = 5;
  p.has_mask = f.param("mask", 0) != 0;
  for (; pos + kEditBytes <= size && in.edits.size() < static_cast<std::size_t>(kMaxEdits); pos += kEditBytes) {
    Edit e;
    e.op = static_cast<EditOp>((data[pos] >> 4) % kEditOps);
    e.tensor = data[pos] & 3;
    e.row = data[pos + 1];
    e.col = data[pos + 2];
    e.arg = data[pos + 3];
    in.edits.push_back(e);
  }
  return in;
}

std::size_t edits_offset(const std::uint8_t* data, std::size_t size) {
  const auto& gens = generators();
  if (gens.empty()) return kHeaderBytes;
  return kHeaderBytes + gens[generator_index(byte_at(data, size, 1))].defaults.size();
}

std::vector<std::uint8_t> encode_input(const FuzzInput& in) {
  std::vector<std::uint8_t> out(kHeaderBytes, 0);
  const Family& f = in.family;
  const Problem& p = f.problem;
  const auto& gens = generators();
  std::size_t gi = 0;
  for (std::size_t i = 0; i < gens.size(); ++i)
    if (gens[i].name == f.generator) gi = i;
  out[0] = (p.causal ? kFlagCausal : 0) | (p.has_bias ? kFlagBias : 0) |
           (p.heads_kv != p.heads_q ? kFlagGqa : 0) | (in.run_bias ? kFlagRunBias : 0);
  out[1] = static_cast<std::uint8_t>(gi);
  std::tie(out[2], out[18]) = bytes_for_size(p.n_q, false);
  std::tie(out[3], out[19]) = bytes_for_size(p.n_k, false);
  std::tie(out[4], out[20]) = bytes_for_size(p.head_dim, true);
  out[5] = static_cast<std::uint8_t>(f.tile_q <= 0 ? 0 : f.tile_q);
  out[6] = static_cast<std::uint8_t>(f.tile_k <= 0 ? 0 : f.tile_k);
  const double ratio = p.scale / Problem::default_scale(p.head_dim);
  out[7] = static_cast<std::uint8_t>(std::clamp(std::lround(std::log2(ratio)) + 4, 0l, 8l));
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<std::uint8_t>(f.seed >> (8 * i));
  out[16] = static_cast<std::uint8_t>((p.heads_q - 1) % kMaxHeads);
  out[17] = static_cast<std::uint8_t>((p.batch - 1) % 2);
  if (f.params.count("tie_rows")) {  // the nearest k/8, k in 1..8, as for the other parameters; 8/8 = 1 is byte 0
    const double v = f.params.at("tie_rows");  // clamped before rounding: lround of 1e300 is undefined
    const long k =
        std::isnan(v) ? kTieRowsSteps : std::lround(std::clamp(v * kTieRowsSteps, 1.0, double(kTieRowsSteps)));
    out[kTieRowsByte] = static_cast<std::uint8_t>(k % kTieRowsSteps);
  }
  if (!gens.empty()) {
    for (const auto& [key, def] : gens[gi].defaults) {
      const double v = f.param(key, def);
      std::uint8_t b = encode_param(v, def);
      // Clamping (integer parameters round) can move the formula's byte off v: then take any byte that decodes
      // to v exactly, so decode(encode(x)) == x for everything decode makes.
      for (int c = 0; c < 256 && decode_param_in_domain(key, b, def, p.input_format) != v; ++c)
        b = static_cast<std::uint8_t>(c);
      out.push_back(b);
    }
  }
  for (const Edit& e : in.edits) {
    out.push_back(static_cast<std::uint8_t>((static_cast<int>(e.op) << 4) | (e.tensor & 3)));
    out.push_back(static_cast<std::uint8_t>(e.row));
    out.push_back(static_cast<std::uint8_t>(e.col));
    out.push_back(static_cast<std::uint8_t>(e.arg));
  }
  return out;
}

Instance apply_edits(const Instance& base, const std::vector<Edit>& edits) {
  Instance in = base;
  const int d = in.problem.head_dim;
  const Format fmt = in.problem.input_format;
  for (const Edit& e : edits) {
    std::vector<double>* t = tensor_of(in, e.tensor);
    if (t->empty() || d <= 0) continue;
    const int rows = static_cast<int>(t->size() / d);
    const int r = e.row % rows, c = e.col % d;
    double* row = t->data() + static_cast<std::size_t>(r) * d;
    switch (e.op) {
      case EditOp::kSetSpecial: row[c] = special_value(e.arg, fmt); break;
      case EditOp::kCopyRow: {
        const double* src = t->data() + static_cast<std::size_t>(e.arg % rows) * d;
        std::copy(src, src + d, row);
        break;
      }
      case EditOp::kScaleRow:
        for (int j = 0; j < d; ++j) row[j] = round_to(std::ldexp(row[j], e.arg % 32 - 16), fmt);
        break;
      case EditOp::kNegateRow:
        for (int j = 0; j < d; ++j) row[j] = -row[j];
        break;
      case EditOp::kSetValue: {
        const std::uint64_t bits = (static_cast<std::uint64_t>(e.arg) << 8) | static_cast<std::uint64_t>(e.arg);
        row[c] = fmt == Format::kBF16 ? decode(bits, Format::kBF16) : round_to(decode(bits, Format::kBF16), fmt);
        break;
      }
    }
  }
  return in;
}

std::string describe_input(const FuzzInput& in) {
  std::ostringstream s;
  s << in.family.describe() << (in.run_bias ? " +bias" : "") << " edits=" << in.edits.size();
  return s.str();
}

std::string to_hex(const std::uint8_t* data, std::size_t size) {
  std::string out;
  out.reserve(2 * size);
  char buf[3];
  for (std::size_t i = 0; i < size; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", data[i]);
    out += buf;
  }
  return out;
}

}  // namespace attncheck::fuzz
