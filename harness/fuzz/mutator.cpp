// mutator.cpp — structure-aware mutations of kernel-fuzzer inputs (see mutator.h, layout in fuzz_input.h).
//
// Invariant: the result is always at least kHeaderBytes + the parameter bytes long (short inputs are
// padded with zeros = defaults first) and never longer than max_size; edits are appended whole.
#include "harness/fuzz/mutator.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "harness/fuzz/fuzz_input.h"

namespace attncheck::fuzz {
namespace {

using Rng = std::minstd_rand;

int pick(Rng& rng, int n) { return n <= 1 ? 0 : static_cast<int>(rng() % static_cast<unsigned>(n)); }

// A tile byte for a dimension of n: 0 (kernel default), 1, n, a divisor of n, or a size leaving a tail. A tile byte
// holds at most 255 (for n = 256, a tile of n is not expressible: 255 stands in for it).
std::uint8_t tile_for(Rng& rng, int n) {
  switch (pick(rng, 5)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return static_cast<std::uint8_t>(std::min(n, 255));
    case 3: {
      std::vector<int> divs;
      for (int t = 1; t < std::min(n + 1, 256); ++t)
        if (n % t == 0) divs.push_back(t);
      return static_cast<std::uint8_t>(divs[pick(rng, static_cast<int>(divs.size()))]);
    }
    default: return static_cast<std::uint8_t>(n > 2 ? 2 + pick(rng, std::min(n, 255) - 2) : 1);  // often not a divisor
  }
}

// n_q (field 2), n_k (3) or head_dim (4) as the header gives it (bytes 2-4 with 18-20), and setting it.
int size_at(const std::uint8_t* d, int field) { return size_from_bytes(d[field], d[field + 16], field == 4); }
void set_size(std::uint8_t* d, int field, int size) {
  std::tie(d[field], d[field + 16]) = bytes_for_size(size, field == 4);
}

// A size past 32: mostly at a 64-row edge (edge - 1, edge, edge + 1: the CUDA kernels' key tiles and query blocks
// are 64 and 128 rows, and head_dim pads to 64 or 128), else anywhere up to the limit.
int long_size(Rng& rng, bool head_dim) {
  const int limit = head_dim ? kMaxD : kMaxN, shortest = head_dim ? kShortD : kShortN;
  if (pick(rng, 2) == 0) return shortest + 1 + pick(rng, limit - shortest);
  const int edge = 64 * (1 + pick(rng, limit / 64));
  return std::min(limit, edge - 1 + pick(rng, 3));
}

// One shape mutation in kLongOneIn takes a size across 32, short to long or back (bytes 18-20): 1/10 · 1/16 = 0.6%
// of this mutator's calls. A long input costs ~20x a short one on average in a campaign (8 ms against 0.45 ms, paper)
// and up to ~1,500x (0.65 s, fuzz_input.h), so it must stay a small share of the executions; libFuzzer's own byte
// mutations and the corpus (a long input's children stay long) add more. What a campaign runs: README "Long inputs".
constexpr int kLongOneIn = 16;

void mutate_shape(std::uint8_t* d, Rng& rng) {
  const int field = 2 + pick(rng, 3);  // 2 n_q, 3 n_k, 4 head_dim
  const bool head_dim = field == 4;
  const int shortest = head_dim ? kShortD : kShortN;
  const int cur = size_at(d, field);
  // Other moves keep a short size short and a long one within the long range.
  const int limit = cur > shortest ? (head_dim ? kMaxD : kMaxN) : shortest;
  int next;
  if (pick(rng, kLongOneIn) == 0) {
    next = cur > shortest ? 1 + pick(rng, shortest) : long_size(rng, head_dim);
  } else {
    switch (pick(rng, 4)) {
      case 0: next = cur + 1; break;
      case 1: next = cur > 1 ? cur - 1 : 1; break;
      case 2: next = std::min(limit, cur * 2); break;
      default: next = 1 + pick(rng, limit); break;
    }
    next = std::clamp(next, 1, limit);
  }
  set_size(d, field, next);
  // Coherent tiles: re-draw the tile of the dimension that changed.
  if (field == 2) d[5] = tile_for(rng, size_at(d, 2));
  if (field == 3) d[6] = tile_for(rng, size_at(d, 3));
}

void mutate_param(std::uint8_t* d, std::size_t offset, std::size_t count, Rng& rng) {
  if (count == 0) return;
  std::uint8_t& b = d[offset + pick(rng, static_cast<int>(count))];
  switch (pick(rng, 5)) {
    case 0: b = 0; break;                                                   // default
    case 1: b = static_cast<std::uint8_t>(144 + (pick(rng, 5) - 1)); break; // -1, 0, 1, 2, 3
    case 2: b = (b >= 1 && b < 128) ? static_cast<std::uint8_t>(std::min(127, b + 16)) : 80; break;  // x2
    case 3: b = (b >= 1 && b < 128) ? static_cast<std::uint8_t>(std::max(1, b - 16)) : 48; break;   // /2
    default: b = static_cast<std::uint8_t>(rng()); break;
  }
}

// Appends one edit (if it fits); returns the new size.
std::size_t add_edit(std::uint8_t* d, std::size_t size, std::size_t max_size, Rng& rng) {
  if (size + kEditBytes > max_size) return size;
  std::uint8_t e[kEditBytes];
  switch (pick(rng, 4)) {
    case 0:  // a special value anywhere
      e[0] = static_cast<std::uint8_t>((static_cast<int>(EditOp::kSetSpecial) << 4) | pick(rng, 3));
      e[3] = static_cast<std::uint8_t>(rng());
      break;
    case 1:  // duplicated K row: two keys with the same score for every query (tied maxima)
      e[0] = static_cast<std::uint8_t>((static_cast<int>(EditOp::kCopyRow) << 4) | 1);
      e[3] = static_cast<std::uint8_t>(rng());
      break;
    case 2:  // scaled Q row: larger (or smaller) logits for one query
      e[0] = static_cast<std::uint8_t>((static_cast<int>(EditOp::kScaleRow) << 4) | 0);
      e[3] = static_cast<std::uint8_t>(16 + pick(rng, 9) - 4);
      break;
    default:
      e[0] = static_cast<std::uint8_t>((static_cast<int>(EditOp::kNegateRow) << 4) | pick(rng, 3));
      e[3] = 0;
      break;
  }
  e[1] = static_cast<std::uint8_t>(rng());
  e[2] = static_cast<std::uint8_t>(rng());
  std::memcpy(d + size, e, kEditBytes);
  return size + kEditBytes;
}

}  // namespace

std::size_t mutate_structured(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned int seed) {
  Rng rng(seed == 0 ? 1u : seed);
  if (max_size < static_cast<std::size_t>(kHeaderBytes)) return size;
  // Pad to the header plus parameter bytes (zeros decode to defaults).
  if (size < static_cast<std::size_t>(kHeaderBytes)) {
    std::memset(data + size, 0, kHeaderBytes - size);
    size = kHeaderBytes;
  }
  const std::size_t params_end = std::min(max_size, edits_offset(data, size));
  if (size < params_end) {
    std::memset(data + size, 0, params_end - size);
    size = params_end;
  }
  // Drop a partial trailing edit so edits stay aligned.
  size = params_end + (size - params_end) / kEditBytes * kEditBytes;
  const std::size_t n_params = params_end - kHeaderBytes;
  const std::size_t n_edits = (size - params_end) / kEditBytes;
  switch (pick(rng, 10)) {
    case 0: mutate_shape(data, rng); break;
    case 1: data[0] ^= static_cast<std::uint8_t>(1u << pick(rng, 5)); break;  // a flag
    case 2: {  // generator: the parameter bytes keep their codes (defaults stay defaults)
      data[1] = static_cast<std::uint8_t>(data[1] + 1 + pick(rng, 3));
      const std::size_t new_end = std::min(max_size, edits_offset(data, size));
      if (new_end != params_end) {  // keep the edits, re-sized parameter block in between
        std::vector<std::uint8_t> edits(data + params_end, data + size);
        std::vector<std::uint8_t> params(new_end - kHeaderBytes, 0);
        std::memcpy(params.data(), data + kHeaderBytes, std::min(params.size(), n_params));
        std::memcpy(data + kHeaderBytes, params.data(), params.size());
        const std::size_t room = max_size - new_end;
        const std::size_t keep = std::min(edits.size(), room / kEditBytes * kEditBytes);
        if (keep > 0) std::memcpy(data + new_end, edits.data(), keep);
        size = new_end + keep;
      }
      break;
    }
    case 3: for (int i = 8; i < 16; ++i) data[i] = static_cast<std::uint8_t>(rng()); break;  // seed
    case 4: data[7] = static_cast<std::uint8_t>(pick(rng, 9)); break;  // logit scale 2^(k-4)
    case 5: mutate_param(data, kHeaderBytes, n_params, rng); break;
    case 6: mutate_param(data, kHeaderBytes, n_params, rng); break;
    case 7: size = add_edit(data, size, max_size, rng); break;
    case 8:  // drop one edit
      if (n_edits > 0) {
        const std::size_t at = params_end + kEditBytes * pick(rng, static_cast<int>(n_edits));
        std::memmove(data + at, data + at + kEditBytes, size - at - kEditBytes);
        size -= kEditBytes;
      } else {
        size = add_edit(data, size, max_size, rng);
      }
      break;
    default:  // heads / batch / tiles / tie_rows
      switch (pick(rng, 5)) {
        case 0: data[16] = static_cast<std::uint8_t>(pick(rng, kMaxHeads)); break;
        case 1: data[17] ^= 1; break;
        case 2: data[5] = tile_for(rng, size_at(data, 2)); break;
        case 3: data[6] = tile_for(rng, size_at(data, 3)); break;
        default: data[kTieRowsByte] = static_cast<std::uint8_t>(pick(rng, kTieRowsSteps)); break;  // 0: every row
      }
      break;
  }
  return size;
}

}  // namespace attncheck::fuzz
