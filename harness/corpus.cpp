// corpus.cpp — case files: JSON encoding (corpus/README.md), validated loading, atomic saving, stable finding
// names, and replay with a generator-drift check.
//
// Invariants: a loaded Case is fully validated (every field present and typed, tensors sized by the problem,
// every value a valid non-NaN pattern of its declared format); every error names the file and the field.
// save_case writes <path>.tmp.<pid>.<random> and renames it over <path> (atomic on POSIX), so a crash never leaves a
// half-written finding. Replay: ctest -L corpus; by hand: attncheck replay corpus/regression/*.json
#include "harness/corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "harness/json_fields.h"
#include "harness/run_report.h"
#include "properties/family_internal.h"  // with_acting_params
#include "properties/report.h"
#include "properties/shrink.h"  // fault_kind

namespace attncheck {

using json_fields::At;
using nlohmann::json;

namespace {

constexpr const char* kCaseTag = "attncheck-case";

Status parse_status(const std::string& s, const At& at) {
  if (const std::optional<Status> st = status_from_name(s)) return *st;
  at.fail("\"" + s + "\" is not a verdict (pass, fail, skip, degenerate)");
}

// Who found a case: one of the three writers (check, fuzz) or a person (manual); anything else is a typo that a
// corpus summary would count as a fourth source.
std::string parse_found_by(const std::string& s, const At& at) {
  if (s == "check" || s == "fuzz" || s == "manual") return s;
  at.fail("\"" + s + "\" is not a source (check, fuzz, manual)");
}

// When: ISO-8601 UTC to the second, as utc_now_iso8601 writes it ("2026-11-29T23:59:59Z"), with a real date.
std::string parse_found_at(const std::string& s, const At& at) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, n = 0;
  // Digits at every place but the separators' (sscanf's %2d also reads a sign: "T-1:59:-1Z" passed).
  const auto digits_between = [&] {
    for (std::size_t i = 0; i < s.size(); ++i)
      if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && i != 19 && !std::isdigit(static_cast<unsigned char>(s[i])))
        return false;
    return true;
  };
  const bool shape = s.size() == 20 && digits_between() &&
                     std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi, &sec, &n) == 6 &&
                     n == 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':';
  const int days[] = {31, (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (!shape || mo < 1 || mo > 12 || d < 1 || d > days[mo - 1] || h > 23 || mi > 59 || sec > 60)
    at.fail("\"" + s + "\" is not an ISO-8601 UTC time like \"2026-11-29T23:59:59Z\"");
  return s;
}

json budget_to_json(const Budget& b) {
  return {{"instances", b.instances}, {"seconds", b.seconds}, {"epsilon_ulp", b.epsilon_ulp}, {"z_crit", b.z_crit}};
}

Budget budget_from(const json& j, const At& at) {
  json_fields::only_fields(j, json_fields::keys_of(budget_to_json(Budget{})), at);  // the fields the writer writes
  Budget b;
  b.instances = static_cast<int>(json_fields::int_at(json_fields::field(j, "instances", at), at / "instances", 1, 1 << 30));
  b.seconds = json_fields::number_at(json_fields::field(j, "seconds", at), at / "seconds");
  b.epsilon_ulp = json_fields::number_at(json_fields::field(j, "epsilon_ulp", at), at / "epsilon_ulp");
  b.z_crit = json_fields::number_at(json_fields::field(j, "z_crit", at), at / "z_crit");
  if (b.seconds < 0) (at / "seconds").fail("must be >= 0");
  if (b.epsilon_ulp < 0) (at / "epsilon_ulp").fail("must be >= 0");
  if (b.z_crit <= 0) (at / "z_crit").fail("must be > 0");
  return b;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// At most kMaxNamePart characters: a longer part keeps its first 55 and "~" and 8 hex digits of the whole name's
// hash. A plugin kernel's name has no length limit, and a 300-character one made every finding's file name too long
// to create (each failure was unsaved: exit 2). 64 leaves room for property, generator, hash and the ".tmp.<pid>.<8 hex>"
// of the write within NAME_MAX (255).
constexpr std::size_t kMaxNamePart = 64;

std::string sanitise(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ']') continue;
    if (c == '=') out += '-';
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') out += c;
    else out += '_';
  }
  if (out.size() > kMaxNamePart) {
    char hash[16];
    std::snprintf(hash, sizeof hash, "~%08llx", static_cast<unsigned long long>(fnv1a(s) & 0xffffffffull));
    out = out.substr(0, kMaxNamePart - 9) + hash;
  }
  return out.empty() ? "unnamed" : out;
}


