// mma_model.h — a parameterised model of how one mma.sync m16n8k16 (bf16 x bf16 + fp32 -> fp32) adds up one
// output element, d = c + Σ_{k<16} a_k·b_k, usable from host and device code.
//
// The model (after Fasi et al. 2021 and Khattak & Mikaitis 2025 on NVIDIA tensor cores): the 16 products are
// split into groups of `group` consecutive k; per group, the products (exact: 8-bit x 8-bit significands) and
// the running value are aligned to the largest exponent among them, each is cut to a multiple of
// 2^(emax − frac_bits) (toward zero, or to nearest with `align_nearest`), the cut terms are summed exactly,
// and the sum is rounded once to fp32 (toward zero or to nearest). mma_probe measures which parameters the
// hardware follows (TENSOR_CORES.md); kMeasuredMmaModel holds the answer so a CPU twin of the CUDA kernels can
// call mma_k16(...) where the CUDA kernel issues an mma. Finite inputs only (no inf/NaN/subnormal modelling).
#pragma once

#include <cmath>

#include "kernels/formats.h"

namespace attncheck {

struct MmaModel {
  int group = 16;              // products summed together per step (16 = the whole k16 at once)
  int frac_bits = 24;          // bits kept below the largest term's leading bit
  bool align_nearest = false;  // cut aligned terms to nearest (else toward zero)
  bool round_nearest = false;  // final rounding to fp32: nearest-even (else toward zero)
  bool c_in_align = true;      // the running value is aligned with the products (else added after, rounded)
};

// What mma_probe measured on an H200 (sm_90); TENSOR_CORES.md has the evidence.
constexpr MmaModel kMeasuredMmaModel{16, 25, false, false, true};

namespace mma_detail {
ATTN_HD double cut(double x, double quantum, bool nearest) {
  const double r = x / quantum;  // exact: power-of-two scaling
  return (nearest ? std::rint(r) : std::trunc(r)) * quantum;
}
ATTN_HD float to_f32(double x, bool nearest) {
  float f = static_cast<float>(x);  // nearest-even
  if (!nearest && std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}
// Exact aligned sum of n terms, rounded to fp32.
ATTN_HD float aligned_sum(const double* t, int n, const MmaModel& m) {
  int emax = -100000;
  for (int i = 0; i < n; ++i)
    if (t[i] != 0.0) emax = std::max(emax, std::ilogb(t[i]));
  if (emax == -100000) {
    double z = 0.0;
    for (int i = 0; i < n; ++i) z += t[i];  // signed zeros: (+0) unless all are −0
    return static_cast<float>(z);
  }
  const double q = std::ldexp(1.0, emax - m.frac_bits);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += cut(t[i], q, m.align_nearest);  // exact: few bits span
  return to_f32(s, m.round_nearest);
}
}  // namespace mma_detail

// One output element: c + Σ_{k<16} a[k]·b[k] under model m (a, b hold bf16 values; c an fp32 value).
ATTN_HD float mma_k16(const float* a, const float* b, float c, const MmaModel& m = kMeasuredMmaModel) {
  float acc = c;
  for (int k0 = 0; k0 < 16; k0 += m.group) {
    double t[17];
    int n = 0;
    if (m.c_in_align) t[n++] = acc;
    for (int k = k0; k < k0 + m.group; ++k) t[n++] = static_cast<double>(a[k]) * static_cast<double>(b[k]);
    const float s = mma_detail::aligned_sum(t, n, m);
    acc = m.c_in_align ? s : mma_detail::to_f32(static_cast<double>(acc) + static_cast<double>(s), m.round_nearest);
  }
  return acc;
}

// A dot product of length d (a multiple of 16 after zero padding) as the CUDA kernels compute it: k16 steps in
// increasing k, each step's result feeding the next as c, starting from c0.
ATTN_HD float mma_dot(const float* a, const float* b, int d, float c0 = 0.0f, const MmaModel& m = kMeasuredMmaModel) {
  float acc = c0;
  for (int k0 = 0; k0 < d; k0 += 16) {
    float aa[16], bb[16];
    for (int k = 0; k < 16; ++k) {
      aa[k] = k0 + k < d ? a[k0 + k] : 0.0f;
      bb[k] = k0 + k < d ? b[k0 + k] : 0.0f;
    }
    acc = mma_k16(aa, bb, acc, m);
  }
  return acc;
}

}  // namespace attncheck
