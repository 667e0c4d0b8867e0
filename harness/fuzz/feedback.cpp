// feedback.cpp — the extra-counter array and its bucketing (layout in feedback.h).
//
// Counters saturate at 255. Error and bias buckets are set once per input (the bucket reached is the news);
// events carry a count only where more is meaningfully deeper (tied tiles from the model trace).
#include "harness/fuzz/feedback.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace attncheck::fuzz {
namespace {

constexpr int kErrBase = 0;
constexpr int kErrSize = kMaxGenerators * kTensors * kUlpBuckets;
constexpr int kMeanBase = kErrBase + kErrSize;
constexpr int kMeanSize = kMaxGenerators * kUlpBuckets;
constexpr int kBiasMeanBase = kMeanBase + kMeanSize;
constexpr int kBiasZBuckets = 16;
constexpr int kBiasZBase = kBiasMeanBase + kUlpBuckets;
constexpr int kEventBase = kBiasZBase + kBiasZBuckets;
constexpr int kPropBase = kEventBase + static_cast<int>(Event::kCount);
constexpr int kTotal = kPropBase + kMaxProperties * kStatuses;

bool g_enabled = true;
bool g_error_only = false;

}  // namespace

// libFuzzer finds this array by its section name (__start/__stop symbols); `used` keeps the linker and the
// optimiser from dropping it, since nothing in this program reads it back but libFuzzer and the tests.
__attribute__((section("__libfuzzer_extra_counters"), used)) static std::uint8_t g_counters[kTotal];

namespace {
void bump(int i, int by = 1) {
  if (!g_enabled || i < 0 || i >= kTotal) return;
  g_counters[i] = static_cast<std::uint8_t>(std::min(255, g_counters[i] + by));
}
int gen_slot(int g) { return std::clamp(g, 0, kMaxGenerators - 1); }
}  // namespace

int ulp_bucket(double ulps) {
  if (std::isnan(ulps) || std::isinf(ulps)) return kUlpBuckets - 1;
  if (ulps <= 0) return 0;
  // floor(2 log2) + 11 maps 2^-5 -> 1, 1 ulp -> 11, 2^7.5 and above -> 26.
  const int b = static_cast<int>(std::floor(2 * std::log2(ulps))) + 11;
  return std::clamp(b, 1, kUlpBuckets - 2);
}

void set_enabled(bool on) { g_enabled = on; }
void set_error_only(bool on) { g_error_only = on; }
bool enabled() { return g_enabled; }

void record(const Observation& o) {
  const int g = gen_slot(o.generator);
  bump(kErrBase + (g * kTensors + 0) * kUlpBuckets + ulp_bucket(o.max_ulp_o));
  if (g_error_only) return;
  bump(kErrBase + (g * kTensors + 1) * kUlpBuckets + ulp_bucket(o.max_ulp_lse));
  bump(kMeanBase + g * kUlpBuckets + ulp_bucket(std::fabs(o.mean_signed_ulp_o)));
  if (o.nonzero_errors >= 4 && (o.positive_errors == 0 || o.positive_errors == o.nonzero_errors))
    record_event(Event::kOneSignErrors);
}

void record_event(Event e, int times) {
  if (times > 0 && !g_error_only) bump(kEventBase + static_cast<int>(e), std::min(times, 255));
}

void record_bias(double abs_mean_ulp, double abs_z) {
  if (g_error_only) return;
  bump(kBiasMeanBase + ulp_bucket(abs_mean_ulp));
  // |z| in half-unit log2 steps from 0.25 up: 0.25 -> 1, 1 -> 5, 6 -> 10, 64+ -> 15.
  int zb = 0;
  if (std::isnan(abs_z) || std::isinf(abs_z)) {
    zb = kBiasZBuckets - 1;
  } else if (abs_z > 0) {
    zb = std::clamp(static_cast<int>(std::floor(2 * std::log2(abs_z))) + 5, 1, kBiasZBuckets - 1);
  }
  bump(kBiasZBase + zb);
}

void record_property(int property_index, int status) {
  if (g_error_only) return;
  if (property_index < 0 || property_index >= kMaxProperties || status < 0 || status >= kStatuses) return;
  bump(kPropBase + property_index * kStatuses + status);
}

const std::uint8_t* counters() { return g_counters; }
std::size_t counter_count() { return kTotal; }
void clear() { std::memset(g_counters, 0, sizeof g_counters); }

static_assert(kTotal <= 65536, "CounterDelta indexes counters with 16 bits");
CounterDelta nonzero_counters() {
  CounterDelta d;
  for (int i = 0; i < kTotal; ++i)
    if (g_counters[i] != 0) d.emplace_back(static_cast<std::uint16_t>(i), g_counters[i]);
  return d;
}
CounterDelta take_counters() {
  CounterDelta d = nonzero_counters();
  clear();
  return d;
}
void add_counters(const CounterDelta& added) {
  for (const auto& [i, by] : added) bump(i, by);
}

}  // namespace attncheck::fuzz