// Bitwise equality of doubles: -0 differs from +0, and a NaN equals the same NaN bits.
bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

std::string tensor_difference(const char* name, const std::vector<double>& a, const std::vector<double>& b, Format f) {
  if (a.size() != b.size())
    return std::string(name) + " has " + std::to_string(b.size()) + " values, the file pins " + std::to_string(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_bits(a[i], b[i])) {
      const int digits = format_info(f).bits / 4;
      return std::string(name) + "[" + std::to_string(i) + "] is " + json_fields::to_hex(encode(b[i], f), digits) +
             ", the file pins " + json_fields::to_hex(encode(a[i], f), digits);
    }
  }
  return "";
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool within_case_limits(const Problem& a) {
  constexpr double kMaxElements = 16777216.0;  // 2^24
  const double rows = double(a.batch) * a.heads_q * a.n_q;
  const double scores = rows * a.n_k, q = rows * a.head_dim, kv = double(a.batch) * a.heads_kv * a.n_k * a.head_dim;
  return scores <= kMaxElements && q <= kMaxElements && kv <= kMaxElements;
}

json case_to_json(const Case& c) {
  json j;
  j["format"] = kCaseTag;
  j["version"] = c.literal ? kLiteralCaseVersion : 1;
  if (c.literal) j["literal"] = true;
  j["kernel"] = c.kernel;
  j["property"] = c.property;
  j["family"] = family_to_json(c.family);
  j["budget"] = budget_to_json(c.budget);
  j["instance_index"] = c.instance_index;
  j["instance"] = c.instance ? instance_to_json(*c.instance) : json(nullptr);
  j["expected"] = status_name(c.expected);
  j["stats"] = c.stats.is_null() ? json::object() : c.stats;
  j["found_by"] = c.found_by;
  j["found_at"] = c.found_at;
  j["note"] = c.note;
  return j;
}

