// report_junit.cpp — JUnit XML for CI dashboards: one <testsuite> per kernel, one <testcase> per (property,
// family), named by the family as checked (not the shrunk one, so a check keeps its name in a dashboard's history
// when it starts failing); <failure message=...> holds the verdict as checked (on that family), its text the shrunk
// verdict and report and the replay command; skips and degenerate families are <skipped message=.../>, and so is a
// failure known from `check --baseline` (its text the failure's, the run's exit 0); a check an interrupted run never ran is <error type="interrupted"/>, and a run
// that tested nothing (every check skipped or degenerate) has one <error type="nothing_tested"/>. Every
// attribute and text node goes through xml_escape, which also drops characters XML 1.0 forbids (control characters
// other than tab, newline, carriage return) and writes U+FFFD for bytes that are not UTF-8.
// Tested by report_test.cpp (a well-formedness checker parses the output back).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "harness/run_report.h"

namespace attncheck {

namespace {
std::string junit_name(const RunEntry& e) { return check_name(e).substr(e.outcome.kernel.size() + 3); }
// The length of the well-formed UTF-8 sequence at s[i] that XML 1.0 allows (no surrogates, nothing past
// U+10FFFF, no overlong forms, not U+FFFE/U+FFFF), or 0.
std::size_t utf8_char_at(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const std::size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  unsigned cp = c & (0xFF >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}
}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;  // keeps line breaks inside attributes
      case '\t': out += "&#9;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20) break;  // not allowed in XML 1.0, even escaped
        if (c < 0x80) {
          out += static_cast<char>(c);
        } else if (const std::size_t n = utf8_char_at(s, i)) {
          out.append(s, i, n);
          i += n - 1;
        } else {
          out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8 (a path in another encoding): the
                                    // document declares UTF-8, and one bad byte makes it ill-formed
        }
    }
  }
  return out;
}

namespace {
std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}
}  // namespace

std::string run_to_junit(const RunReport& r) {
  // Group by kernel, keeping the order kernels were given in.
  std::vector<std::string> order = r.kernels;
  std::map<std::string, std::vector<const RunEntry*>> by_kernel;
  // A check an interrupted run never ran is an <error> (a dashboard shows it red, not as a pass or a skip).
  std::set<const RunEntry*> not_run;
  for (const auto* list : {&r.entries, &r.not_run})
    for (const auto& e : *list) {
      if (!by_kernel.count(e.outcome.kernel) && std::find(order.begin(), order.end(), e.outcome.kernel) == order.end())
        order.push_back(e.outcome.kernel);
      by_kernel[e.outcome.kernel].push_back(&e);
      if (list == &r.not_run) not_run.insert(&e);
    }
  const std::string not_run_message =
      "not run: the run was interrupted by " + signal_name(r.interrupted_by) + " before this check ended";
  std::ostringstream x;
  // A failure known from --baseline is <skipped> with its failure text: the run exits 0 on it, and a dashboard that
  // counted it as a failure turned the build red (or Jenkins' "unstable") where check's gate is green.
  const int skipped = r.count(Status::kSkip) + r.count(Status::kDegenerate) + r.known_failures();
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // A complete run where every check skipped or was discarded tested nothing (check exits 2): one error says so, where
  // a dashboard read errors="0" skipped="N" as green (a UX review, session 34).
  const bool nothing_tested = std::string(run_verdict(r).name) == "nothing_tested";
  x << "<testsuites name=\"attncheck " << xml_escape(r.suite) << "\" tests=\""
    << r.entries.size() + r.not_run.size() + nothing_tested << "\" failures=\""
    << r.count(Status::kFail) - r.known_failures()
    << "\" errors=\"" << r.not_run.size() + nothing_tested << "\" skipped=\"" << skipped << "\" time=\""
    << secs(r.wall_seconds) << "\">\n";
  if (nothing_tested)
    x << "  <testsuite name=\"attncheck\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\" timestamp=\""
      << xml_escape(r.started_at) << "\">\n    <testcase classname=\"attncheck\" name=\"something was tested\" time=\"0\">\n"
      << "      <error message=\"nothing was tested: " << r.count(Status::kSkip) << " check(s) skipped, "
      << r.count(Status::kDegenerate) << " discarded as degenerate (attncheck check exits 2)\" type=\"nothing_tested\"/>\n"
      << "    </testcase>\n  </testsuite>\n";
  for (const auto& kernel : order) {
    const auto& es = by_kernel[kernel];
    int fails = 0, skips = 0, errors = 0;
    double time = 0;
    for (const RunEntry* e : es) {
      if (not_run.count(e)) {
        ++errors;
        continue;
      }
      fails += e->outcome.status == Status::kFail && !e->known_failure;
      skips += e->outcome.status == Status::kSkip || e->outcome.status == Status::kDegenerate || e->known_failure;
      time += e->outcome.seconds + e->outcome.shrink_seconds;
    }
    x << "  <testsuite name=\"" << xml_escape(kernel) << "\" tests=\"" << es.size() << "\" failures=\"" << fails
      << "\" errors=\"" << errors << "\" skipped=\"" << skips << "\" time=\"" << secs(time) << "\" timestamp=\""
      << xml_escape(r.started_at) << "\">\n";
    for (const RunEntry* e : es) {
      const Outcome& o = e->outcome;
      x << "    <testcase classname=\"attncheck." << xml_escape(kernel) << "\" name=\"" << xml_escape(junit_name(*e))
        << "\" time=\"" << secs(o.seconds + o.shrink_seconds) << "\"";
      if (not_run.count(e)) {
        const bool cause = !e->not_run_reason.empty();
        x << ">\n      <error message=\"" << xml_escape(cause ? "not run: " + e->not_run_reason : not_run_message)
          << "\" type=\"" << (cause ? "not_run" : "interrupted") << "\"/>\n    </testcase>\n";
        continue;
      }
      if (o.status == Status::kPass) {
        x << "/>\n";
        continue;
      }
      x << ">\n";
      if (o.status == Status::kFail) {
        std::string body = o.report.empty() ? o.message : o.report;
        if (!e->finding.empty()) body += "\nreplay: " + replay_command(e->finding, e->replay_extra, e->replay_env);
        if (!e->finding_error.empty()) body += "\nthe finding could not be saved: " + e->finding_error;
        // The message is the verdict on the family the test case is named by, as checked; the body has the shrunk
        // case's (a dashboard showed paper-fixed's dV:tied at z -19, the minimal case's, for a z -6.64 check).
        const std::string message = o.message_checked.empty() ? o.message : o.message_checked;
        if (!o.message_checked.empty()) body = "shrunk: " + o.message + "\n" + body;
        if (e->known_failure)
          x << "      <skipped message=\"" << xml_escape("known failure (failed in the baseline too): " + message)
            << "\">" << xml_escape(body) << "</skipped>\n";
        else
          x << "      <failure message=\"" << xml_escape(message) << "\" type=\"" << xml_escape(o.property) << "\">"
            << xml_escape(body) << "</failure>\n";
      } else {
        const std::string why = o.status == Status::kDegenerate ? "degenerate family: " + o.message : o.message;
        x << "      <skipped message=\"" << xml_escape(why) << "\"/>\n";
      }
      x << "    </testcase>\n";
    }
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

}  // namespace attncheck
