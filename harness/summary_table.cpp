// summary_table.cpp — the terminal summary of a check run: one row per kernel, one column per property.
// A cell aggregates every family of that property: FAIL if any failed (with the first failure's key number),
// else pass if any passed, else degen / skip; "-" when the suite has no such pair. Plain ASCII, fixed width.
// Tested by report_test.cpp.
#include <algorithm>
#include <map>
#include <sstream>

#include "harness/run_report.h"

namespace attncheck {

std::string summary_table(const RunReport& r) {
  std::vector<std::string> kernels = r.kernels, props;
  for (const auto& e : r.entries) {
    if (std::find(kernels.begin(), kernels.end(), e.outcome.kernel) == kernels.end()) kernels.push_back(e.outcome.kernel);
    if (std::find(props.begin(), props.end(), e.outcome.property) == props.end()) props.push_back(e.outcome.property);
  }
  struct Cell {
    int pass = 0, fail = 0, skip = 0, degen = 0;
    std::string key;
  };
  std::map<std::pair<std::string, std::string>, Cell> cells;
  for (const auto& e : r.entries) {
    Cell& c = cells[{e.outcome.kernel, e.outcome.property}];
    switch (e.outcome.status) {
      case Status::kPass: ++c.pass; break;
      case Status::kFail:
        if (c.fail++ == 0) c.key = key_number(e.outcome);
        break;
      case Status::kSkip: ++c.skip; break;
      case Status::kDegenerate: ++c.degen; break;
    }
  }
  auto text = [&](const std::string& k, const std::string& p) -> std::string {
    auto it = cells.find({k, p});
    if (it == cells.end()) return "-";
    const Cell& c = it->second;
    if (c.fail) return "FAIL" + (c.key.empty() ? "" : " " + c.key);
    if (c.pass) return "pass";
    if (c.degen) return "degen";
    return "skip";
  };
  std::size_t kw = 6;
  for (const auto& k : kernels) kw = std::max(kw, k.size());
  std::vector<std::size_t> pw;
  for (const auto& p : props) {
    std::size_t w = p.size();
    for (const auto& k : kernels) w = std::max(w, text(k, p).size());
    pw.push_back(w);
  }
  std::ostringstream s;
  auto pad = [](const std::string& t, std::size_t w) { return t + std::string(w > t.size() ? w - t.size() : 0, ' '); };
  s << pad("kernel", kw);
  for (std::size_t i = 0; i < props.size(); ++i) s << "  " << pad(props[i], pw[i]);
  s << "\n" << std::string(kw, '-');
  for (std::size_t i = 0; i < props.size(); ++i) s << "  " << std::string(pw[i], '-');
  s << "\n";
  for (const auto& k : kernels) {
    s << pad(k, kw);
    for (std::size_t i = 0; i < props.size(); ++i) s << "  " << pad(text(k, props[i]), pw[i]);
    s << "\n";
  }
  s << r.entries.size() << " checks: " << r.count(Status::kPass) << " pass, " << r.count(Status::kFail) << " FAIL, "
    << r.count(Status::kSkip) << " skip, " << r.count(Status::kDegenerate) << " degenerate (discarded) in "
    << static_cast<int>(r.wall_seconds * 10) / 10.0 << " s\n";
  return s.str();
}

}  // namespace attncheck
