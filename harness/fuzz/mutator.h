// mutator.h — a structure-aware mutator for kernel-fuzzer inputs (layout in fuzz_input.h).
//
// libFuzzer's byte mutations rarely keep an attention problem coherent or hit the values that matter
// (specials, tied rows, scaled logits). mutate_structured edits the decoded fields instead:
//   - shape: n_q, n_k, head_dim, heads, batch, with the tiles re-drawn to fit the new shape (a divisor,
//     the whole dimension, 1, or a tail-producing size); a short size (<= 32) stays short and a long one long,
//     but for one shape move in 16 that takes a size across 32 (mostly to a 64-row edge or d = 64, 128);
//   - flags (causal, mask, bias, GQA, run-bias), generator, seed, logit scale (byte 7, ×2^k);
//   - generator parameters: default, the small integers −1, 0, 1, 2, 3, ×2 and ÷2 of the current value;
//   - value edits: a special value (±0, ±inf, NaN, ±max, subnormals) at a random place; a duplicated K row
//     (tied scores, so p̄ == 1 for two keys); a scaled Q row (larger logits); a negated row; drop an edit.
// It returns the new size (<= max_size) and is deterministic in `seed`. The libFuzzer entry point calls it
// for most mutations and falls back to LLVMFuzzerMutate for the rest (kernel_fuzzer.cpp).
// Run the tests: ctest -R fuzz_input
#pragma once

#include <cstddef>
#include <cstdint>

namespace attncheck::fuzz {

std::size_t mutate_structured(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned int seed);

}  // namespace attncheck::fuzz