Case case_from_json(const json& j, const std::string& origin) {
  const At top{origin, ""};
  json_fields::object(j, top);
  const std::string tag = json_fields::string_at(json_fields::field(j, "format", top), top / "format");
  if (tag == kRunReportTag) throw NotACase(origin + ": a run report (attncheck check --json), not a case");
  if (tag != kCaseTag) (top / "format").fail("is \"" + tag + "\", expected \"" + kCaseTag + "\" (not a case file?)");
  const auto version = json_fields::int_at(json_fields::field(j, "version", top), top / "version", INT32_MIN, INT32_MAX);
  if (version != 1 && version != kLiteralCaseVersion)
    (top / "version").fail("unknown version " + std::to_string(version) + " (this attncheck reads versions 1 and " +
                           std::to_string(kLiteralCaseVersion) + ")");
  // Other top-level fields are a reader's annotations (kept by --update-stats): every field read here is required,
  // so a misspelt one is missing. Inside family, budget and instance, a field not read is refused (only_fields):
  // there an optional one (instance.d_o) or a second spelling beside the real one ("cuasal" beside "causal") was
  // passed over, and the case checked something other than its file said.
  Case c;
  if (version == kLiteralCaseVersion) {  // a literal case says so, and only version 2 may
    const json& lit = json_fields::field(j, "literal", top);
    if (!lit.is_boolean() || !lit.get<bool>()) (top / "literal").fail("must be true in a version 2 case");
    c.literal = true;
  } else if (j.contains("literal")) {
    (top / "literal").fail("is a version 2 field (a version 1 case regenerates its instance from the family)");
  }
  c.kernel = json_fields::string_at(json_fields::field(j, "kernel", top), top / "kernel");
  if (c.kernel.empty()) (top / "kernel").fail("must not be empty");
  c.property = json_fields::string_at(json_fields::field(j, "property", top), top / "property");
  if (c.property.empty()) (top / "property").fail("must not be empty");
  // Names reach the terminal and error messages: a control byte there is a hostile or damaged file (a NUL cut the
  // error message short; an escape sequence reached the terminal).
  for (const auto& [name, at] : {std::pair{&c.kernel, top / "kernel"}, std::pair{&c.property, top / "property"}})
    if (printable(*name) != *name)
      at.fail("\"" + printable(*name) + "\" is not printable text (a control character or a byte that is not UTF-8)");
  const json& fam = json_fields::object(json_fields::field(j, "family", top), top / "family");
  // family_from_json reads the fields family_to_json writes and passes over others: those are refused here.
  const json written = family_to_json(Family{});
  json_fields::only_fields(fam, json_fields::keys_of(written), top / "family");
  if (fam.contains("problem") && fam["problem"].is_object())
    json_fields::only_fields(fam["problem"], json_fields::keys_of(written["problem"]), top / "family" / "problem");
  try {
    c.family = family_from_json(fam);
  } catch (const Error& e) {
    std::string why = e.what();  // family_from_json says "family: ..." itself; the path already names it
    if (why.rfind("family: ", 0) == 0) why.erase(0, 8);
    (top / "family").fail(why);
  } catch (const json::exception& e) {
    (top / "family").fail(e.what());
  }
  c.budget = budget_from(json_fields::field(j, "budget", top), top / "budget");
  c.instance_index = json_fields::uint_at(json_fields::field(j, "instance_index", top), top / "instance_index");
  // The check draws instances 0 .. instances − 1: an index past them names an instance the replay never runs.
  if (c.instance_index >= static_cast<std::uint64_t>(c.budget.instances))
    (top / "instance_index").fail(std::to_string(c.instance_index) + " is not below budget.instances " +
                                  std::to_string(c.budget.instances) + " (the check draws instances 0 to " +
                                  std::to_string(c.budget.instances - 1) + ")");
  // The family's shape decides the memory and the time whether or not an instance is pinned (a pinned instance
  // bounds Q, K and V through the file's size, not the n_q·n_k scores: a 2 MB case at n_q = n_k = 40000 took 12 GB
  // before bad_alloc), and Problem::validate allows 2^31 elements per tensor (the corpus's largest family: 512 scores).
  const auto bound_shape = [](const Problem& shape, const auto& at) {  // the family's, and a literal instance's
    if (!within_case_limits(shape))
      at.fail("shape " + shape.describe() + " is larger than a case file may ask for (" + kCaseLimits + ")");
  };
  bound_shape(c.family.problem, top / "family");
  const json& inst = json_fields::field(j, "instance", top);
  if (c.literal && inst.is_null()) (top / "instance").fail("is null in a literal case (the instance is its input)");
  if (!inst.is_null()) {
    c.instance = instance_from_json(inst, origin);
    // The family generates instances of its own shape; a pinned instance of another shape would only be noticed
    // after generating one (which a forged n_k of 10^9 turns into gigabytes). A literal instance has its own shape
    // (smaller than the family's, as shrunk), bounded as a family's is: its Q, K and V by the file, not its scores.
    const Problem &a = c.family.problem, &b = c.instance->problem;
    if (c.literal) {
      // Its dO is read as given (a version 1 case's optional d_o is regenerated; causal_prefix writes into it).
      if (c.instance->d_o.empty()) (top / "instance").fail("has no d_o: a literal case's instance needs every tensor");
      bound_shape(b, top / "instance");
    } else if (a.batch != b.batch || a.heads_q != b.heads_q || a.heads_kv != b.heads_kv || a.n_q != b.n_q ||
               a.n_k != b.n_k || a.head_dim != b.head_dim) {
      (top / "family").fail("shape " + a.describe() + " differs from the pinned instance's " + b.describe());
    }
  }
  c.expected = parse_status(json_fields::string_at(json_fields::field(j, "expected", top), top / "expected"), top / "expected");
  // A statistic over instances takes kMinBiasInstances to kMaxBiasInstances: outside, every replay is a skip, which
  // read as a differing verdict (exit 1) where a file expecting another verdict cannot be replayed as written (a UX
  // review, session 34). A file that expects the skip stays valid.
  bool across_instances = false, known_property = false;
  try {
    across_instances = get_property(c.property).across_instances;
    known_property = true;
  } catch (const Error&) {  // an unknown property: replay names it
  }
  // Only a statistic over instances discards a family as degenerate: a per-instance property's replay never gives
  // it, so such a file differed on every replay (exit 1) as if the kernel had changed (a CLI review, session 39).
  if (c.literal && across_instances)
    (top / "literal").fail("a literal case is one instance: " + c.property + " is a statistic over instances");
  if (known_property && !across_instances && c.expected == Status::kDegenerate)
    (top / "expected").fail("\"degenerate\" is never " + c.property + "'s verdict (a per-instance property: pass, fail "
                            "or skip)");
  if (across_instances && c.expected != Status::kSkip &&
      (c.budget.instances < kMinBiasInstances || c.budget.instances > kMaxBiasInstances))
    (top / "budget" / "instances").fail(std::to_string(c.budget.instances) + " is outside the " +
                                        std::to_string(kMinBiasInstances) + " to " + std::to_string(kMaxBiasInstances) +
                                        " instances " + c.property + " takes (every replay a skip, not the expected " +
                                        status_name(c.expected) + ")");
  c.stats = json_fields::object(json_fields::field(j, "stats", top), top / "stats");
  c.found_by = parse_found_by(json_fields::string_at(json_fields::field(j, "found_by", top), top / "found_by"), top / "found_by");
  c.found_at = parse_found_at(json_fields::string_at(json_fields::field(j, "found_at", top), top / "found_at"), top / "found_at");
  c.note = json_fields::string_at(json_fields::field(j, "note", top), top / "note");
  return c;
}

