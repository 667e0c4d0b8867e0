// problem.h — what one attention call is (Problem) and one concrete input (Instance).
//
// Layout (row-major, all tensors): Q, O, dO  [batch][heads_q][n_q][head_dim]
//                                  K, V      [batch][heads_kv][n_k][head_dim]
//                                  LSE, δ    [batch][heads_q][n_q]
//                                  keep-mask, bias [batch][heads_q][n_q][n_k] (only when present)
// Query head h reads kv head h / (heads_q / heads_kv) (GQA; heads_kv divides heads_q).
// Causal masking is bottom-right aligned as in FlashAttention: query i sees key j iff j <= i + n_k - n_q.
// Values are doubles exactly representable in `input_format` (Q, K, V, dO) and in fp32 (scale, bias);
// validate() checks all of it and throws attncheck::Error with a message naming the first bad element.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/formats.h"

namespace attncheck {

// Every user-facing failure (bad input, bad file, unsupported kernel feature) is an Error; the CLI turns it
// into a message and a non-zero exit.
struct Error : std::runtime_error {
  // A NUL in the message (a file's string quoted in it) ended what()'s C string there, and the CLI printed the
  // message cut short ('found_by: "ch'): written as \x00, as printable() writes it.
  // A word (a run without blanks) past kLongWord bytes keeps its first 240 and last 60 bytes: a file's 100 KB kernel
  // name or `expected` was quoted whole, a 100 KB error line (an input audit, session 37). A path is never clipped.
  explicit Error(const std::string& what) : std::runtime_error(clip_long_words(without_nul(what))) {}
  explicit Error(const char* what) : Error(std::string(what)) {}

  static constexpr std::size_t kLongWord = 4096;  // PATH_MAX: the longest path a message can hold

 private:
  static std::string without_nul(std::string s) {
    for (std::size_t i = s.find('\0'); i != std::string::npos; i = s.find('\0', i + 4)) s.replace(i, 1, "\\x00");
    return s;
  }
  static std::string clip_long_words(const std::string& s) {
    std::string out;
    // Back from byte j to the first byte of its UTF-8 character: 3 bytes at most, and not below `lo` (bytes that are
    // not UTF-8, continuation bytes alone, are cut where they are).
    const auto utf8_start = [&](std::size_t j, std::size_t lo) {
      const std::size_t stop = j >= lo + 3 ? j - 3 : lo;  // a character is 4 bytes at most
      for (std::size_t k = j;; --k) {
        if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) return k;
        if (k == stop) return j;
      }
    };
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t end = std::min(s.find_first_of(" \t\n", i), s.size());
      if (end - i > kLongWord) {
        const std::size_t head = utf8_start(i + 240, i), tail = utf8_start(end - 60, head);
        out.append(s, i, head - i);
        out += "...[" + std::to_string(tail - head) + " bytes left out]...";
        out.append(s, tail, end - tail);
      } else {
        out.append(s, i, end - i);
      }
      if (end < s.size()) out += s[end];
      i = end + 1;
    }
    return out;
  }
};

// Text safe for a terminal and for a JSON writer: printable ASCII, tab and well-formed UTF-8 (U+00A0 and above) are
// kept, newlines only with keep_newlines; every other byte (C0 and C1 controls, DEL, bytes that are not UTF-8) is
// written as \xNN. Names and messages that come from files, plugins or the command line pass through it before a
// terminal shows them (an escape sequence in a case file's kernel name reached the terminal raw). Idempotent (for
// either keep_newlines), and relied on as such (a plugin's message passes through it when caught and again when
// printed): so a backslash is kept as it is, and a text "\x1b" reads like an escaped byte (escaping it broke four
// tests, session 41).
std::string printable(const std::string& s, bool keep_newlines = false);

// The one name among `names` a mistyped `word` most likely meant, for "did you mean": the same name in other case
// (FA2); else among the names the word begins the shortest, where it begins all of them (pape: paper, not
// paper-fixed; --inst: --instances); else the nearest within 2 edits, alone at that distance (paperr, --kernal;
// tie: ties; head, of head_dim and heads_q: none); "" otherwise, and for words under 3 characters.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names);
// " (did you mean NAME?)" for nearest_name's answer, or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names);

// A kernel declining a problem at run time (a plugin's supports() or ATTNCHECK_ERR_UNSUPPORTED): the check is
// skipped, exactly as when the kernel's capabilities exclude the problem up front. Not a finding.
struct Unsupported : Error {
  using Error::Error;
};

// Asking the checks in progress to stop (`attncheck check` on SIGINT/SIGTERM: harness/cli/stop_signals.h). Safe to
// call from a signal handler. The instance loops (run_per_instance, unbiased) then throw Interrupted before their
// next instance, and a plugin call in progress is killed (isolated_call.cpp): a check cut short has no verdict.
// Shrinking stops and keeps the smallest failure it has (a real failure, saved as found). Only
// clear_stop_request clears it.
void request_stop() noexcept;
bool stop_requested() noexcept;
void clear_stop_request() noexcept;
struct Interrupted : Error {
  using Error::Error;
};

