// kernel.cpp — capability checks, default batch and backward behaviour, and the kernel registry.
#include "harness/kernel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

namespace attncheck {

std::string KernelCaps::unsupported_reason(const Problem& p, bool need_backward) const {
  if (need_backward && !backward) return "no backward pass";
  if (p.causal && !causal) return "no causal masking";
  if (p.has_mask && !mask) return "no keep-mask";
  if (p.has_bias && !bias) return "no additive bias";
  if (p.heads_kv != p.heads_q && !gqa) return "no GQA";
  if (std::find(input_formats.begin(), input_formats.end(), p.input_format) == input_formats.end())
    return std::string("no ") + format_name(p.input_format) + " input";
  if (max_head_dim > 0 && p.head_dim > max_head_dim) return "head_dim " + std::to_string(p.head_dim) + " too large";
  if (!head_dims.empty() && std::find(head_dims.begin(), head_dims.end(), p.head_dim) == head_dims.end())
    return "head_dim " + std::to_string(p.head_dim) + " not supported";
  return "";
}

std::string KernelCaps::describe() const {
  std::ostringstream s;
  s << (backward ? "fwd+bwd" : "fwd") << (causal ? " causal" : "") << (mask ? " mask" : "") << (bias ? " bias" : "")
    << (gqa ? " gqa" : "") << " ";
  for (std::size_t i = 0; i < input_formats.size(); ++i) s << (i ? "," : "") << format_name(input_formats[i]);
  s << "->" << format_name(output_format) << " " << device;
  if (!head_dims.empty()) {
    s << " d=";
    for (std::size_t i = 0; i < head_dims.size(); ++i) s << (i ? "," : "") << head_dims[i];
  } else if (max_head_dim > 0) {
    s << " d<=" << max_head_dim;
  }
  if (null_control) s << " null-control";
  if (rounding_seeded_by_input) s << " input-seeded-rounding";
  return s.str();
}

BackwardOutput Kernel::backward(const Instance&, const ForwardOutput&) const {
  throw Error("kernel " + name() + " has no backward pass");
}

std::unique_ptr<Kernel> Kernel::with_tiles(int, int) const { return nullptr; }

std::vector<ForwardOutput> Kernel::forward_many(const std::vector<const Instance*>& ins) const {
  std::vector<ForwardOutput> out;
  out.reserve(ins.size());
  for (const Instance* in : ins) out.push_back(forward(*in));
  return out;
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add(std::unique_ptr<Kernel> k) {
  if (find(k->name())) throw Error("kernel '" + k->name() + "' is registered twice");
  kernels_.push_back(std::move(k));
}

const Kernel* Registry::find(const std::string& name) const {
  for (const auto& k : kernels_)
    if (k->name() == name) return k.get();
  return nullptr;
}

void Registry::add_factory(const std::string& base, KernelFactory f) { factories_[base] = std::move(f); }

void Registry::note_absent(const std::string& prefix, const std::string& why) { absent_[prefix] = why; }

float fixed_policy_param(const std::string& kernel, const std::string& key, double value, Format max_fmt) {
  // fmt's "{}": the fewest digits that read back (1.00000001, not 1.0000000099999999), as the models' names print them
  const auto shortest = [](auto v) { return fmt::format("{}", v); };
  const auto f = static_cast<float>(value);  // what the fix computes with (a decimal such as 0.002 rounds, as any)
  const std::string given = "kernel " + kernel + ": " + key + "=" + shortest(value);
  if (key == "beta") {
    // The shift m = β·r is rounded to max_fmt: at r = 1, the coarsest point relative to r, β·1 must pass the midpoint
    // 1 + u to move (u = 2^-precision: bf16's 2^-8, so paper-fixed[beta=1.001] moved no maximum of a bf16 row).
    const double least = 1 + std::ldexp(1.0, -format_info(max_fmt).precision);
    if (std::isfinite(f) && f > least) return f;
    if (!(value > least) || !std::isfinite(value))
      throw Error(given + ": it must be finite and > " + shortest(least) + " (the shift β·r is rounded to " +
                  format_name(max_fmt) + ": at or below that it moves no maximum of 1)");
    throw Error(given + " is " + shortest(f) + " in fp32, which the fix computes with: give a finite value > " +
                shortest(least) + " there");
  }
  // −0 is 0 (the same threshold m − tol), named as 0: paper-fixed[tol=-0] ran again beside paper-fixed[tol=0].
  if (f >= 0.0f && std::isfinite(f) && (value == 0.0 || f > 0.0f)) return f == 0.0f ? 0.0f : f;
  if (!(value >= 0.0)) throw Error(given + ": it must be >= 0");
  throw Error(given + " is " + shortest(f) + " in fp32, which the fix computes with: give 0, or a value from " +
              "1.4e-45 to 3.4e+38 (fp32's least subnormal and largest finite number)");
}

std::pair<std::string, KernelParams> parse_kernel_name(const std::string& name) {
  return parse_named_params(name, "kernel name");
}

std::pair<std::string, KernelParams> parse_named_params(const std::string& name, const std::string& what) {
  const auto open = name.find('[');
  if (open == std::string::npos) return {name, {}};
  if (name.back() != ']') throw Error(what + " '" + name + "': expected base[key=value,...]");
  std::string base = name.substr(0, open);
  std::string body = name.substr(open + 1, name.size() - open - 2);
  KernelParams params;
  std::size_t pos = 0;
  while (pos <= body.size() && !body.empty()) {
    std::size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(pos, comma - pos);
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw Error(what + " '" + name + "': '" + item + "' is not key=value");
    const std::string value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    // strtod skips leading blanks: "beta= 2" was taken where "beta=2 " was refused.
    if (value.empty() || std::isspace(static_cast<unsigned char>(value[0])) || *end != '\0' || !std::isfinite(v))
      throw Error(what + " '" + name + "': '" + value + "' is not a finite number");
    if (!params.emplace(item.substr(0, eq), v).second)
      throw Error(what + " '" + name + "': '" + item.substr(0, eq) + "' is given twice");
    pos = comma + 1;
  }
  return {base, params};
}

const Kernel& Registry::get(const std::string& name) {
  if (const Kernel* k = find(name)) return *k;
  auto [base, params] = parse_kernel_name(name);
  auto it = factories_.find(base);
  const bool parameterised = !params.empty() || name.find('[') != std::string::npos;
  if (parameterised && it == factories_.end() && find(base))
    throw Error("kernel '" + base + "' takes no parameters (in '" + name + "')");
  if (parameterised && it != factories_.end()) {
    std::unique_ptr<Kernel> k = it->second(params);
    if (const Kernel* existing = find(k->name())) return *existing;  // same parameters spelled differently
    const Kernel* raw = k.get();
    kernels_.push_back(std::move(k));  // registered under the factory's canonical name
    return *raw;
  }
  std::string known, why;
  std::vector<std::string> names;
  for (const auto& k : kernels_) known += (known.empty() ? "" : ", ") + k->name(), names.push_back(k->name());
  // A near name is the likelier fix (plugin:exampel with plugin:example loaded said plugin kernels are not here).
  const std::string near = did_you_mean(name, names);
  for (const auto& [prefix, reason] : absent_)  // the longest matching prefix says why (cuda:cudnn over cuda:)
    if (base.rfind(prefix, 0) == 0 && near.empty()) why = "; " + prefix + "* kernels are not available here: " + reason;
  throw Error("unknown kernel '" + name + "'" + near + " (known: " + known + ")" + why);
}

std::vector<const Kernel*> Registry::all() const {
  std::vector<const Kernel*> out;
  for (const auto& k : kernels_) out.push_back(k.get());
  return out;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& k : kernels_) out.push_back(k->name());
  return out;
}

}  // namespace attncheck