namespace {
// Whether write_text_file writes `path` in place: a symbolic link (to a file, or /dev/stdout's to whatever stdout
// is), a terminal, pipe or device (a FIFO, /dev/full). Those are never replaced by a rename, which put a regular
// file where the link was (and, run as root, where /dev/stdout's link or /dev/full's device node was). lstat, not
// stat: a link to a regular file (/dev/stdout redirected to one) was renamed over too. A dangling link is not
// (there is nothing to write through to): it is replaced, as before. require_writable_file asks the same question,
// so its check is of the file that will be written. A regular file with hard links is replaced too (its other
// names keep the old contents): written in place, a failed write (a full disk) would lose the case under every name.
bool written_in_place(const std::string& path) {
  struct stat link {}, target {};
  return ::lstat(path.c_str(), &link) == 0 && !S_ISREG(link.st_mode) && ::stat(path.c_str(), &target) == 0;
}

// Is path itself a regular file (not a link to one: /dev/stderr's target is written in place, as its descriptor
// allows)? Its lstat in `st`.
bool regular_file_at(const std::string& path, struct stat& st) {
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
// A regular file its owner may not write: chmod a-w, kept on purpose.
bool read_only(const struct stat& st) { return (st.st_mode & S_IWUSR) == 0; }
}  // namespace

namespace {
// Opens a new temporary file beside `path` that no other writer has: O_EXCL on "<path>.tmp.<pid>.<8 random hex
// digits>". The pid alone did not make it unique: two attncheck runs in two containers (pid namespaces) or on two
// hosts sharing a corpus directory have the same pid (1, or a small one), and two deterministic runs reach the same
// finding at the same moment: both wrote one <path>.tmp.1, one's rename took the other's file, and the other's rename
// failed ("No such file or directory": the finding counted as unsaved, exit 2; 5 of 15 such pairs). Returns -1 with
// errno set when no file could be created.
constexpr char kTempInfix[] = ".tmp.";  // is_save_temporary (corpus.h) reads the name back

int open_unique_temp(const std::string& path, std::string& tmp) {
  std::random_device random;
  for (int attempt = 0; attempt < 64; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, ".%08x", static_cast<unsigned>(random()));
    tmp = path + kTempInfix + std::to_string(::getpid()) + suffix;
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // 0666: the umask applies
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;  // errno is EEXIST
}

// Writes all of text to fd, flushes it to the disk and closes it; errno of the first failure (a full disk: at write,
// at fsync, or at close on NFS). fsync before the rename: without it a power loss or a host crash soon after could
// leave the renamed name on an empty or partial file (ext4, XFS order the rename's metadata, not the data), a finding
// "saved" and printed, then gone. A filesystem that cannot fsync (EINVAL) keeps the write as it is.
int write_all_and_close(int fd, const std::string& text) {
  int err = 0;
  for (std::size_t done = 0; done < text.size() && err == 0;) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += static_cast<std::size_t>(n);
    else if (n < 0 && errno != EINTR) err = errno;
    else if (n == 0) err = EIO;
  }
  if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  return err;
}

// The directory entry a rename made, flushed too (best effort: the file itself is already on the disk, and a
// directory that cannot be opened or synced is no reason to call a written finding lost).
void sync_parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  (void)::fsync(dir);
  ::close(dir);
}
}  // namespace

bool is_save_temporary(const std::string& file_name, std::string* target) {
  const std::size_t at = file_name.rfind(kTempInfix);
  if (at == std::string::npos || at == 0) return false;
  const std::string rest = file_name.substr(at + sizeof kTempInfix - 1);  // "<pid>.<8 hex>"
  const std::size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 8) return false;
  const bool ok = std::all_of(rest.begin(), rest.begin() + dot, [](unsigned char c) { return std::isdigit(c); }) &&
                  std::all_of(rest.begin() + dot + 1, rest.end(), [](unsigned char c) { return std::isxdigit(c); });
  if (ok && target) *target = file_name.substr(0, at);
  return ok;
}

