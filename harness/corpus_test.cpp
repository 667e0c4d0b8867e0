// corpus_test.cpp — case files: bit-exact round trips, every class of malformed file rejected with an Error
// naming the file and the field, atomic saving, stable finding names, and the generator-drift check.
// Run: ctest -R corpus_test (label unit).
#include "harness/corpus.h"
#include "properties/shrink.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attncheck {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("attncheck_corpus_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A small instance with awkward values: -0, a subnormal, the largest bf16, a -inf bias, a mask.
Instance awkward_instance() {
  Instance in;
  Problem& p = in.problem;
  p.n_q = 2;
  p.n_k = 3;
  p.head_dim = 2;
  p.scale = Problem::default_scale(2);
  p.has_mask = true;
  p.has_bias = true;
  p.causal = true;  // every flag set, so a field dropped on reading shows (a mutant that read and dropped causal lived)
  in.q = {1.0, -0.0, 0x1p-133, -2.40625};
  in.k = {3.3895313892515355e38, -1.0, 0.5, 0.25, -4.71875, 1.0};
  in.v = {1, 2, 3, 4, 5, 6};
  in.d_o = {0.125, -0.125, 1, -1};
  in.mask = {1, 0, 1, 1, 1, 0};
  in.bias = {0.0, -HUGE_VAL, 0.1f, -3.0, 0.0, 1e-40f};
  in.seed = 0xdeadbeefcafef00dull;
  in.validate();
  return in;
}

Case sample_case() {
  Case c;
  c.kernel = "paper-fixed[beta=4,tol=0.002]";
  c.property = all_properties().front().name;
  c.family = default_family(generators().front().name);
  c.budget.instances = 5;
  c.budget.seconds = 1.5;  // every budget field off its default, so one dropped on reading shows
  c.budget.epsilon_ulp = 0.07;
  c.budget.z_crit = 5.5;
  c.instance_index = 0;
  c.instance = make_instance(c.family, 0);
  c.expected = Status::kFail;
  c.stats = {{"z", 7.5}, {"mean_ulp", -0.2}};
  c.found_by = "manual";
  c.found_at = "2026-11-29T00:00:00Z";
  c.note = "unit test";
  return c;
}

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// load_case must throw an Error whose message names the file and contains `needle` (the field/problem).
void expect_rejected(const std::string& path, const std::string& needle) {
  try {
    load_case(path);
    ADD_FAILURE() << "accepted " << path << " (expected an error mentioning '" << needle << "')";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << msg;
  }
}

TEST(Corpus, InstanceRoundTripIsBitExact) {
  const Instance in = awkward_instance();
  const json j = instance_to_json(in);
  EXPECT_EQ(j["q"]["bits"][0], "0x3f80");   // 1.0 in bf16
  EXPECT_EQ(j["q"]["bits"][1], "0x8000");   // -0 keeps its sign
  EXPECT_EQ(j["k"]["bits"][0], "0x7f7f");   // the largest finite bf16
  EXPECT_EQ(j["bias"]["bits"][1], "0xff800000");  // -inf bias is an additive mask
  EXPECT_EQ(j["seed"], "0xdeadbeefcafef00d");
  const Instance back = instance_from_json(json::parse(j.dump()), "mem");
  EXPECT_EQ(instance_difference(in, back), "");
}

TEST(Corpus, InstanceDifferenceSeesSignOfZeroAndOneBit) {
  const Instance a = awkward_instance();
  Instance b = a;
  b.q[1] = 0.0;  // -0 -> +0
  EXPECT_NE(instance_difference(a, b).find("q[1]"), std::string::npos);
  b = a;
  b.v[5] = std::nextafter(6.0f, 7.0f);  // not bf16, but a one-ulp-of-fp32 change must still be seen
  EXPECT_NE(instance_difference(a, b).find("v[5]"), std::string::npos);
  b = a;
  b.mask[2] = 0;
  EXPECT_NE(instance_difference(a, b).find("mask[2]"), std::string::npos);
  b = a;
  b.seed ^= 1;
  EXPECT_NE(instance_difference(a, b).find("seed"), std::string::npos);
  b = a;
  b.problem.scale = static_cast<double>(std::nextafter(static_cast<float>(a.problem.scale), 1.0f));
  EXPECT_NE(instance_difference(a, b).find("(scale is 0x"), std::string::npos) << instance_difference(a, b);
}

