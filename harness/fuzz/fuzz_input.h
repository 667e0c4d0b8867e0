// fuzz_input.h — the byte layout of a kernel-fuzzer input, and its decoder/encoder.
//
// A fuzz input is a fixed 24-byte header (the Family) followed by one byte per generator parameter and then
// any number of 4-byte value edits. Missing bytes read as 0, so every byte string (including the empty one)
// decodes to a valid FuzzInput; decoding never throws. Layout (offsets in bytes):
//
//   0      flags: bit0 causal, bit1 keep-mask (kind 5, random, when the generator's `mask` parameter is 0),
//                 bit2 additive bias, bit3 GQA (heads_kv = heads_q / 2),
//                 bit4 run the bias property on this input (a short one: ignored on a long input, below),
//                 bits5-7 reserved (ignored)
//   1      generator index, modulo generators().size() (generators() order)
//   2      n_q      = 1 + byte % 32 + 32 · (byte 18 if it is below 8, else 0)          (1..256)
//   3      n_k      = 1 + byte % 32 + 32 · (byte 19 if it is below 8, else 0)          (1..256)
//   4      head_dim = 1 + byte % 32 + 32 · (byte 20 if it is below 4, else 0)          (1..128)
//   5      tile_q:  0 = the kernel's default, else 1 + (byte - 1) % n_q
//   6      tile_k:  0 = the kernel's default, else 1 + (byte - 1) % n_k
//   7      logit scale: scale = default_scale(head_dim) · 2^(byte % 9 − 4)  (power of two: stays fp32-exact)
//   8-15   seed, little-endian u64 (Family::seed)
//   16     heads_q = 1 + byte % kMaxHeads, or 1 + byte % 2 for a long input (GQA needs heads_q even; odd heads_q
//          clears it)
//   17     batch   = 1 + byte % 2, or 1 for a long input
//   18-20  the multiple of 32 added to n_q, n_k, head_dim (above). At 0 (every input written before these bytes had a
//          meaning) an input decodes exactly as in the first layout, and so it does with any value past the range
//          (8..255; 4..255 for head_dim): libFuzzer's blind byte mutations (a quarter of all) then make a size long
//          with 7 of the 256 values a byte can take, not 7 in 8 as `byte % 8` would.
//          A *long* input (is_long: a size past 32) reaches the CUDA kernels' 64-key tiles and 64/128-row query
//          blocks (rescaling across tiles, tails at 64 and 128, wholly masked key tiles) and head dims 64 and 128
//          unpadded. To bound its cost it has batch 1 and heads_q <= 2 (kMaxLongHeads; costs there) and never runs
//          the bias property: its batch of T = 32 instances took 0.18 s on average in a campaign and up to 5.7 s,
//          and the long inputs with the flag (5% of the executions) took 80% of the campaign's time (paper, 60 s).
//          `--suite long` checks `unbiased` on long shapes instead.
//   21     tie_rows (the fraction of rows whose maximum is the tied keys; family.cpp) for a generator with a `ties`
//          parameter: byte k in 1..7 sets tie_rows = k/8; 0 and 8..255 leave it unset (every row tied, as in every
//          input written before this byte had a meaning), and so does any generator without `ties`. Rows tied and
//          untied in one tile test a kernel's per-row choice of the shift (a warp reduction that mixes rows up).
//          Only 7 of the 256 values a blind byte mutation can write are in range.
//   22-23  reserved (kept for layout stability; the mutator leaves them alone)
//   24..   one byte per parameter of the generator, in the order of GeneratorInfo::defaults (a std::map, so
//          alphabetical): 0 = the default; 1..127 = default · 2^((byte − 64) / 16) (a smooth log scale around
//          the default; a default of 0 gives (byte − 64) / 16); 128..255 = the small integer byte − 128 − 16
//          (−16..111: counts, ranks and signs reach their edge values 0, 1, 2, −1). has_mask follows the
//          `mask` parameter, as make_instance does.
//   then   value edits, 4 bytes each: [op|tensor][row][col][arg], applied to instance 0 of the family to make
//          the *probe* instance (see apply_edits). Edits steer the kernel into values the generators do not
//          reach (specials, duplicated rows, scaled rows); properties are judged on the family's own
//          instances (so every property finding replays with `attncheck replay`), the probe instance is run
//          for sanitizer-visible faults and for feedback only.
//
// Run the tests: ctest -R fuzz_input
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "properties/family.h"