void write_text_file(const std::string& path, const std::string& text) {
  // A regular file already there keeps its permissions and, where this process may set it, its owner (a 0600 case
  // became 0644 under the umask); one its owner cannot write (chmod a-w: kept on purpose) is not replaced (the
  // rename did it, root or not).
  struct stat old {};
  const bool exists = regular_file_at(path, old);
  if (exists && read_only(old)) throw Error("cannot write " + path + ": it is read-only (make it writable to replace it)");
  if (!exists && written_in_place(path)) {
    std::ofstream out(path, std::ios::binary);
    if (!out) throw Error("cannot write " + path + ": " + std::strerror(errno));
    out << text;
    if (!out.flush()) throw Error("cannot write " + path + ": " + std::strerror(errno));
    return;
  }
  std::string tmp;
  const int fd = open_unique_temp(path, tmp);
  // The errors name the file asked for (the temporary's name meant nothing to the reader), then the temporary.
  if (fd < 0) throw Error("cannot write " + path + " (through " + tmp + "): " + std::strerror(errno));
  if (exists) {  // best effort: the contents matter more (set-id bits are not copied; chown works as root only)
    (void)::fchown(fd, old.st_uid, old.st_gid);
    (void)::fchmod(fd, old.st_mode & 0777);
  }
  if (const int err = write_all_and_close(fd, text); err != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + path + " (through " + tmp + "): " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  sync_parent_directory(path);
}

// A plugin's message or name need not be UTF-8: such bytes become U+FFFD rather than the save failing (the
// finding was lost). The note is informative; kernel and property names are valid text (load_case checks).
void save_case(const std::string& path, const Case& c) {
  write_text_file(path, case_to_json(c).dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

namespace {
// Why a case file's text is not UTF-8, for the error, or "" when it may be: UTF-16/32 text (a byte-order mark, or
// NUL bytes between its characters) or not text at all (a gzipped case, a binary: these were called UTF-16 or
// UTF-32 text too). A UTF-8 byte-order mark is read through (nlohmann skips it).
std::string not_utf8_text(const std::string& t) {
  if (t.find('\0') == std::string::npos && t.rfind("\xFF\xFE", 0) != 0 && t.rfind("\xFE\xFF", 0) != 0) return "";
  if (t.rfind("\xFF\xFE", 0) == 0 || t.rfind("\xFE\xFF", 0) == 0)
    return "UTF-16 or UTF-32 text (a byte-order mark): save the case as UTF-8";
  if (t.rfind("\x1F\x8B", 0) == 0) return "gzip-compressed, not a JSON text: gunzip it first";
  // A case opens with '{': UTF-16 puts a NUL beside it, UTF-32 three (either byte order), whatever follows.
  for (const char* open : {"{\0\0\0", "\0\0\0{"})
    if (t.compare(0, 4, open, 4) == 0) return "UTF-32 text (NUL bytes between the characters): save the case as UTF-8";
  for (const char* open : {"{\0", "\0{"})
    if (t.compare(0, 2, open, 2) == 0) return "UTF-16 text (NUL bytes between the characters): save the case as UTF-8";
  std::size_t nul = 0;
  bool ascii = true;
  for (const char c : t) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0) ++nul;
    else if (u >= 0x80 || (u < 0x20 && u != '\n' && u != '\r' && u != '\t')) ascii = false;
  }
  if (ascii && 2 * nul >= t.size()) return "UTF-16 or UTF-32 text (NUL bytes between the characters): save the case as UTF-8";
  return "binary data (NUL bytes), not a JSON text";
}

// The whole file as text; Error naming `label` (the path where it is empty) when it cannot be read.
std::string read_text(const std::string& path, const std::string& label = "") {
  const std::string& said = label.empty() ? path : label;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(said + ": cannot read: " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(said + ": cannot read");
  return buf.str();
}
}  // namespace

std::string read_bounded_file(const std::string& path, std::uintmax_t max_bytes, const std::string& label,
                              const std::string& limit_name) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec) throw Error(label + ": cannot read: " + ec.message());
  if (!std::filesystem::is_regular_file(st)) throw Error(label + ": not a regular file");
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_bytes)
    throw Error(label + ": " + std::to_string(size) + " bytes, more than " + limit_name + "'s limit of " +
                std::to_string(max_bytes >> 20) + " MiB");
  return read_text(path, label);
}

