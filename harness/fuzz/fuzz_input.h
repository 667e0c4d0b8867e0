// fuzz_input.h — the byte layout of a kernel-fuzzer input, and its decoder/encoder.
//
// A fuzz input is a fixed 24-byte header (the Family) followed by one byte per generator parameter and then
// any number of 4-byte value edits. Missing bytes read as 0, so every byte string (including the empty one)
// decodes to a valid FuzzInput; decoding never throws. Layout (offsets in bytes):
//
//   0      flags: bit0 causal, bit1 keep-mask (kind 5, random, when the generator's `mask` parameter is 0),
//                 bit2 additive bias, bit3 GQA (heads_kv = heads_q / 2),
//                 bit4 run the bias property on this input, bits5-7 reserved (ignored)
//   1      generator index, modulo generators().size() (generators() order)
//   2      n_q      = 1 + byte % kMaxN
//   3      n_k      = 1 + byte % kMaxN
//   4      head_dim = 1 + byte % kMaxD
//   5      tile_q:  0 = the kernel's default, else 1 + (byte - 1) % n_q
//   6      tile_k:  0 = the kernel's default, else 1 + (byte - 1) % n_k
//   7      logit scale: scale = default_scale(head_dim) · 2^(byte % 9 − 4)  (power of two: stays fp32-exact)
//   8-15   seed, little-endian u64 (Family::seed)
//   16     heads_q = 1 + byte % kMaxHeads  (GQA needs heads_q even; odd heads_q clears it)
//   17     batch   = 1 + byte % 2
//   18-23  reserved (kept for layout stability; the mutator leaves them alone)
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
#include <vector>

#include "properties/family.h"

namespace attncheck::fuzz {

constexpr int kHeaderBytes = 24;
constexpr int kMaxN = 32;      // n_q, n_k <= 32 and head_dim <= 32 keep one exec well under a millisecond
constexpr int kMaxD = 32;
constexpr int kMaxHeads = 4;
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
