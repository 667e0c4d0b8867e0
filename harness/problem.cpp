// problem.cpp — validation and description of Problem and Instance (see problem.h for the layout).
#include "harness/problem.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <sstream>

namespace attncheck {

namespace {
// A signal handler sets it and `check -j`'s worker threads read it: a lock-free atomic (safe in a handler, no race).
std::atomic<int> g_stop_requested{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
}  // namespace
namespace {
// Edit distance (insertions, deletions, substitutions).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  if (word.size() < 3) return "";
  const std::string typed = lowered(word);
  std::vector<std::string> low;  // names in lower case, index for index
  for (const std::string& name : names) low.push_back(lowered(name));
  for (std::size_t i = 0; i < names.size(); ++i)
    if (low[i] == typed) return names[i];
  // Names the word begins: the shortest, where it begins every other one too (pape: paper, not paper-fixed).
  std::vector<std::size_t> begun;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (low[i].rfind(typed, 0) == 0) begun.push_back(i);
  if (!begun.empty()) {
    const std::size_t shortest = *std::min_element(
        begun.begin(), begun.end(), [&](std::size_t a, std::size_t b) { return low[a].size() < low[b].size(); });
    if (std::all_of(begun.begin(), begun.end(), [&](std::size_t i) { return low[i].rfind(low[shortest], 0) == 0; }))
      return names[shortest];
  }
  // Else the one nearest within 2 edits, alone at that distance (tie: ties, of ties and tie_level; head, of head_dim
  // and heads_q: none).
  std::string best;
  std::size_t best_edits = 3, ties = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t edits = edit_distance(typed, low[i]);
    if (edits < best_edits) best = names[i], best_edits = edits, ties = 0;
    else if (edits == best_edits && names[i] != best) ++ties;
  }
  return ties == 0 ? best : "";
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  const std::string near = nearest_name(word, names);
  return near.empty() ? "" : " (did you mean " + near + "?)";
}

void request_stop() noexcept { g_stop_requested = 1; }
bool stop_requested() noexcept { return g_stop_requested != 0; }
void clear_stop_request() noexcept { g_stop_requested = 0; }

std::string printable(const std::string& s, bool keep_newlines) {
  const auto byte = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  const auto cont = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xbf) { return byte(i) >= lo && byte(i) <= hi; };
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned c = byte(i);
    // The length of a well-formed, printable UTF-8 sequence at i (RFC 3629's table), 0 when there is none.
    std::size_t n = 0;
    if ((c >= 0x20 && c < 0x7f) || c == '\t' || (c == '\n' && keep_newlines)) n = 1;
    else if (c == 0xc2) n = cont(i + 1, 0xa0) ? 2 : 0;  // U+0080..U+009F are the C1 controls
    else if (c >= 0xc3 && c <= 0xdf) n = cont(i + 1) ? 2 : 0;
    else if (c >= 0xe0 && c <= 0xef)
      n = cont(i + 1, c == 0xe0 ? 0xa0 : 0x80, c == 0xed ? 0x9f : 0xbf) && cont(i + 2) ? 3 : 0;
    else if (c >= 0xf0 && c <= 0xf4)
      n = cont(i + 1, c == 0xf0 ? 0x90 : 0x80, c == 0xf4 ? 0x8f : 0xbf) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    if (n > 0) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    static const char* const kHex = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
    ++i;
  }
  return out;
}

double Problem::default_scale(int head_dim) {
  return static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))));
}

Problem Problem::of_shape(int batch, int heads_q, int heads_kv, int n_q, int n_k, int head_dim, bool causal) {
  Problem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.n_q = n_q;
  p.n_k = n_k;
  p.head_dim = head_dim;
  p.scale = default_scale(head_dim);
  p.causal = causal;
  return p;
}