namespace {
// Rewrites the case file at `path` (which load_case has read: valid, bounded in size and depth) with `edit` applied;
// the fields it does not touch stay as they are.
void rewrite_case(const std::string& path, const std::function<void(json&)>& edit) {
  json j = json::parse(read_text(path));
  edit(j);
  write_text_file(path, j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}
}  // namespace

void update_case_stats(const std::string& path, const nlohmann::json& stats) {
  rewrite_case(path, [&](json& j) { j["stats"] = stats; });
}

void update_case_verdict(const std::string& path, Status expected, const nlohmann::json& stats,
                         const std::string& note) {
  rewrite_case(path, [&](json& j) {
    j["expected"] = status_name(expected);
    j["stats"] = stats.is_null() ? json::object() : stats;
    if (!note.empty()) j["note"] = note;
  });
}

json parse_json_strictly(const std::string& text, const std::string& at) {
  json j;
  // A key twice in one object: JSON leaves it open, nlohmann keeps the last, so an appended "kernel" silently
  // replayed the case on another kernel. Refused, naming the key.
  std::vector<std::set<std::string>> keys_seen;  // one set per open object
  std::string duplicate;
  // A case file nests four levels, a run report six; deep nesting is hostile, and nlohmann copies values
  // recursively (a stats object 90,000 levels deep crashed replay on the stack, a baseline's "format" 100,000 deep
  // crashed check). Refused while parsing, before any copy.
  constexpr int kMaxDepth = 64;
  const json::parser_callback_t no_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxDepth) throw Error(at + ": nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (event == json::parse_event_t::object_start) keys_seen.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys_seen.empty()) keys_seen.pop_back();
    else if (event == json::parse_event_t::key && !keys_seen.empty() && duplicate.empty() &&
             !keys_seen.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(text, no_duplicates);
  } catch (const json::exception& e) {
    // parse_error carries the byte position ("at line 3, column 7"); out_of_range 406 is a number too large
    // for a double (found by the parser fuzzer: "301461754E0465973036").
    throw Error(at + ": truncated or malformed JSON: " + printable(e.what()));
  }
  if (!duplicate.empty()) throw Error(at + ": the key '" + printable(duplicate) + "' appears twice in one object");
  return j;
}

Case load_case(const std::string& path) {
  // Case files are small (the largest committed one is ~25 KB): a FIFO would block the replay and /dev/zero would
  // fill memory, so only a regular file of at most kMaxCaseBytes is read.
  constexpr std::uintmax_t kMaxCaseBytes = std::uintmax_t(64) << 20;
  const std::string text = read_bounded_file(path, kMaxCaseBytes, path, "a case file");
  if (text.empty()) throw Error(path + ": empty file (truncated?)");
  // Saved as UTF-16 or UTF-32 (an editor's "Unicode", PowerShell's `>`): the parser saw a byte 0xFF or 0 at line 1,
  // column 1 and said only "invalid literal".
  if (const std::string why = not_utf8_text(text); !why.empty()) throw Error(path + ": " + why);
  const json j = parse_json_strictly(text, path);
  try {
    return case_from_json(j, path);
  } catch (const json::exception& e) {  // a field the checks above did not foresee: still a clear error
    throw Error(path + ": malformed case: " + printable(e.what()));
  }
}

std::string file_name_part(const std::string& s) { return sanitise(s); }

std::string finding_file_name(const Case& c) {
  std::string key = c.kernel + "\n" + c.property + "\n" + family_to_json(c.family).dump() + "\n" +
                    std::to_string(c.instance_index);
  // A kernel fault is another finding than a wrong output, and a SIGSEGV another than an abort or a stray write, on
  // the same shrunk family: each saved over the last under one name (a UX review, session 34). Other names stay.
  if (const std::string kind = fault_kind(c.note); !kind.empty()) key += "\n" + kind;
  char hash[16];
  std::snprintf(hash, sizeof hash, "%08llx", static_cast<unsigned long long>(fnv1a(key) & 0xffffffffull));
  return sanitise(c.kernel) + "-" + sanitise(c.property) + "-" + sanitise(c.family.generator) + "-" + hash + ".json";
}

namespace {
// Creates and removes a file in `dir`: "" when that works, else why not.
std::string cannot_write_in(const std::filesystem::path& dir) {
  const std::filesystem::path probe = dir / (".attncheck-write-test." + std::to_string(::getpid()));
  std::ofstream out(probe, std::ios::binary | std::ios::trunc);
  if (!out) return std::strerror(errno);
  out.close();
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  return "";
}
}  // namespace

void require_writable_dir(const std::string& dir, const std::string& option) {
  if (dir.empty()) throw Error(option + ": an empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::error_code ignored;
  // An existing file is said plainly (create_directories' error read "cannot create the directory: Not a directory").
  if (std::filesystem::exists(dir, ignored) && !std::filesystem::is_directory(dir, ignored))
    throw Error(option + " " + dir + ": a file, not a directory");
  if (ec) throw Error(option + " " + dir + ": cannot create the directory: " + ec.message());
  if (const std::string why = cannot_write_in(dir); !why.empty())
    throw Error(option + " " + dir + ": cannot write there: " + why);
}

void require_writable_file(const std::string& path, const std::string& option) {
  if (path.empty()) throw Error(option + ": an empty path");
  if (path == "-")  // it made a file named "-"
    throw Error(option + " -: standard output is not a file here");
  // A report written over a saved case loses the case (a tab-completed corpus/regression/... path did).
  if (std::filesystem::is_regular_file(path) && std::filesystem::file_size(path) <= (std::uintmax_t(64) << 20)) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("format", json()) == kCaseTag)
      throw Error(option + " " + path + ": a saved case (attncheck-case); a report would replace it");
  }
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) throw Error(option + " " + path + ": is a directory");
  if (struct stat st {}; regular_file_at(path, st) && read_only(st))
    throw Error(option + " " + path + ": it is read-only (make it writable to replace it)");
  if (written_in_place(path)) {
    // A link, /dev/stdout, a FIFO, a device: written in place, so it (a link's target) must take writes itself.
    // access(), not a test open: opening a FIFO for writing waits for its reader.
    if (::access(path.c_str(), W_OK) != 0) throw Error(option + " " + path + ": cannot write: " + std::strerror(errno));
    return;
  }
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir))  // a file in the way is said as one (it read "no directory base.json")
    throw Error(option + " " + path + ": " + dir.string() +
                (std::filesystem::exists(dir) ? " is not a directory" : ": no such directory"));
  if (const std::string why = cannot_write_in(dir); !why.empty())
    throw Error(option + " " + path + ": cannot write in " + dir.string() + ": " + why);
}

