// format_names.cpp — names of storage formats, for reports, corpus files and the CLI.
#include <string>

#include "harness/problem.h"

namespace attncheck {

const char* format_name(Format f) {
  switch (f) {
    case Format::kF64: return "fp64";
    case Format::kF32: return "fp32";
    case Format::kBF16: return "bf16";
    case Format::kF16: return "fp16";
    case Format::kE4M3: return "e4m3";
    case Format::kE5M2: return "e5m2";
  }
  return "?";
}

Format parse_format(const std::string& name) {
  for (int i = 0; i < kFormatCount; ++i) {
    const auto f = static_cast<Format>(i);
    if (name == format_name(f)) return f;
  }
  if (name == "f32" || name == "float") return Format::kF32;
  if (name == "f16" || name == "half") return Format::kF16;
  if (name == "f64" || name == "double") return Format::kF64;
  throw Error("unknown format '" + name + "' (known: fp64, fp32, bf16, fp16, e4m3, e5m2)");
}

}  // namespace attncheck