void Problem::validate() const {
  auto positive = [](const char* what, int v) {
    if (v <= 0) throw Error(std::string("problem: ") + what + " must be positive, got " + std::to_string(v));
  };
  positive("batch", batch);
  positive("heads_q", heads_q);
  positive("heads_kv", heads_kv);
  positive("n_q", n_q);
  positive("n_k", n_k);
  positive("head_dim", head_dim);
  if (heads_q % heads_kv != 0)
    throw Error("problem: heads_kv (" + std::to_string(heads_kv) + ") must divide heads_q (" + std::to_string(heads_q) + ")");
  // scale > 0: a softmax's scale. FlashAttention-style kernels take the row max of the unscaled scores and scale
  // after it, which only a positive scale preserves (fa2 gave NaN everywhere under a negative one), and the
  // properties' envelopes are derived for it (a negative scale made them negative: a pass could not happen).
  const auto got = [](double x, int digits) {  // formatted only for an error (validate runs for every problem)
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    return std::string(buf);
  };
  if (!std::isfinite(scale) || !(scale > 0))
    throw Error("problem: scale must be positive and finite (it multiplies q·k before the softmax), got " + got(scale, 17));
  if (!representable(scale, Format::kF32))
    // The nearest fp32 in 17 digits, which read back as exactly it (9 did not: 0.100000001 is no fp32 number either,
    // and the suggestion, pasted, was refused again; a UX review, session 48).
    throw Error("problem: scale must be exactly an fp32 number (kernels take it as a float), got " + got(scale, 17) +
                "; the nearest fp32 is " +
                (scale > 3.4028234663852886e38 ? std::string("none: it is past fp32's largest, 3.40282347e+38")
                 : static_cast<float>(scale) == 0.f
                     ? std::string("0, which is no scale: fp32's smallest positive number is 1.4012984643248171e-45")
                     : got(double(static_cast<float>(scale)), 17)));
  // Keep a single problem well inside what a test harness can hold (2^31 elements per tensor).
  const double elems = double(batch) * heads_q * double(n_q) * double(n_k > head_dim ? n_k : head_dim);
  if (elems > 2147483647.0)
    throw Error("problem: too large: batch·heads_q·n_q·max(n_k, head_dim) is " + got(elems, 17) +
                " elements, more than 2^31 − 1 in Q or the scores (" + describe() + ")");
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "b" << batch << " hq" << heads_q << " hkv" << heads_kv << " nq" << n_q << " nk" << n_k << " d" << head_dim
    << " scale=" << scale << (causal ? " causal" : "") << (has_mask ? " mask" : "") << (has_bias ? " bias" : "") << " "
    << format_name(input_format);
  return s.str();
}

namespace {
void check_tensor(const char* name, const std::vector<double>& t, std::size_t want, Format f) {
  if (t.size() != want)
    throw Error(std::string("instance: ") + name + " has " + std::to_string(t.size()) + " values, expected " +
                std::to_string(want));
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!representable(t[i], f)) {
      std::ostringstream s;
      s.precision(17);
      s << "instance: " << name << "[" << i << "] = " << t[i] << " is not a " << format_name(f) << " value";
      throw Error(s.str());
    }
  }
}
}  // namespace

void Instance::validate() const {
  problem.validate();
  const Problem& p = problem;
  check_tensor("q", q, p.q_size(), p.input_format);
  check_tensor("k", k, p.kv_size(), p.input_format);
  check_tensor("v", v, p.kv_size(), p.input_format);
  if (!d_o.empty()) check_tensor("d_o", d_o, p.q_size(), p.input_format);
  if (p.has_mask) {
    if (mask.size() != p.scores_size())
      throw Error("instance: mask has " + std::to_string(mask.size()) + " entries, expected " + std::to_string(p.scores_size()));
    for (std::size_t i = 0; i < mask.size(); ++i)
      if (mask[i] > 1) throw Error("instance: mask[" + std::to_string(i) + "] must be 0 or 1");
  } else if (!mask.empty()) {
    throw Error("instance: mask given but problem.has_mask is false");
  }
  if (p.has_bias) {
    check_tensor("bias", bias, p.scores_size(), Format::kF32);
    for (std::size_t i = 0; i < bias.size(); ++i)
      if (std::isnan(bias[i]) || bias[i] == HUGE_VAL)
        throw Error("instance: bias[" + std::to_string(i) + "] must not be NaN or +inf");
  } else if (!bias.empty()) {
    throw Error("instance: bias given but problem.has_bias is false");
  }
}

}  // namespace attncheck