std::uint64_t parse_u64(const std::string& text, const std::string& option) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end || ec != std::errc() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw Error(option + " '" + text + "': not an unsigned 64-bit decimal number (0 to 18446744073709551615)");
  return v;
}

std::string write_finding(const std::string& dir, const Case& c) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create findings directory " + dir + ": " + ec.message());
  const std::string path = (std::filesystem::path(dir) / finding_file_name(c)).string();
  save_case(path, c);
  return path;
}

std::string literal_origin(const Case& c) {
  if (!c.literal) return "";
  return std::string(kLiteralInstance) + " [" + c.instance->problem.describe() + "] from instance " +
         std::to_string(c.instance_index) + " of ";
}

Case case_from_outcome(const Outcome& o, const Budget& b, const std::string& found_by) {
  Case c;
  c.kernel = o.kernel;
  c.property = o.property;
  c.family = with_acting_params(o.family);  // the same instances, the counts as they act (pad 31 at n_k 32, not 1000)
  c.budget = b;
  if (b.seconds > 0 && o.instances_run > 0) {
    // A time budget is not replayable: a replay on a slower or busier machine draws fewer instances (a per-instance
    // failure not reached, a bias test over a smaller T). Pin what the failing check actually ran.
    c.budget.seconds = 0;
    c.budget.instances = o.instances_run;
  }
  c.instance_index = o.instance_index;
  c.instance = o.literal ? *o.literal : make_instance(o.family, o.instance_index);
  c.literal = o.literal != nullptr;
  c.expected = o.status;
  c.stats = o.stats.is_object() ? o.stats : json::object();
  c.found_by = found_by;
  c.found_at = utc_now_iso8601();
  c.note = o.message;
  return c;
}