TEST(Corpus, CaseSaveLoadRoundTrip) {
  const fs::path d = temp_dir("roundtrip");
  const Case c = sample_case();
  const std::string path = (d / "case.json").string();
  save_case(path, c);
  const Case back = load_case(path);
  EXPECT_EQ(back.kernel, c.kernel);
  EXPECT_EQ(back.property, c.property);
  EXPECT_EQ(family_to_json(back.family), family_to_json(c.family));
  EXPECT_EQ(back.budget.instances, 5);
  EXPECT_EQ(back.budget.seconds, 1.5);
  EXPECT_EQ(back.budget.epsilon_ulp, 0.07);
  EXPECT_EQ(back.budget.z_crit, 5.5);
  EXPECT_EQ(back.expected, Status::kFail);
  EXPECT_EQ(back.stats, c.stats);
  EXPECT_EQ(back.note, c.note);
  ASSERT_TRUE(back.instance.has_value());
  EXPECT_EQ(instance_difference(*c.instance, *back.instance), "");
  // Atomic save: no temporary left behind, and a second save replaces the file whole.
  Case c2 = c;
  c2.note = "second";
  save_case(path, c2);
  EXPECT_EQ(load_case(path).note, "second");
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  fs::remove_all(d);
}

// Bytes for a terminal: text kept (tab, UTF-8 such as the reports' "δ" and "≥"), everything else as \xNN.
TEST(Corpus, PrintableKeepsTextAndEscapesTheRest) {
  EXPECT_EQ(printable("a\tb δ ≥ 1 😀"), "a\tb δ ≥ 1 😀");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("x\x7f"), "x\\x7f");
  EXPECT_EQ(printable("\xc2\x85"), "\\xc2\\x85");          // U+0085, a C1 control
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");              // U+00A0 is text
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable("\xe2\x89"), "\\xe2\\x89");          // cut short
  EXPECT_EQ(printable("\xff"), "\\xff");
  EXPECT_EQ(printable("one\ntwo"), "one\\x0atwo");
  EXPECT_EQ(printable("one\ntwo", /*keep_newlines=*/true), "one\ntwo");
  // Idempotent: applied at several layers (a plugin's message when caught and when printed).
  for (const std::string s : {"a\x1b[2J\xff\\x41", "\xc2\x85\xe2\x89", "one\ntwo\t\xf0\x9f\x98\x80"})
    for (const bool keep : {false, true}) EXPECT_EQ(printable(printable(s, keep), keep), printable(s, keep)) << s;
}

// A note that is not UTF-8 (a plugin's bytes) is saved with U+FFFD in their place: saving threw, losing the finding.
TEST(Corpus, ANoteThatIsNotUtf8IsSaved) {
  const fs::path d = temp_dir("utf8");
  Case c = sample_case();
  c.note = "plugin said \xff\xfe";
  const std::string path = (d / "case.json").string();
  ASSERT_NO_THROW(save_case(path, c));
  EXPECT_EQ(load_case(path).note, "plugin said \xef\xbf\xbd\xef\xbf\xbd");
  fs::remove_all(d);
}

// Another writer's temporary file beside the target is left alone. Two runs in two containers (or on two hosts)
// sharing a corpus directory have the same pid, and deterministic runs save the same finding at the same moment:
// with a temporary named <path>.tmp.<pid> only, one run truncated and renamed away the other's file, whose rename
// then failed (the finding unsaved, exit 2). The file stands for that other writer's; ours must be a new one.
TEST(Corpus, AnotherWritersTemporaryFileIsLeftAlone) {
  const fs::path d = temp_dir("tmp_unique");
  const std::string path = (d / "case.json").string();
  const std::string theirs = path + ".tmp." + std::to_string(::getpid());
  std::ofstream(theirs) << "the other writer's bytes";
  ASSERT_NO_THROW(write_text_file(path, "ours\n"));
  std::ifstream ours_in(path), theirs_in(theirs);
  const std::string ours_text((std::istreambuf_iterator<char>(ours_in)), {});
  const std::string theirs_text((std::istreambuf_iterator<char>(theirs_in)), {});
  EXPECT_EQ(ours_text, "ours\n");
  EXPECT_EQ(theirs_text, "the other writer's bytes");
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 2) << "the case and their temporary file, nothing else";
  // The saved file is readable as any other file (0666 less the umask), not a private temporary's 0600.
  const mode_t mask = ::umask(022);
  ::umask(mask);
  EXPECT_EQ(static_cast<mode_t>(fs::status(path).permissions() & fs::perms::all), 0666 & ~mask);
  fs::remove_all(d);
}