namespace attncheck::fuzz {

constexpr int kHeaderBytes = 24;
constexpr int kShortN = 32;  // bytes 2-4 alone (a short input): n_q, n_k, head_dim <= 32, one exec well under 1 ms
constexpr int kShortD = 32;
constexpr int kLongSteps = 8;     // bytes 18-19: 32 · 0..7 more, so n_q, n_k <= 256 (four 64-key tiles)
constexpr int kLongDimSteps = 4;  // byte 20: 32 · 0..3 more, so head_dim <= 128 (the CUDA kernels' largest)
constexpr int kMaxN = kShortN * kLongSteps;
constexpr int kMaxD = kShortD * kLongDimSteps;
constexpr int kMaxHeads = 4;
// A long input has batch 1 and heads_q <= 2 (GQA still reachable: 2 query heads on 1 kv head). Its worst case per
// execution on the CPU models (n_q = n_k = 256, d = 128, 2 heads, mask and additive bias, 1x1 tiles or the default;
// clang Release, one core of a loaded 2-core machine, 2026-12-04): every per-instance property 0.15-0.7 s without
// sanitizers (fastest fa2, slowest paper-fixed with 1x1 tiles), 1.1-4.5 s under ASan+UBSan (`attncheck fuzz`'s
// default build). Were the bias flag honoured, with its batch of T = 32 it took 1.4-5.7 s without sanitizers (oracle
// with the default tiles .. paper-fixed with 1x1 tiles); without the cap on batch and heads (batch 2, 4 heads: 4x the
// work, past the reference memo's size) paper took 2.5 s, 18 s with the bias batch. A short input: under 1 ms.
constexpr int kMaxLongHeads = 2;
constexpr int kTieRowsByte = 21;  // k in 1..kTieRowsSteps - 1: tie_rows = k / kTieRowsSteps
constexpr int kTieRowsSteps = 8;
constexpr int kEditBytes = 4;
constexpr int kMaxEdits = 64;  // more edits than this are ignored (bounded work per input)

enum FlagBits : std::uint8_t {
  kFlagCausal = 1u << 0,
  kFlagMask = 1u << 1,
  kFlagBias = 1u << 2,
  kFlagGqa = 1u << 3,
  kFlagRunBias = 1u << 4,
};

// Edit operations (high nibble of the edit's first byte; the low nibble picks the tensor: 0 q, 1 k, 2 v, 3 dO).
enum class EditOp : std::uint8_t {
  kSetSpecial = 0,  // value[row][col] = special_value(arg)
  kCopyRow = 1,     // row `row` := row `arg` (ties: duplicated keys give equal scores)
  kScaleRow = 2,    // row `row` *= 2^(arg % 32 − 16), rounded to the input format (may overflow to inf)
  kNegateRow = 3,   // row `row` := −row `row`
  kSetValue = 4,    // value[row][col] = bf16 bits (arg << 8 | arg), a cheap arbitrary bit pattern
};
constexpr int kEditOps = 5;

struct Edit {
  EditOp op = EditOp::kSetSpecial;
  int tensor = 0;  // 0 q, 1 k, 2 v, 3 dO
  int row = 0;     // taken modulo the tensor's rows when applied
  int col = 0;     // taken modulo head_dim when applied
  int arg = 0;
};

struct FuzzInput {
  Family family;
  bool run_bias = false;
  std::vector<Edit> edits;
};

// Specials an edit can write: ±0, ±inf, NaN, ±max finite, ±min subnormal, ±min normal, ±1, ±2^-8 ...
double special_value(int arg, Format f);

// A size from its header bytes: `low` is byte 2, 3 or 4 and `high` byte 18, 19 or 20 (head_dim: bytes 4 and 20).
int size_from_bytes(std::uint8_t low, std::uint8_t high, bool head_dim);
// The (low, high) bytes of a size in 1..kMaxN (1..kMaxD for head_dim); size_from_bytes inverts it.
std::pair<std::uint8_t, std::uint8_t> bytes_for_size(int size, bool head_dim);
// A long input's shape: n_q, n_k or head_dim past 32 (then batch 1, heads_q <= kMaxLongHeads).
bool is_long(const Problem& p);

// Total: every byte string decodes. Parameter bytes follow generators()[index].defaults.
FuzzInput decode_input(const std::uint8_t* data, std::size_t size);
// The bytes that decode back to `in` (used to write seeds). Parameter values that the byte code cannot
// express exactly are encoded as the nearest code; decode(encode(x)) is then the value the fuzzer runs.
std::vector<std::uint8_t> encode_input(const FuzzInput& in);

// Applies the edits to a copy of `base` (values re-rounded to the input format; dO edits skipped when
// base has no dO). Never throws.
Instance apply_edits(const Instance& base, const std::vector<Edit>& edits);

// Where the value edits start in these bytes: kHeaderBytes + the decoded generator's parameter count.
std::size_t edits_offset(const std::uint8_t* data, std::size_t size);

// One line for logs: "flags=.. gen=tied_max nq=.. ... edits=3".
std::string describe_input(const FuzzInput& in);
std::string to_hex(const std::uint8_t* data, std::size_t size);

}  // namespace attncheck::fuzz