std::string instance_difference(const Instance& a, const Instance& b) {
  const Problem& p = a.problem;
  const Problem& q = b.problem;
  if (p.batch != q.batch || p.heads_q != q.heads_q || p.heads_kv != q.heads_kv || p.n_q != q.n_q || p.n_k != q.n_k ||
      p.head_dim != q.head_dim || !same_bits(p.scale, q.scale) || p.causal != q.causal || p.has_mask != q.has_mask ||
      p.has_bias != q.has_bias || p.input_format != q.input_format) {
    std::string scale;  // describe() rounds the scale: a difference in its last bits is named with the exact values
    if (!same_bits(p.scale, q.scale)) {
      char now[64], pinned[64];
      std::snprintf(now, sizeof now, "%a", q.scale);
      std::snprintf(pinned, sizeof pinned, "%a", p.scale);
      scale = std::string(" (scale is ") + now + ", the file pins " + pinned + ")";
    }
    return "problem is \"" + q.describe() + "\", the file pins \"" + p.describe() + "\"" + scale;
  }
  if (a.seed != b.seed) return "instance seed is " + json_fields::to_hex(b.seed, 16) + ", the file pins " + json_fields::to_hex(a.seed, 16);
  for (auto [name, x, y, f] : {std::tuple{"q", &a.q, &b.q, p.input_format}, std::tuple{"k", &a.k, &b.k, p.input_format},
                               std::tuple{"v", &a.v, &b.v, p.input_format}, std::tuple{"bias", &a.bias, &b.bias, Format::kF32}}) {
    std::string d = tensor_difference(name, *x, *y, f);
    if (!d.empty()) return d;
  }
  // d_o: the file may omit it (forward-only properties); when pinned it must match.
  if (!a.d_o.empty()) {
    std::string d = tensor_difference("d_o", a.d_o, b.d_o, p.input_format);
    if (!d.empty()) return d;
  }
  if (a.mask != b.mask) {
    for (std::size_t i = 0; i < a.mask.size() && i < b.mask.size(); ++i)
      if (a.mask[i] != b.mask[i])
        return "mask[" + std::to_string(i) + "] is " + std::to_string(b.mask[i]) + ", the file pins " + std::to_string(a.mask[i]);
    return "mask has " + std::to_string(b.mask.size()) + " entries, the file pins " + std::to_string(a.mask.size());
  }
  return "";
}

bool param_acts(const Family& f, const std::string& key) {
  const auto same_instances = [](const Family& a, const Family& b, std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i)
      if (!instance_difference(make_instance(a, i), make_instance(b, i)).empty()) return false;
    return true;
  };
  const auto it = f.params.find(key);
  if (it == f.params.end()) return false;
  Family without = f;
  without.params.erase(key);
  try {
    if (!same_instances(f, without, 4)) return true;
  } catch (const Error&) {  // the generator cannot make the family without it (its in-code gap overflows): it acts
    return true;
  }
  const double value = it->second;
  if (const auto d = param_domain(key, f.problem.input_format))
    for (const double other : {d->lo, value + 1, value - 1, 2 * value, value / 2, d->hi}) {
      if (other == value || !in_domain(*d, other)) continue;
      Family tried = f;
      tried.params[key] = other;
      try {
        if (!same_instances(tried, without, 1)) return true;
      } catch (const Error&) {  // a value this shape cannot take (a generator's own check)
      }
    }
  return false;
}

namespace {
Outcome replay_with(const Case& c, const Kernel& k) {
  const Property& p = get_property(c.property);
  Outcome o;
  if (c.literal) {  // the instance is the input (case_from_json: a per-instance property's, never null)
    if (!p.check_literal) throw Error(c.property + " has no check on one literal instance");
    o = p.check_literal(k, c.family, std::make_shared<const Instance>(*c.instance));
    o.instance_index = c.instance_index;  // where it was shrunk from, as the report says
  } else {
    if (c.instance) {
      const Instance now = make_instance(c.family, c.instance_index);
      const std::string diff = instance_difference(*c.instance, now);
      if (!diff.empty())
        throw Error("generator drift: make_instance(" + c.family.generator + " family, " +
                    std::to_string(c.instance_index) + ") no longer gives the pinned instance: " + diff +
                    " (the input is made from `family`; `instance` only checks it: a generator change moved it, or "
                    "the file's instance was edited. Re-pin after a generator change; to change the input, edit the "
                    "family or set instance to null)");
    }
    o = p.check(k, c.family, c.budget);  // the family is already minimal: no shrinking
  }
  if (o.status == Status::kFail && o.report.empty()) o.report = failure_report(p, k, o, /*replay=*/true);
  return o;
}
}  // namespace

Outcome replay_case(const Case& c, const Registry& r) {
  const Kernel* k = r.find(c.kernel);
  if (!k) throw Error("unknown kernel '" + c.kernel + "' in this registry");
  return replay_with(c, *k);
}

Outcome replay_case(const Case& c, Registry& r) { return replay_with(c, r.get(c.kernel)); }

}  // namespace attncheck