// Rewriting a file that is there (replay --update-stats) keeps what its owner set: a 0600 case stays private (it
// became 0644), a read-only one is not replaced (it was, silently), and an error names the file, not the temporary
// beside it. A hard-linked one is replaced under the name written only: in place, a failed write would lose it.
TEST(Corpus, RewritingAFileKeepsItsModeItsLinksAndItsReadOnly) {
  const fs::path d = temp_dir("rewrite");
  const std::string path = (d / "case.json").string(), other = (d / "other-name.json").string();
  auto text = [](const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  write_text_file(path, "one\n");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  write_text_file(path, "two\n");
  EXPECT_EQ(text(path), "two\n");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_hard_link(path, other);
  write_text_file(path, "three\n");
  EXPECT_EQ(text(other), "two\n");
  fs::remove(other);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  try {
    write_text_file(path, "four\n");
    ADD_FAILURE() << "a read-only file was replaced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path + ": it is read-only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(text(path), "three\n");
  try {
    require_writable_file(path, "--json");
    ADD_FAILURE() << "a read-only report path passed the check before a run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  fs::permissions(path, fs::perms::owner_all);
  fs::remove_all(d);
}

TEST(Corpus, SaveIntoMissingDirectoryIsAnError) {
  EXPECT_THROW(save_case("/nonexistent-dir-attncheck/x.json", sample_case()), Error);
}

TEST(Corpus, FindingNamesAreSanitisedAndStable) {
  const fs::path d = temp_dir("names");
  Case c = sample_case();
  const std::string name = finding_file_name(c);
  EXPECT_EQ(name.find_first_of("[],=:/ "), std::string::npos) << name;
  EXPECT_EQ(name.rfind("paper-fixed_beta-4_tol-0.002-" + c.property + "-" + c.family.generator + "-", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 5), ".json");
  c.found_at = "2030-01-01T00:00:00Z";  // when it was found does not rename it
  EXPECT_EQ(finding_file_name(c), name);
  c.note = "instance 0: O(b0,h0,i0,c0) = 2 but exact 1";  // the message does not rename a wrong output
  EXPECT_EQ(finding_file_name(c), name);
  // A kernel fault does, by its kind and signal (each saved over the last: a UX review, session 34), not its detail.
  c.note = "kernel fault: plugin:x: crash: killed by SIGSEGV (Segmentation fault)";
  const std::string segv = finding_file_name(c);
  c.note = "kernel fault: plugin:x: crash: killed by SIGSEGV (Segmentation fault) [found with --plugin x.so]";
  EXPECT_EQ(finding_file_name(c), segv);
  c.note = "kernel fault: plugin:x: crash: killed by SIGABRT (Aborted)";
  const std::string abrt = finding_file_name(c);
  c.note = "kernel fault: plugin:x: out_of_bounds: wrote 4 bytes past O";
  const std::string oob = finding_file_name(c);
  EXPECT_EQ((std::set<std::string>{name, segv, abrt, oob}.size()), 4u);
  c.instance_index = 1;
  EXPECT_NE(finding_file_name(c), oob);
  const std::string path = write_finding((d / "sub" / "dir").string(), sample_case());
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::path(path).filename().string(), name);
  // A plugin kernel's name has no length limit: a long one keeps its file name short (it was too long to create,
  // and every finding was lost), and two names alike in their first 55 characters still differ.
  Case a = sample_case(), b = sample_case();
  a.kernel = "plugin:" + std::string(300, 'L');
  b.kernel = "plugin:" + std::string(299, 'L') + "M";
  const std::string na = finding_file_name(a), nb = finding_file_name(b);
  EXPECT_LE(na.size(), 200u) << na;
  EXPECT_NE(na, nb);
  EXPECT_EQ(na.rfind("plugin_LLL", 0), 0u) << na;
  EXPECT_TRUE(fs::exists(write_finding(d.string(), a)));
  EXPECT_EQ(file_name_part("plugin:" + std::string(300, 'L')).size(), 64u);
  EXPECT_EQ(file_name_part("paper-fixed[beta=4]"), "paper-fixed_beta-4");  // short names as they were
  fs::remove_all(d);
}

// ---- every malformed-file class -------------------------------------------------------------------------
class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    Case c = sample_case();
    c.instance = awkward_instance();  // bf16 with a mask and a bias, whatever the default family looks like
    c.family.problem = c.instance->problem;  // (load_case refuses a family shape other than the pinned instance's)
    c.family.params["mask"] = 1;  // the generator's mask switch, which has_mask must agree with (family_from_json)
    good_ = case_to_json(c);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const json& j) { return write(dir_ / name, j.dump(1)); }
  fs::path dir_;
  json good_;
};

