// corpus.h — replayable cases on disk: corpus/findings (what attncheck found), corpus/regression (minimised
// findings replayed by ctest), corpus/seeds (fuzz seeds).
//
// A case file is JSON (format documented in corpus/README.md): a format tag and version, the kernel and
// property, the (shrunk) family, the budget, the failing instance index, and the minimal instance itself with
// every input value stored as hex bits of its declared format (so the file pins the bits, and replay checks
// that the family still generates exactly them). load_case validates everything — truncated or malformed
// JSON, unknown versions, wrong tensor sizes, values not in the declared format — and throws attncheck::Error
// with the file name and the field. save_case writes to a temporary file and renames it, so a crash never
// leaves half a finding, and findings are written before they are reported.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/kernel.h"
#include "properties/property.h"

namespace attncheck {

// The newest case file version: 2 is a literal case (`literal`: its pinned instance is the input, shrunk past what the
// family makes; shrink.h). Every other case is written as version 1, and both are read.
constexpr int kLiteralCaseVersion = 2;
constexpr int kCorpusVersion = kLiteralCaseVersion;
// The largest family a case file without a pinned instance may ask for, and `check --family G[...]` may set: at most
// 2^24 scores and 2^24 elements of each of Q, K and V per instance (a forged 46340^3 asked for tens of GB; the
// suites' and the fuzz decoder's families are far below it).
bool within_case_limits(const Problem& p);
constexpr const char* kCaseLimits = "at most 2^24 scores and 2^24 elements of Q, K and V per instance";

struct Case {
  std::string kernel;
  std::string property;
  Family family;
  Budget budget;
  std::uint64_t instance_index = 0;
  std::optional<Instance> instance;  // the minimal failing instance (per-instance properties), pinned bits
  // The instance is the input itself (version 2), not instance `instance_index` of `family`, which is where it was
  // shrunk from: replay checks the property on it alone (Property::check_literal) and regenerates nothing.
  bool literal = false;
  Status expected = Status::kFail;   // the verdict replay must reproduce
  nlohmann::json stats;              // the statistic when found (mean ulp, z, T, max error, ...)
  std::string found_by;              // "check", "fuzz", "manual"
  std::string found_at;              // ISO-8601 UTC
  std::string note;
};

// load_case's error for a run report (`check --json`, format "attncheck-run"): attncheck's own file, not a case;
// replay passes it over, named, as it does fuzz summaries (a report kept beside the findings made replay exit 2).
struct NotACase : Error {
  using Error::Error;
};

nlohmann::json case_to_json(const Case& c);
Case case_from_json(const nlohmann::json& j, const std::string& origin);  // origin names the file in errors
void save_case(const std::string& path, const Case& c);
Case load_case(const std::string& path);
// Replaces the `stats` of the case file at `path` (which load_case read) and nothing else: fields this version does
// not know are kept; the file is rewritten in save_case's layout. For `replay --update-stats`.
void update_case_stats(const std::string& path, const nlohmann::json& stats);
// Replaces the `expected` verdict and the `stats` of the case file at `path` (which load_case read), and its `note`
// when `note` is not empty, and nothing else: `replay --update-expected`, after a fix (a finding that now passes
// becomes a regression case; one that fails otherwise takes the new message as its note).
void update_case_verdict(const std::string& path, Status expected, const nlohmann::json& stats,
                         const std::string& note = "");
// Writes the case into dir under a stable name (kernel-property-generator-<hash>.json); returns the path.
std::string write_finding(const std::string& dir, const Case& c);
// Re-runs the case's property on its family (and checks the pinned instance still generates the same bits); a literal
// case's on its instance alone (Property::check_literal). `replayed.status == c.expected` is what "same verdict" means.
Outcome replay_case(const Case& c, const Registry& r);

nlohmann::json instance_to_json(const Instance& in);
Instance instance_from_json(const nlohmann::json& j, const std::string& origin);

// ---- additions (engineer D): helpers the CLI and the tests share -----------------------------------------
// Same as above, but may also instantiate a parameterised kernel name ("paper-fixed[beta=4]").
Outcome replay_case(const Case& c, Registry& r);
// "literal instance [<its problem>] from instance N of " for a literal case (what replay's line and the fuzz summary
// put before the family's description), "" for another.
std::string literal_origin(const Case& c);
// A case for an outcome found by `check` (or the fuzzer): pins make_instance(o.family, o.instance_index), or the
// outcome's literal instance (a literal case, version 2), expects o.status, stamps found_at with the current UTC time.
Case case_from_outcome(const Outcome& o, const Budget& b, const std::string& found_by);
// The stable file name write_finding uses: kernel-property-generator-<8 hex digits>.json, where the kernel
// name is sanitised ('[', ']', ',', '=', '/', ':' and anything else outside [A-Za-z0-9._-] become '_' or
// '-'; a name over 64 characters keeps 55 and "~<8 hex digits of its hash>") and the hash covers kernel, property,
// family and instance index (the same finding keeps its name).
std::string finding_file_name(const Case& c);
// One part of a file name as finding_file_name spells a kernel ("paper-fixed[beta=4]" -> "paper-fixed_beta-4");
// `attncheck fuzz` names its summary, raw folder and working corpus the same way.
std::string file_name_part(const std::string& s);
// The first difference between two instances (problem fields, seed, then tensors bit for bit, -0 != +0),
// or "" when they are identical.
std::string instance_difference(const Instance& pinned, const Instance& now);
// Whether parameter `key` of `f` changes what f makes: its first 4 instances differ from f's without the key (one
// instance may draw alike by chance: tie_rows' rows, keep's mask; a family the generator cannot make without it
// counts as differing), or, where the value is the one the generator takes
// without it (tied_max[ties=2,ties_min=2]: 2 is ties_min's own), another value of its domain changes instance 0.
// `check --family` refuses a parameter the generator does not list where it does not act (rank on constant_v was
// shown in the family and did nothing); `replay` notes one in a case file.
bool param_acts(const Family& f, const std::string& key);
// "2026-11-29T23:59:59Z".
std::string utc_now_iso8601();

// Writes text to path atomically (tmp + rename): case files, reports, fuzz summaries. A path that exists and is not
// a regular file (a symbolic link, written through; /dev/stdout, a FIFO, a device) is written in place instead. A
// regular file there keeps its permissions (and its owner, as root); one without its owner's write bit is not
// replaced; a hard-linked one is replaced under this name only. Throws Error naming path on failure (a full disk, a
// read-only file included).
void write_text_file(const std::string& path, const std::string& text);
// The text of a regular file of at most max_bytes: a FIFO would block the reader and /dev/zero fill memory. Error
// naming `label` (the path, or "--baseline PATH") where it is missing, not a regular file, larger ("N bytes, more
// than <limit_name>'s limit of M MiB") or unreadable. Case files (load_case) and --baseline reports read through it.
std::string read_bounded_file(const std::string& path, std::uintmax_t max_bytes, const std::string& label,
                              const std::string& limit_name);
// `text` parsed as JSON, refusing a key twice in one object and nesting deeper than 64 levels (nlohmann copies
// values recursively: a value 100,000 levels deep crashed on the stack); each Error names `at`. Case files and
// --baseline reports are parsed through it.
nlohmann::json parse_json_strictly(const std::string& text, const std::string& at);
// Whether file_name (no folder) is such a write's temporary, "<target>.tmp.<pid>.<8 hex digits>" (`target` gets the
// name it was to replace). One is left behind only when the process was killed mid-write (SIGKILL, a power loss).
bool is_save_temporary(const std::string& file_name, std::string* target = nullptr);

// Output paths checked before a run, so that a run never ends with its findings or report unwritable. Both throw
// Error naming `option`: the directory is created if missing and must take a new file; the file's folder must
// exist and take a new file, and the path must not be a directory (an existing link, terminal, pipe or device, such
// as /dev/stdout, must take writes itself: reports are written into it in place).
void require_writable_dir(const std::string& dir, const std::string& option);
void require_writable_file(const std::string& path, const std::string& option);
// A decimal unsigned 64-bit number, strictly (digits only, no sign, no overflow); Error naming `option` otherwise.
std::uint64_t parse_u64(const std::string& text, const std::string& option);

}  // namespace attncheck
