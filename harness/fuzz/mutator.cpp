// mutator.cpp — structure-aware mutations of kernel-fuzzer inputs (see mutator.h, layout in fuzz_input.h).
//
// Invariant: the result is always at least kHeaderBytes + the parameter bytes long (short inputs are
// padded with zeros = defaults first) and never longer than max_size; edits are appended whole.
#include "harness/fuzz/mutator.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "harness/fuzz/fuzz_input.h"

namespace attncheck::fuzz {
namespace {

using Rng = std::minstd_rand;

int pick(Rng& rng, int n) { return n <= 1 ? 0 : static_cast<int>(rng() % static_cast<unsigned>(n)); }

// A tile byte for a dimension of n: 0 (kernel default), 1, n, a divisor of n, or a size leaving a tail.
std::uint8_t tile_for(Rng& rng, int n) {
  switch (pick(rng, 5)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return static_cast<std::uint8_t>(n);
    case 3: {
      std::vector<int> divs;
      for (int t = 1; t <= n; ++t)
        if (n % t == 0) divs.push_back(t);
      return static_cast<std::uint8_t>(divs[pick(rng, static_cast<int>(divs.size()))]);
    }
    default: return static_cast<std::uint8_t>(n > 2 ? 2 + pick(rng, n - 2) : 1);  // often not a divisor
  }
}

void mutate_shape(std::uint8_t* d, Rng& rng) {
  const int field = 2 + pick(rng, 3);  // 2 n_q, 3 n_k, 4 head_dim
  const int cur = 1 + d[field] % (field == 4 ? kShortD : kShortN);
  const int limit = field == 4 ? kShortD : kShortN;
  int next;
  switch (pick(rng, 4)) {
    case 0: next = cur + 1; break;
    case 1: next = cur > 1 ? cur - 1 : 1; break;
    case 2: next = std::min(limit, cur * 2); break;
    default: next = 1 + pick(rng, limit); break;
  }
  next = std::clamp(next, 1, limit);
  d[field] = static_cast<std::uint8_t>(next - 1);
  // Coherent tiles: re-draw the tile of the dimension that changed.
  const int n_q = 1 + d[2] % kShortN, n_k = 1 + d[3] % kShortN;
  if (field == 2) d[5] = tile_for(rng, n_q);
  if (field == 3) d[6] = tile_for(rng, n_k);
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
    default:  // heads / batch / tiles
      switch (pick(rng, 4)) {
        case 0: data[16] = static_cast<std::uint8_t>(pick(rng, kMaxHeads)); break;
        case 1: data[17] ^= 1; break;
        case 2: data[5] = tile_for(rng, 1 + data[2] % kShortN); break;
        default: data[6] = tile_for(rng, 1 + data[3] % kShortN); break;
      }
      break;
  }
  return size;
}

}  // namespace attncheck::fuzz
