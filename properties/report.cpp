// report.cpp — the minimal-case report (report.h).
#include "properties/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <utility>
#include <sstream>

#include "properties/property_util.h"
#include "reference/reference.h"

namespace attncheck {

namespace {

constexpr int kMaxRows = 8;
constexpr int kMaxCols = 8;
constexpr int kMaxScoreCols = 16;

std::string val(double x, Format f) {
  char buf[64];
  const int hex_digits = (format_info(f).bits + 3) / 4;
  std::snprintf(buf, sizeof buf, "%.6g(0x%0*llx)", x, hex_digits, static_cast<unsigned long long>(encode(x, f)));
  return buf;
}

void print_rows(std::ostringstream& s, const char* name, const std::vector<double>& t, std::size_t base, int rows,
                int d, Format f) {
  s << "  " << name << " (" << rows << "x" << d << (rows > kMaxRows || d > kMaxCols ? ", cut" : "") << "):\n";
  for (int i = 0; i < std::min(rows, kMaxRows); ++i) {
    s << "    [" << i << "]";
    for (int c = 0; c < std::min(d, kMaxCols); ++c) s << " " << val(t[base + std::size_t(i) * d + c], f);
    s << "\n";
  }
}

// One gradient tensor's slice (the rows from `base`), kernel vs exact, the error in bf16 ulps of the slice's
// rms (as `unbiased` measures gradients: per-element ulps of values that cancel to ~0 say nothing).
void print_grad(std::ostringstream& s, const char* name, const std::vector<double>& got, const std::vector<double>& exact,
                std::size_t base, int rows, int d) {
  double ss = 0;
  for (std::size_t x = base; x < base + std::size_t(rows) * d; ++x) ss += std::isfinite(exact[x]) ? exact[x] * exact[x] : 0;
  const double rms = std::sqrt(ss / (double(rows) * d));
  const double u = rms > 0 ? ulp(rms, Format::kBF16) : 0.0;
  s << "  " << name << " kernel vs exact (signed error in bf16 ulps of the slice's rms " << fmt_num(rms) << ")"
    << (rows > kMaxRows || d > kMaxCols ? ", cut" : "") << ":\n";
  for (int i = 0; i < std::min(rows, kMaxRows); ++i) {
    s << "    [" << i << "]";
    for (int c = 0; c < std::min(d, kMaxCols); ++c) {
      const std::size_t x = base + std::size_t(i) * d + c;
      char buf[96];
      std::snprintf(buf, sizeof buf, " %.6g/%.6g(%+.2f)", got[x], exact[x], u > 0 ? (got[x] - exact[x]) / u : 0.0);
      s << buf;
    }
    s << "\n";
  }
}

// The (batch, query head) slice the report shows: the one holding the element the failure names, as where() and
// where_row() write it into the message ("(b0,h1,i3,c2)", or "(b0,hk1,j2,c0)" for K-layout tensors: that kv
// head's first query head), else (0, 0).
std::pair<int, int> named_slice(const std::string& message, const Problem& p) {
  static const std::regex at(R"(\(b(\d{1,9}),(hk|h)(\d{1,9}),[ij]\d+)");  // bounded: stol cannot overflow
  std::smatch m;
  if (!std::regex_search(message, m, at)) return {0, 0};
  const long b = std::stol(m[1].str()), h = std::stol(m[3].str());
  const long hq = m[2].str() == "hk" ? h * p.group() : h;
  if (b < 0 || b >= p.batch || hq < 0 || hq >= p.heads_q) return {0, 0};
  return {static_cast<int>(b), static_cast<int>(hq)};
}

bool names_gradient(const std::string& m) {
  for (const char* t : {"dQ", "dK", "dV", "delta", "δ"})
    if (m.find(t) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string failure_report(const Property& p, const Kernel& k, const Outcome& o, bool replay) {
  std::ostringstream s;
  const Family& f = o.family;
  s << "kernel:   " << k.name() << "\n";
  s << "property: " << p.name << " — " << p.sentence << "\n";
  s << "verdict:  " << status_name(o.status) << ": " << o.message << "\n";
  s << "family:   " << f.describe() << "\n";
  auto tile = [](int t) { return t ? std::to_string(t) : std::string("kernel default"); };
  s << "tiles:    " << (f.tile_q || f.tile_k ? "q " + tile(f.tile_q) + ", k " + tile(f.tile_k) : std::string("kernel default"))
    << "\n";
  s << (replay ? "failed in " : "found in ") << fmt_num(o.seconds) << " s" << (replay ? " (this replay)" : "");
  if (o.shrink_steps > 0 || o.shrink_seconds > 0)  // a replay runs the saved family as it is: nothing to say there
    s << "; shrunk in " << o.shrink_steps << " steps, " << fmt_num(o.shrink_seconds) << " s";
  s << "\n";
  if (!o.message_checked.empty())  // the effect on the family as checked; the rest of this report is the shrunk case's
    s << "as checked (before shrinking): " << o.message_checked << "\n";
  if (p.across_instances && o.stats.contains("tensors")) {
    s << "statistic (T = " << o.stats.value("T", 0) << " instances; fail when |mean| >= " << o.stats.value("epsilon_ulp", 0.0)
      << " ulp and |z| >= " << fmt_num(o.stats.value("z_crit", 0.0)) << ", Šidák-adjusted for "
      << o.stats.value("tensors_tested", 1) << " tensors):\n";
    for (auto it = o.stats["tensors"].begin(); it != o.stats["tensors"].end(); ++it) {
      const auto& t = *it;
      char buf[320];
      std::snprintf(buf, sizeof buf, "  %-10s mean %+.4g ulp  z %+9.3g  sd %.4g  away-from-zero mean %+.4g  %s  [%s]\n",
                    it.key().c_str(), t.value("mean_ulp", 0.0), t.value("z", 0.0), t.value("sd", 0.0),
                    t.value("away_mean_ulp", 0.0), t.value("fails", false) ? "FAILS" : "ok",
                    t.value("unit", std::string()).c_str());
      s << buf;
    }
    // The null controls on the same instances and the headline tensor (props_bias.cpp's calibration, run where the
    // kernel fails): the mean is measured against 0, and correct rounding itself can lean (README, "unbiased").
    const std::string headline = o.stats.value("tensor", std::string());
    if (o.stats.contains("calibration") && o.stats["calibration"].is_object() && !headline.empty()) {
      std::string nulls;
      for (auto it = o.stats["calibration"].begin(); it != o.stats["calibration"].end(); ++it) {
        const nlohmann::json& on = it.value().value("on_failing", nlohmann::json::object());
        if (!on.contains(headline)) continue;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s %s %+.4g ulp (z %+.3g)", nulls.empty() ? "" : ",", it.key().c_str(),
                      on[headline].value("mean_ulp", 0.0), on[headline].value("z", 0.0));
        nulls += buf;
      }
      if (!nulls.empty())
        s << "  null controls on the same instances, " << headline << ":" << nulls
          << " (a mean near the correctly rounded oracle's is mostly the format's own rounding)\n";
    }
  } else if (!o.stats.empty()) {
    s << "stats: " << o.stats.dump() << "\n";
  }

  // The minimal instance: the failing one (per-instance) or, for the bias, the exemplar (an instance erring in
  // the biased direction; props_bias.cpp).
  const std::uint64_t index = o.instance_index;
  Instance in;
  try {
    in = o.literal ? *o.literal : make_instance(f, index);
  } catch (const std::exception& e) {
    s << "(instance " << index << " could not be generated: " << e.what() << ")\n";
    return s.str();
  }
  const Problem& pr = in.problem;
  const Format fmt = pr.input_format;
  const auto [sb, sh] = named_slice(o.message, pr);
  const int shk = sh / pr.group();
  if (o.literal)  // shrink.h's literal phase: the family's instance, smaller and simpler; the case file holds it
    s << kLiteralInstance << " (from instance " << index << " of the family)";
  else
    s << "instance " << index;
  s << " [" << pr.describe() << "], slice b" << sb << " h" << sh << " (kv head " << shk << ")";
  if (pr.batch > 1 || pr.heads_q > 1)  // the case file holds every slice; this report shows the failing one
    s << " of " << pr.batch << " batch x " << pr.heads_q << " heads (the rest: the case file's instance)";
  s << ":\n";
  print_rows(s, "Q", in.q, pr.q_at(sb, sh, 0, 0), pr.n_q, pr.head_dim, fmt);
  print_rows(s, "K", in.k, pr.kv_at(sb, shk, 0, 0), pr.n_k, pr.head_dim, fmt);
  print_rows(s, "V", in.v, pr.kv_at(sb, shk, 0, 0), pr.n_k, pr.head_dim, fmt);
  print_rows(s, "dO", in.d_o, pr.q_at(sb, sh, 0, 0), pr.n_q, pr.head_dim, fmt);

  const std::vector<double> sc = reference_scores(in, sb, sh);
  s << "  exact scores S = scale·QKᵀ(+bias) ('*' = ties the row max exactly, '~' = within 2^-9 of it, "
       "'-inf' = masked):\n";
  for (int i = 0; i < std::min(pr.n_q, kMaxRows); ++i) {
    double mx = -HUGE_VAL;
    int at_max = 0;
    for (int j = 0; j < pr.n_k; ++j) mx = std::max(mx, sc[std::size_t(i) * pr.n_k + j]);
    for (int j = 0; j < pr.n_k; ++j) at_max += sc[std::size_t(i) * pr.n_k + j] == mx;
    s << "    [" << i << "]";
    for (int j = 0; j < std::min(pr.n_k, kMaxScoreCols); ++j) {
      const double x = sc[std::size_t(i) * pr.n_k + j];
      char buf[32];
      if (x == -HUGE_VAL) {
        std::snprintf(buf, sizeof buf, " %10s ", "-inf");
      } else {
        const char mark = (x == mx && at_max > 1) ? '*' : (x != mx && mx - x < 0x1.0p-9 ? '~' : ' ');
        std::snprintf(buf, sizeof buf, " %10.6g%c", x, mark);
      }
      s << buf;
    }
    s << (pr.n_k > kMaxScoreCols ? " ...\n" : "\n");
  }

  try {
    std::unique_ptr<Kernel> holder;
    const Kernel& kt = tiled(k, f, holder);
    if (kt.caps().unsupported_reason(pr, false).empty()) {
      const ForwardOutput fw = kt.forward(in);
      const ReferenceForward rf = reference_forward(in);
      s << "  O kernel vs exact (signed error in bf16 ulps of the exact value):\n";
      for (int i = 0; i < std::min(pr.n_q, kMaxRows); ++i) {
        s << "    [" << i << "]";
        for (int c = 0; c < std::min(pr.head_dim, kMaxCols); ++c) {
          const std::size_t x = pr.q_at(sb, sh, i, c);
          const double e = rf.o[x];
          char buf[96];
          std::snprintf(buf, sizeof buf, " %.6g/%.6g(%+.2f)", fw.o[x], e,
                        e != 0 && std::isfinite(e) ? (fw.o[x] - e) / ulp(e, Format::kBF16) : 0.0);
          s << buf;
        }
        s << "  LSE " << fmt_num(fw.lse[pr.row_at(sb, sh, i)]) << "/" << fmt_num(rf.lse[pr.row_at(sb, sh, i)]) << "\n";
      }
      // A failure in a gradient shows that gradient too (O alone hid a dV that was the whole failure).
      if (names_gradient(o.message) && !in.d_o.empty() && kt.caps().unsupported_reason(pr, true).empty()) {
        const BackwardOutput bw = kt.backward(in, fw);
        const ReferenceBackward rb = reference_backward(in);
        s << "  delta kernel vs exact:";
        for (int i = 0; i < std::min(pr.n_q, kMaxRows); ++i)
          s << " [" << i << "] " << fmt_num(bw.delta[pr.row_at(sb, sh, i)]) << "/" << fmt_num(rb.delta[pr.row_at(sb, sh, i)]);
        s << "\n";
        print_grad(s, "dQ", bw.dq, rb.dq, pr.q_at(sb, sh, 0, 0), pr.n_q, pr.head_dim);
        print_grad(s, "dK", bw.dk, rb.dk, pr.kv_at(sb, shk, 0, 0), pr.n_k, pr.head_dim);
        print_grad(s, "dV", bw.dv, rb.dv, pr.kv_at(sb, shk, 0, 0), pr.n_k, pr.head_dim);
      }
    }
  } catch (const std::exception& e) {
    s << "  (outputs unavailable: " << e.what() << ")\n";
  }
  return s.str();
}

}  // namespace attncheck