TEST_F(Malformed, GoodFileLoads) { EXPECT_NO_THROW(load_case(file("good.json", good_))); }

TEST_F(Malformed, Unreadable) { expect_rejected((dir_ / "absent.json").string(), "cannot read"); }

TEST_F(Malformed, EmptyAndTruncated) {
  expect_rejected(write(dir_ / "empty.json", ""), "empty");
  const std::string text = good_.dump(1);
  expect_rejected(write(dir_ / "trunc.json", text.substr(0, text.size() / 2)), "truncated or malformed JSON");
  expect_rejected(write(dir_ / "garbage.json", "{\"format\": attncheck}"), "malformed JSON");
  expect_rejected(write(dir_ / "array.json", "[1, 2]"), "expected an object");
  std::string utf16 = "\xFF\xFE";  // the good case as UTF-16LE, as Windows editors save "Unicode"
  for (char c : text) utf16 += std::string{c, '\0'};
  expect_rejected(write(dir_ / "utf16.json", utf16), "UTF-16 or UTF-32 text");
  expect_rejected(write(dir_ / "utf16-no-bom.json", utf16.substr(2)), "save the case as UTF-8");
  expect_rejected(write(dir_ / "utf16-cafe.json", std::string("{\0\"\0n\0\xE9\0", 8)), "UTF-16 text");  // not ASCII
  expect_rejected(write(dir_ / "utf32be.json", std::string("\0\0\0{\0\0\0\"", 8)), "UTF-32 text");
  // Not text at all: said so (both were called UTF-16 or UTF-32 text).
  expect_rejected(write(dir_ / "gz.json", std::string("\x1F\x8B\x08\0\0\0\0\0", 8) + "\x03\xad"), "gzip-compressed");
  expect_rejected(write(dir_ / "elf.json", std::string("\x7F" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0", 20)),
                  "binary data (NUL bytes), not a JSON text");
  EXPECT_NO_THROW(load_case(write(dir_ / "utf8-bom.json", "\xEF\xBB\xBF" + text)));
}

TEST_F(Malformed, DeepNesting) {
  // 100,000 nested arrays in stats: nlohmann copies recursively, so this crashed replay on the stack.
  std::string text = good_.dump();
  const std::string stats = "\"stats\":{";
  const std::size_t at = text.find(stats);
  ASSERT_NE(at, std::string::npos);
  constexpr int kDeep = 100000;
  text.insert(at + stats.size(), "\"deep\":" + std::string(kDeep, '[') + std::string(kDeep, ']') + ",");
  expect_rejected(write(dir_ / "deep.json", text), "nested deeper than 64 levels");
}

TEST_F(Malformed, WrongTagAndVersion) {
  json j = good_;
  j["format"] = "attncheck-other";
  expect_rejected(file("tag.json", j), "format");
  j["format"] = "attncheck-run";  // a run report: its own error, which replay passes over
  EXPECT_THROW(load_case(file("run.json", j)), NotACase);
  j = good_;
  j["version"] = 3;
  expect_rejected(file("v3.json", j), "unknown version 3");
  j["version"] = 2;  // a literal case, which says so
  expect_rejected(file("v2.json", j), "literal");
  j["literal"] = false;
  expect_rejected(file("v2false.json", j), "must be true in a version 2 case");
  j["version"] = 1;
  j["literal"] = true;  // a version 1 case regenerates its instance: a literal flag there would be passed over
  expect_rejected(file("v1literal.json", j), "is a version 2 field");
  j = good_;
  j["version"] = "1";
  expect_rejected(file("vstr.json", j), "version");
}

// A literal case (version 2): its instance is the input, of its own shape, for a per-instance property only.
TEST_F(Malformed, ALiteralCase) {
  json j = good_;
  j["version"] = 2;
  j["literal"] = true;
  j["family"]["problem"]["n_q"] = 7;  // the family it came from may be larger than the instance
  const Case c = load_case(file("literal.json", j));
  EXPECT_TRUE(c.literal);
  EXPECT_EQ(c.instance->problem.n_q, 2);
  EXPECT_EQ(case_to_json(c), j) << "written back as read";
  json bad = j;
  bad["instance"] = nullptr;
  expect_rejected(file("null.json", bad), "is null in a literal case");
  bad = j;
  bad["instance"].erase("d_o");  // optional in version 1, which regenerates it; a literal's is read as given
  expect_rejected(file("no_d_o.json", bad), "has no d_o");
  bad = j;
  bad["property"] = "unbiased";
  bad["budget"]["instances"] = 64;
  expect_rejected(file("bias.json", bad), "a statistic over instances");
  // Its shape is bounded as a family's: 4097 x 4097 scores from a file of 12k values.
  bad = j;
  json& p = bad["instance"]["problem"];
  p["n_q"] = 4097, p["n_k"] = 4097, p["head_dim"] = 1;
  p["has_mask"] = false, p["has_bias"] = false, p["causal"] = false;
  bad["instance"].erase("mask");
  bad["instance"].erase("bias");
  for (const char* t : {"q", "k", "v", "d_o"}) {
    bad["instance"][t]["shape"] = json::array({1, 1, 4097, 1});
    bad["instance"][t]["bits"] = json(std::vector<std::string>(4097, "0x3f80"));
  }
  expect_rejected(file("huge.json", bad), "larger than a case file may ask for");
}

// A field the reader does not know is refused inside family, budget and instance, naming it: a "cuasal" beside
// "causal": false was passed over, and the case checked a non-causal family (exit 0, the expected verdict); so was
// "dO" for the optional d_o. Top-level fields are annotations: kept (Cli.ReplayNotesMovedStatsAndUpdatesThem).
TEST_F(Malformed, UnknownFields) {
  const std::vector<std::pair<json::json_pointer, std::string>> where = {
      {json::json_pointer("/family"), "family.tile_kk"},
      {json::json_pointer("/family/problem"), "family.problem.cuasal"},
      {json::json_pointer("/budget"), "budget.z_critt"},
      {json::json_pointer("/instance"), "instance.dO"},
      {json::json_pointer("/instance/problem"), "instance.problem.cuasal"},
      {json::json_pointer("/instance/q"), "instance.q.bitz"},
      {json::json_pointer("/instance/mask"), "instance.mask.valuez"}};
  int n = 0;
  for (const auto& [ptr, path] : where) {
    json j = good_;
    ASSERT_TRUE(j.at(ptr).is_object()) << path;
    j.at(ptr)[path.substr(path.rfind('.') + 1)] = true;
    expect_rejected(file("unknown" + std::to_string(n++) + ".json", j), path + ": unknown field (the fields here: ");
  }
  json top = good_;
  top["reviewer"] = "kept";
  EXPECT_NO_THROW(load_case(file("annotated.json", top)));
  // A control byte in the key is not echoed raw.
  json j = good_;
  j["family"]["x\x1b[31m"] = 1;
  expect_rejected(file("unknown_esc.json", j), "family.x\\x1b[31m: unknown field");
}

TEST_F(Malformed, MissingFields) {
  for (const char* key : {"kernel", "property", "family", "budget", "instance_index", "instance", "expected", "stats",
                          "found_by", "found_at", "note"}) {
    json j = good_;
    j.erase(key);
    expect_rejected(file(std::string("missing_") + key + ".json", j), std::string(key) + ": missing field");
  }
  json j = good_;
  j["budget"].erase("z_crit");
  expect_rejected(file("missing_z.json", j), "budget.z_crit: missing field");
  j = good_;
  j["instance"]["problem"].erase("n_k");
  expect_rejected(file("missing_nk.json", j), "instance.problem.n_k: missing field");
  j = good_;
  j["instance"].erase("v");
  expect_rejected(file("missing_v.json", j), "instance.v: missing field");
  j = good_;
  j["expected"] = "broken";
  expect_rejected(file("verdict.json", j), "expected");
  // found_by names its writer and found_at is a real UTC second (both took any string).
  for (const char* by : {"Check", "fuzzer", ""}) {
    j = good_;
    j["found_by"] = by;
    expect_rejected(file("by.json", j), "found_by: \"" + std::string(by) + "\" is not a source (check, fuzz, manual)");
  }
  for (const char* at : {"yesterday", "2026-11-29", "2026-11-29T23:59:59", "2026-11-29 23:59:59Z", "2026-13-01T00:00:00Z",
                         "2026-02-29T00:00:00Z", "2026-11-31T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T23:59:59+01",
                         "+026-11-29T23:59:59Z", "2026-11-29T23:59:59Zx", "2026-11-29T-1:59:-1Z", "-026-11-29T23:59:59Z",
                         "2026-11-29T23:-9:59Z", "2026-11-29T 1:00:00Z"}) {  // signs: sscanf's %2d took them
    j = good_;
    j["found_at"] = at;
    expect_rejected(file("at.json", j), "found_at: \"" + std::string(at) + "\" is not an ISO-8601 UTC time");
  }
  j = good_;
  j["found_at"] = "2028-02-29T23:59:60Z";  // a leap day and a leap second
  EXPECT_NO_THROW(load_case(file("leap.json", j)));
  // A NUL in a quoted value ended the message there (what() is a C string): the whole message, the NUL as \x00.
  j = good_;
  j["found_by"] = std::string("ch\0eck", 6);
  expect_rejected(file("nul.json", j), "found_by: \"ch\\x00eck\" is not a source (check, fuzz, manual)");
  // A 100 KB value is quoted clipped (a 100 KB error line, whole): its start, its end and what was left out.
  for (const char* key : {"found_by", "expected"}) {
    j = good_;
    j[key] = "\xc3\xa9" + std::string(100000, 'a') + "tail";  // é first: UTF-8 is cut at a character's start
    try {
      load_case(file("long.json", j));
      ADD_FAILURE() << key << ": accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_LT(msg.size(), 2000u) << key;
      EXPECT_NE(msg.find(std::string(key) + ": \"\xc3\xa9" "aaa"), std::string::npos) << msg.substr(0, 300);
      EXPECT_NE(msg.find("aaa...[99" ), std::string::npos) << msg.substr(0, 600);
      EXPECT_NE(msg.find(" bytes left out]...aaa"), std::string::npos) << msg.substr(0, 600);
      EXPECT_NE(msg.find("atail\""), std::string::npos) << msg.substr(0, 600);
      EXPECT_NE(msg.find(file("long.json", j)), std::string::npos) << "the path is whole";
    }
  }
}

// Error clips a word past kLongWord bytes to its first 240 and last 60 and keeps the rest of the message; a cut
// never splits a UTF-8 character (the bytes of one would print as \xNN).
TEST(Corpus, ErrorClipsLongWordsOnly) {
  const std::string path(Error::kLongWord - 1, 'p');  // with its ':', a word of exactly kLongWord bytes: whole
  EXPECT_EQ(std::string(Error("cannot read " + path + ": no such file").what()), "cannot read " + path + ": no such file");
  std::string word(239, 'x');
  word += "\xe2\x82\xac";  // a 3-byte character over byte 240
  word += std::string(2000 + Error::kLongWord, 'y') + "\xe2\x82\xac" + std::string(58, 'z');  // and over the last 60
  const std::string got = Error("kernel '" + word + "' unknown\n(known: fa2)").what();
  EXPECT_EQ(got, "kernel '" + std::string(239, 'x') + "...[" + std::to_string(2003 + Error::kLongWord) +
                     " bytes left out]...\xe2\x82\xac" + std::string(58, 'z') + "' unknown\n(known: fa2)");
  // Bytes that are not UTF-8 (continuation bytes alone: a path of them) are cut where they are, once: the search
  // for a character's start went back past the word, and the message came out longer, the rest of it twice.
  const std::string junk(2 * Error::kLongWord, '\x80');
  const std::string cut = Error("--fuzzer " + junk + ": no such file").what();
  EXPECT_EQ(cut, "--fuzzer " + junk.substr(0, 240) + "...[" + std::to_string(junk.size() + 1 - 300) +
                     " bytes left out]..." + junk.substr(0, 59) + ": no such file");  // the word ends in its ':'
  EXPECT_LT(cut.size(), 400u);
}

// The shape cap holds with a pinned instance too: the instance bounds Q, K and V through the file's size, not the
// n_q·n_k scores (a 2 MB case at n_q = n_k = 40000, head_dim 1, took 12 GB before bad_alloc).
TEST_F(Malformed, ThePinnedInstanceDoesNotLiftTheShapeCap) {
  json j = good_;
  ASSERT_FALSE(j["instance"].is_null());
  for (const char* f : {"n_q", "n_k"}) j["family"]["problem"][f] = 40000;
  j["family"]["problem"]["head_dim"] = 1;
  expect_rejected(file("big.json", j), "is larger than a case file may ask for");
}

TEST_F(Malformed, WrongTensorSizes) {
  json j = good_;
  j["instance"]["q"]["bits"].erase(0);
  expect_rejected(file("short.json", j), "instance.q.bits: has");
  j = good_;
  j["instance"]["k"]["shape"][2] = 999;
  expect_rejected(file("shape.json", j), "instance.k.shape");
  j = good_;
  j["instance"]["problem"]["n_q"] = j["instance"]["problem"]["n_q"].get<int>() + 1;  // problem and tensors disagree
  expect_rejected(file("nq.json", j), "instance.q.shape");
}

TEST_F(Malformed, BadHexPatterns) {
  const struct {
    const char* name;
    json value;
    const char* needle;
  } cases[] = {{"short", "0x3f8", "4 hex digits"},     {"long", "0x3f800", "4 hex digits"},
               {"nonhex", "0x3g80", "non-hex digit"}, {"noprefix", "3f80", "4 hex digits"},
               {"number", 16256, "hex string"},        {"nan", "0x7fc0", "NaN"},
               {"inf", "0x7f80", "+inf"},              {"neginf", "0xff80", "-inf"}};
  for (const auto& c : cases) {
    json j = good_;
    j["instance"]["v"]["bits"][0] = c.value;
    expect_rejected(file(std::string(c.name) + ".json", j), std::string("instance.v.bits[0]: "));
    expect_rejected(file(std::string(c.name) + ".json", j), c.needle);
  }
  json j = good_;
  j["instance"]["q"]["format"] = "fp16";
  expect_rejected(file("fmt.json", j), "instance.q.format");
  j = good_;
  j["instance"]["problem"]["scale"] = "0x7fc00000";
  expect_rejected(file("scale.json", j), "instance.problem.scale");
}

// The scale is positive (a negative one made the properties' envelopes negative: the correctly rounded oracle failed
// on two equal values, exit 1) and exactly an fp32 number (the message said "finite" of 0.1 and named no fix).
TEST_F(Malformed, ScaleIsPositiveAndExactlyAnFp32Number) {
  json j = good_;
  j["instance"] = nullptr;
  EXPECT_NO_THROW(load_case(file("ok.json", j)));
  j["family"]["problem"]["scale"] = -0.25;
  expect_rejected(file("neg.json", j), "scale must be positive and finite");
  j["family"]["problem"]["scale"] = 0.0;
  expect_rejected(file("zero.json", j), "got 0");
  j["family"]["problem"]["scale"] = 0.1;
  expect_rejected(file("tenth.json", j), "exactly an fp32 number");
  expect_rejected(file("tenth.json", j), "the nearest fp32 is 0.10000000149011612");  // exactly it: accepted, pasted
  j["family"]["problem"]["scale"] = 0.10000000149011612;
  EXPECT_NO_THROW(load_case(file("tenth_f32.json", j)));
  j["family"]["problem"]["scale"] = 0.377964;  // odd_dims' 1/sqrt(7) as a family's label prints it
  expect_rejected(file("odd.json", j), "the nearest fp32 is 0.37796398997306824");
  j["family"]["problem"]["scale"] = 1e-50;  // below fp32's smallest: no nearest to paste (0 is refused)
  expect_rejected(file("tiny.json", j), "fp32's smallest positive number is 1.4012984643248171e-45");
  j["family"]["problem"]["scale"] = 1e39;
  expect_rejected(file("huge.json", j), "past fp32's largest");
  j = good_;
  j["instance"]["problem"]["scale"] = "0xbe800000";  // -0.25
  expect_rejected(file("ineg.json", j), "scale must be positive");
}

TEST_F(Malformed, BiasAndMaskValues) {
  const json base = good_;
  EXPECT_NO_THROW(load_case(file("ok.json", base)));  // -inf bias is allowed
  json j = base;
  j["instance"]["bias"]["bits"][0] = "0x7f800000";
  expect_rejected(file("bias_inf.json", j), "instance.bias.bits[0]: 0x7f800000 is +inf");
  j = base;
  j["instance"]["bias"]["bits"][0] = "0x7fc00000";
  expect_rejected(file("bias_nan.json", j), "NaN");
  j = base;
  j["instance"]["mask"]["values"][1] = 2;
  expect_rejected(file("mask2.json", j), "instance.mask.values[1]");
  j = base;
  j["instance"]["mask"]["values"][1] = true;
  expect_rejected(file("maskbool.json", j), "instance.mask.values[1]: expected an integer");
  j = base;
  j["instance"]["mask"]["values"].erase(0);
  expect_rejected(file("maskshort.json", j), "instance.mask.values: has 5 entries");
  j = base;
  j["instance"]["problem"]["has_mask"] = false;
  expect_rejected(file("maskextra.json", j), "instance.mask: present");
}

// ---- replay: generator drift is an Error, never a silent re-run on other bits ----------------------------
class NullKernel : public Kernel {
 public:
  std::string name() const override { return "null-test-kernel"; }
  std::string summary() const override { return "test double"; }
  KernelCaps caps() const override { return {}; }
  ForwardOutput forward(const Instance& in) const override {
    return {std::vector<double>(in.problem.q_size(), 0.0), std::vector<double>(in.problem.rows(), 0.0)};
  }
};

TEST(Corpus, TimeBudgetIsPinnedToTheInstancesRun) {
  // A finding from `check --seconds` must replay the same verdict on any machine: the case pins the instances the
  // failing check drew, not the wall-clock budget (a slower replay drew fewer and passed).
  Outcome o;
  o.kernel = "paper";
  o.property = all_properties().front().name;
  o.family = default_family(generators().front().name);
  o.status = Status::kFail;
  o.instances_run = 37;
  Budget b;
  b.instances = 100000;
  b.seconds = 2.5;
  const Case timed = case_from_outcome(o, b, "check");
  EXPECT_EQ(timed.budget.seconds, 0.0);
  EXPECT_EQ(timed.budget.instances, 37);
  b.seconds = 0;  // a count budget is kept as given
  const Case counted = case_from_outcome(o, b, "check");
  EXPECT_EQ(counted.budget.instances, 100000);
}

// A finding's case writes a count past its shape's limit as it acts (family_internal.h): the fuzzer's decoded
// families and unshrunk failures read pad 1000 at n_k 32, for 31 masked keys.
TEST(Corpus, ACaseWritesCountsAsTheyAct) {
  Outcome o;
  o.kernel = "paper";
  o.property = "masked_value";
  o.family = default_family("padding");
  o.family.params["pad"] = 1000;
  o.status = Status::kFail;
  const Case c = case_from_outcome(o, Budget{}, "check");
  EXPECT_EQ(c.family.param("pad", -1), o.family.problem.n_k - 1);
}

// A failure shrunk to a literal instance (properties/shrink.h) is saved as one, version 2, and replays on that instance
// alone: fa2's dK on tied_max, found on the family's instance 39 (8x16 d16, two heads), replays on one query against
// two tied keys; the same file with V and dO zeroed passes (the replay checks the file's instance, not the family's).
TEST(Corpus, ALiteralFindingIsSavedAndReplaysOnItsInstance) {
  const Outcome o = check_and_shrink(get_property("accurate"), default_registry().get("fa2"),
                                     default_family("tied_max"), Budget{});
  ASSERT_EQ(o.status, Status::kFail) << o.message;
  ASSERT_NE(o.literal, nullptr);
  const fs::path dir = temp_dir("literal");
  const std::string path = write_finding(dir.string(), case_from_outcome(o, Budget{}, "check"));
  std::ifstream in(path);
  const json j = json::parse(in);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["literal"], true);
  Case c = load_case(path);
  ASSERT_TRUE(c.literal);
  EXPECT_EQ(instance_difference(*c.instance, *o.literal), "");
  EXPECT_EQ(c.instance_index, o.instance_index);
  EXPECT_NE(instance_difference(*c.instance, make_instance(c.family, c.instance_index)), "") << "not the family's";
  const Outcome r = replay_case(c, default_registry());
  EXPECT_EQ(r.status, Status::kFail);
  EXPECT_EQ(r.message, o.message);
  std::fill(c.instance->v.begin(), c.instance->v.end(), 0.0);
  std::fill(c.instance->d_o.begin(), c.instance->d_o.end(), 0.0);
  EXPECT_EQ(replay_case(c, default_registry()).status, Status::kPass);
  // Found under a time budget, the case pins the instances the family's check drew (the literal's one check is not
  // it: instance_index 39 is not below 1, and the file did not load).
  Budget timed;
  timed.seconds = 30;
  const Case t = case_from_outcome(o, timed, "check");
  EXPECT_EQ(t.budget.instances, int(o.instance_index) + 1);
  EXPECT_NO_THROW(load_case(write_finding((dir / "timed").string(), t)));
  fs::remove_all(dir);
}

TEST(Corpus, ReplayDetectsGeneratorDrift) {
  Registry r;
  r.add(std::make_unique<NullKernel>());
  Case c = sample_case();
  c.kernel = "null-test-kernel";
  c.instance->q[0] = c.instance->q[0] == 1.0 ? 2.0 : 1.0;  // the file now pins bits the family does not make
  try {
    replay_case(c, r);
    ADD_FAILURE() << "drift not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generator drift"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q[0]"), std::string::npos) << e.what();
  }
  c.kernel = "no-such-kernel";
  EXPECT_THROW(replay_case(c, r), Error);
  const Registry& cr = r;
  EXPECT_THROW(replay_case(c, cr), Error);
}

}  // namespace
}  // namespace attncheck
