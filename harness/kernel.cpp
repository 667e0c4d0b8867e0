// kernel.cpp — capability checks, default batch and backward behaviour, and the kernel registry.
#include "harness/kernel.h"

#include <algorithm>
#include <sstream>

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
  return s.str();
}

BackwardOutput Kernel::backward(const Instance&, const ForwardOutput&) const {
  throw Error("kernel " + name() + " has no backward pass");
}

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

const Kernel& Registry::get(const std::string& name) const {
  if (const Kernel* k = find(name)) return *k;
  std::string known;
  for (const auto& k : kernels_) known += (known.empty() ? "" : ", ") + k->name();
  throw Error("unknown kernel '" + name + "' (known: " + known + ")");
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