// A kernel under test misbehaved (a plugin crashed, hung, returned an error code, wrote outside its outputs):
// a finding about the kernel, saved and replayable like a failed property, not a usage error.
struct KernelFault : Error {
  using Error::Error;
  long long instance = -1;  // the family's instance it met, where the property knows (run_per_instance); else -1
};
// The failure message of a check that met a KernelFault, as check, replay and the fuzzer report it ("kernel fault:
// ..."); the fuzz target's case note starts with it, which is how `attncheck fuzz` knows not to shrink the case.
inline std::string kernel_fault_message(const KernelFault& e) { return std::string("kernel fault: ") + e.what(); }
inline bool is_kernel_fault_message(const std::string& m) { return m.rfind("kernel fault: ", 0) == 0; }

const char* format_name(Format f);     // "bf16", "fp16", "fp32", "fp64", "e4m3", "e5m2"
Format parse_format(const std::string& name);  // throws Error on an unknown name

struct Problem {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int n_q = 1;
  int n_k = 1;
  int head_dim = 1;
  double scale = 1.0;  // fp32-representable; usually fp32(1/sqrt(head_dim))
  bool causal = false;
  bool has_mask = false;  // explicit keep-mask (in addition to causal)
  bool has_bias = false;  // additive fp32 bias on the scaled scores
  Format input_format = Format::kBF16;

  std::size_t q_size() const { return std::size_t(batch) * heads_q * n_q * head_dim; }
  std::size_t kv_size() const { return std::size_t(batch) * heads_kv * n_k * head_dim; }
  std::size_t rows() const { return std::size_t(batch) * heads_q * n_q; }
  std::size_t scores_size() const { return rows() * n_k; }
  int group() const { return heads_q / heads_kv; }

  // Offsets into the tensors above.
  std::size_t q_at(int b, int h, int i, int c) const { return ((std::size_t(b) * heads_q + h) * n_q + i) * head_dim + c; }
  std::size_t kv_at(int b, int hk, int j, int c) const { return ((std::size_t(b) * heads_kv + hk) * n_k + j) * head_dim + c; }
  std::size_t row_at(int b, int h, int i) const { return (std::size_t(b) * heads_q + h) * n_q + i; }
  std::size_t score_at(int b, int h, int i, int j) const { return row_at(b, h, i) * n_k + j; }

  // The default scale for a head dimension: 1/sqrt(d) rounded to fp32.
  static double default_scale(int head_dim);
  // A problem of this shape with the default scale, no mask, no bias, bf16 inputs.
  static Problem of_shape(int batch, int heads_q, int heads_kv, int n_q, int n_k, int head_dim, bool causal = false);
  // Throws Error when shapes are non-positive, heads_kv does not divide heads_q, scale is not a finite fp32.
  void validate() const;
  std::string describe() const;  // one line: "b1 hq2 hkv1 nq5 nk7 d8 scale=0.353553 causal bf16"
};

struct Instance {
  Problem problem;
  std::vector<double> q, k, v, d_o;  // d_o may be empty when only the forward pass is wanted
  std::vector<std::uint8_t> mask;    // 1 = keep; size scores_size() when problem.has_mask
  std::vector<double> bias;          // size scores_size() when problem.has_bias
  std::uint64_t seed = 0;            // the instance's own seed (stochastic kernels derive randomness from it)

  // Is key j visible to query i of (b, h)? Combines the causal rule and the keep-mask.
  bool visible(int b, int h, int i, int j) const {
    const Problem& p = problem;
    if (p.causal && j > i + p.n_k - p.n_q) return false;
    if (p.has_mask && !mask[p.score_at(b, h, i, j)]) return false;
    return true;
  }
  // visible() is the same for every row of a (b, h) (no causal mask, no keep-mask): per-row work over the visible
  // keys then gives every row the same result and can run once per (b, h).
  bool every_row_sees_every_key() const { return !problem.causal && !problem.has_mask; }
  // Throws Error naming the first problem: wrong sizes, values not representable in the declared format.
  void validate() const;
};

// Outputs of a forward pass: values exactly as the kernel produced them (already in its output formats).
struct ForwardOutput {
  std::vector<double> o;    // Q layout
  std::vector<double> lse;  // natural-log log-sum-exp per row; -inf for a fully masked row
};

// Outputs of a backward pass.
struct BackwardOutput {
  std::vector<double> dq;     // Q layout
  std::vector<double> dk;     // K layout (summed over the query heads of a GQA group)
  std::vector<double> dv;     // V layout
  std::vector<double> delta;  // δ_i = Σ_c dO_ic · O_ic, per row
};

}  // namespace attncheck
