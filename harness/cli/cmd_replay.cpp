// cmd_replay.cpp — `attncheck replay FILE|DIR...`: load each saved case (fully validated), check that its family
// still generates the pinned bits, re-run its property with its budget (a literal case, version 2: on its instance
// alone), print verdict and report. A directory
// stands for its *.json entries, in name order (an entry that is not a regular file is refused, not passed over);
// fuzz summaries (fuzz-*-summary.json, which `attncheck fuzz` writes beside its findings) and run reports
// (`check --json`) are passed over, named, wherever they come from; so, in a directory, is a save's temporary that a
// killed run left (<case>.json.tmp.<pid>.<hex>).
// Exit 0 when every verdict matches the file's expected verdict, 1 when one differs, 2 when a file is bad
// (unreadable, malformed, generator drift); every file is still tried and reported.
// --kernel NAME replays every case on NAME instead of its own kernel, against the file's expected verdict: a GPU
// finding on its CPU model where there is no GPU (the CUDA kernels tile 64x64 as the models do by default), a
// baseline's finding on its fixed variant.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/corpus.h"
#include "harness/plugin/plugin_cli.h"
#include "properties/shrink.h"  // failure_kind, fault_kind

namespace attncheck::cli {

namespace {

struct ReplayOptions {
  std::vector<std::string> files;
  bool quiet = false;
  bool update_stats = false;
  bool update_expected = false;
  std::string kernel;  // "" = each case's own
  bool kernel_given = false;  // --kernel given, even as "" (refused: an unset variable in `-k "$KERNEL"`)
};

// A line on standard error every kProgressEvery s while one case replays (not with --quiet): a legal but huge
// budget (instances to 2^30) replayed for ~50 min without a word.
class StillReplaying {
 public:
  StillReplaying(const std::string& path, int instances, bool quiet) {
    if (quiet) return;
    thread_ = std::thread([this, path, instances] {
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mu_);
      while (!done_.wait_for(lock, std::chrono::duration<double>(kProgressEvery), [this] { return stop_; }))
        std::cerr << "attncheck replay: still replaying " << printable(path) << " ("
                  << static_cast<long>(seconds_since(start)) << " s; its budget asks for " << instances
                  << " instances)\n";
    });
  }
  ~StillReplaying() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    done_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  bool stop_ = false;
  std::thread thread_;
};

// File names are matched in any case (a case renamed by hand to X.JSON is still one).
std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_fuzz_summary(const std::filesystem::path& p) {
  const std::string name = lower(p.filename().string());
  return name.rfind("fuzz-", 0) == 0 && name.size() > 13 && name.compare(name.size() - 13, 13, "-summary.json") == 0;
}

bool has_json_extension(const std::filesystem::path& p) { return lower(p.extension().string()) == ".json"; }

// A case's temporary that a killed save left (corpus.h: is_save_temporary): the case itself was then not written,
// or is the earlier one.
bool is_case_temporary(const std::filesystem::path& p) {
  std::string target;
  return is_save_temporary(p.filename().string(), &target) && has_json_extension(target);
}

// The case files named, in order; a path that cannot be replayed as named carries why (`error`), so that it is
// reported as a file that could not be replayed and the others still run. A directory gives its *.json entries
// (.json in any case; name order, not recursive), fuzz summaries named and left out; an entry that is not a regular file
// (a FIFO, a link to a directory) is kept and refused by load_case, not passed over in silence. A path whose
// status cannot be read (a link loop, a dangling link) is kept as well: load_case reports it.
struct Named {
  std::string path;
  std::string error;  // "" = replay it
};

// For a directory with no case files of its own: the folders in it that have some, named for the user (`replay
// corpus` holds none; corpus/regression and corpus/findings do). Not recursive replay: a tree can hold the fuzz
// seeds and summaries, and a replay says what it runs. "" when none.
std::string subfolders_with_cases(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> with;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    std::error_code sub_ec;
    if (!sub.is_directory(sub_ec)) continue;
    for (const auto& e : fs::directory_iterator(sub.path(), sub_ec))
      if (has_json_extension(e.path()) && !is_fuzz_summary(e.path())) {
        with.push_back(printable(sub.path().string()));
        break;
      }
  }
  if (with.empty()) return "";
  std::sort(with.begin(), with.end());
  std::string list;
  for (const std::string& w : with) list += (list.empty() ? "" : " ") + w;
  return "; its folders " + list + " have some: replay them by name";
}

std::vector<Named> case_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<Named> out;
  for (const std::string& a : args) {
    std::error_code dir_ec;
    if (!fs::is_directory(a, dir_ec)) {
      if (is_fuzz_summary(a)) std::cout << "skip   " << printable(a) << ": a fuzz summary, not a case\n";
      else out.push_back({a, ""});
      continue;
    }
    std::vector<std::string> in_dir, summaries, temporaries;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(a, ec))
      if (has_json_extension(e.path())) (is_fuzz_summary(e.path()) ? summaries : in_dir).push_back(e.path().string());
      else if (is_case_temporary(e.path())) temporaries.push_back(e.path().string());
    std::sort(summaries.begin(), summaries.end());
    for (const std::string& s : summaries)  // named, as a run report there is (they were left out without a word)
      std::cout << "skip   " << printable(s) << ": a fuzz summary, not a case\n";
    std::sort(temporaries.begin(), temporaries.end());
    for (const std::string& t : temporaries)  // named, so that a killed run's leftovers are explained, not puzzled over
      std::cout << "skip   " << printable(t) << ": a temporary an interrupted save left, not a case: delete it\n";
    if (ec) out.push_back({a, a + ": cannot list the directory: " + ec.message()});
    else if (in_dir.empty()) out.push_back({a, a + ": a directory with no case files (*.json)" + subfolders_with_cases(a)});
    std::sort(in_dir.begin(), in_dir.end());
    for (std::string& f : in_dir) out.push_back({std::move(f), ""});
  }
  return out;
}

// Whether one tensor's entry of a statistic (stats["tensors"][name], props_bias.cpp) fails: informative, maybe
// hand-edited, so anything but a true bool is no failure.
bool fails(const nlohmann::json& t) {
  return t.is_object() && t.contains("fails") && t["fails"].is_boolean() && t["fails"].get<bool>();
}

// The tensors a statistic fails on ("O, delta").
std::string failing_tensors(const nlohmann::json& stats) {
  std::string out;
  if (!stats.is_object() || !stats.contains("tensors") || !stats["tensors"].is_object()) return out;
  for (const auto& [name, t] : stats["tensors"].items())
    if (fails(t)) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Same verdict, but the statistic's failing tensors are not the file's (the statistic changed since the case was
// written: its stats, "informative", no longer say what replay finds): say so, or "".
std::string moved_tensors(const nlohmann::json& saved, const nlohmann::json& now) {
  if (!saved.is_object() || !saved.contains("tensors") || !now.is_object() || !now.contains("tensors")) return "";
  const std::string was = failing_tensors(saved), is = failing_tensors(now);
  if (was == is) return "";
  return "the file's stats fail on " + (was.empty() ? std::string("no tensor") : was) + ", this replay on " +
         (is.empty() ? std::string("no tensor") : is) + " (the statistic moved since the case was written)";
}

// Same verdict, but a tensor the file's statistic fails on fails now with the other sign: the bias turned (a fix that
// overshoots, a replay without the setting that made the finding: its direction is the finding). "O: the file's
// −0.2306 ulp, this replay's +0.2304" for each such tensor, or "". A verdict that differs, not a moved statistic.
std::string turned_tensors(const nlohmann::json& saved, const nlohmann::json& now) {
  const auto mean_of_failing = [](const nlohmann::json& stats, const std::string& name, double& mean) {
    if (!stats.is_object() || !stats.contains("tensors") || !stats["tensors"].is_object()) return false;
    const auto t = stats["tensors"].find(name);
    if (t == stats["tensors"].end() || !fails(*t) || !t->contains("mean_ulp") || !(*t)["mean_ulp"].is_number())
      return false;  // anything but a failing tensor with a mean is not compared
    mean = (*t)["mean_ulp"].get<double>();
    return true;
  };
  std::string out;
  if (!saved.is_object() || !saved.contains("tensors") || !saved["tensors"].is_object()) return out;
  for (const auto& [name, ignored] : saved["tensors"].items()) {
    double was = 0, is = 0;
    if (!mean_of_failing(saved, name, was) || !mean_of_failing(now, name, is) || (was > 0) == (is > 0)) continue;
    char line[160];
    std::snprintf(line, sizeof line, "%s: the file's %+.4f ulp, this replay's %+.4f", name.c_str(), was, is);
    out += (out.empty() ? "" : "; ") + std::string(line);
  }
  return out;
}

// The failure a note records where it is a message as check writes it ("instance 39: dK(b0,...): ...", "literal
// instance: dK(...): ..." for a literal case, "kernel fault:
// plugin:x: crash: killed by SIGSEGV (...)", "biased: O: mean ..."): "on dK", "a kernel fault (crash: killed by
// SIGSEGV)" (no kernel name: a case replayed with --kernel faults under another name), "a biased statistic"; in prose,
// the message after "Found: " (the corpus's regression cases quote it so). "" for anything else: other prose (a
// hand-written or edited note), the fuzzer's "minimised from ...".
std::string recorded_failure(const std::string& note) {
  const auto of_message = [](const std::string& message) -> std::string {
    static const std::regex per_instance(R"(^(?:instance \d+|literal instance): (O|LSE|dQ|dK|dV|delta)\b)");
    std::smatch m;
    if (std::regex_search(message, m, per_instance)) return "on " + m[1].str();
    if (message.rfind("biased: ", 0) == 0) return "a biased statistic";
    if (message.rfind("not finite: ", 0) == 0) return "non-finite outputs";  // a bias property's other failure
    const std::string kind = fault_kind(message);
    return kind.empty() ? "" : "a kernel fault (" + kind + ")";
  };
  const std::string whole = of_message(note);
  const std::size_t found = note.find("Found: ");  // prose quoting the message (a message itself is taken whole)
  return whole.empty() && found != std::string::npos ? of_message(note.substr(found + 7)) : whole;
}

// Same verdict (fail), but not the finding the file saved: what differs, or "" (the same, or nothing to compare).
// The file's failure is its note's (recorded_failure); where the note is prose, its stats tell what they can: tensors
// a statistic fails on are a biased statistic, other stats a failure measured on the kernel's outputs, which a kernel
// fault now is not (a bias finding, or a regression case, whose kernel now crashes replayed "ok").
std::string another_failure(const Case& c, const Outcome& o) {
  if (c.found_by == "manual") return "";
  std::string was = recorded_failure(c.note);
  bool was_measured = false;  // known from the stats alone: a failure measured on the kernel's outputs
  if (was.empty() && !failing_tensors(c.stats).empty()) was = "a biased statistic";
  else if (was.empty() && c.stats.is_object() && !c.stats.empty())
    was = "one measured on the kernel's outputs (its stats)", was_measured = true;
  const std::string is = recorded_failure(o.message);
  if (was.empty() || is.empty() || was == is) return "";
  if (was_measured && fault_kind(o.message).empty()) return "";  // any measured failure may be the prose's
  return "the file's failure is " + was + ", this replay's " + is;
}

// The note --update-expected writes: the replay's message where the file's note records a failure and this one is
// another (so the updated case replays as it now fails), with what the note said of where it came from (check's
// " [found with ENV --plugin LIB]", the fuzzer's " | fuzz input HEX") or the prose before "Found: "; "" = keep the
// note.
std::string updated_note(const Case& c, const Outcome& o) {
  if (c.found_by == "manual" || o.status != Status::kFail) return "";
  const std::string was = recorded_failure(c.note), is = recorded_failure(o.message);
  if (was.empty() || was == is) return "";
  // Prose that quotes the failure after "Found: " keeps its prose; the quote becomes this replay's message, and what
  // followed it (the old quote, and any prose after it: where the quote ends is not marked) is kept after "(was: ".
  if (const std::size_t at = c.note.find("Found: "); at != std::string::npos)
    return c.note.substr(0, at) + "Found: " + o.message + " (was: " + c.note.substr(at + 7) + ")";
  std::size_t from = std::string::npos;
  for (const char* tail : {" [found with ", " | fuzz input "}) from = std::min(from, c.note.find(tail));
  return o.message + (from == std::string::npos ? "" : c.note.substr(from));
}

int run_replay(const ReplayOptions& opt) {
  // The stats are the case's kernel's: another kernel's would overwrite them with what the case did not find.
  if (!opt.kernel.empty() && opt.update_expected)
    throw Error("--update-expected with --kernel: the file's verdict is its own kernel's; replay that kernel to update it");
  if (!opt.kernel.empty() && opt.update_stats)
    throw Error("--update-stats with --kernel: the file's stats are its own kernel's; replay that kernel to update them");
  // Its canonical name, once: an unknown name is said before any file, not per file.
  if (opt.kernel_given && opt.kernel.empty())  // `-k "$KERNEL"` with the variable unset replayed on the case's own
    throw Error("--kernel: an empty kernel name (leave --kernel out to replay each case on its own kernel)");
  const std::string replay_on = opt.kernel.empty() ? "" : default_registry().get(opt.kernel).name();
  for (const std::string& f : opt.files)  // `replay ""` (an unset shell variable) said "error: : cannot read"
    if (f.empty()) throw Error("an empty path among the files to replay (case files or folders of them)");
  int bad = 0, differ = 0, skipped = 0, updated = 0;
  const std::vector<Named> files = case_files(opt.files);
  for (const auto& [path, error] : files) {
    try {
      if (!error.empty()) throw Error(error);
      Case c;
      try {
        c = load_case(path);  // its errors name the file and the field
      } catch (const NotACase& e) {
        std::cout << "skip   " << printable(e.what()) << "\n";
        ++skipped;
        continue;
      }
      // Both by their canonical names where this registry has them (a file may spell parameters otherwise).
      std::string found_on = c.kernel;
      try {
        found_on = default_registry().get(c.kernel).name();
      } catch (const Error&) {  // a kernel not here (a GPU's): replay_case below says so
      }
      // Without --kernel the case replays on its own kernel however the file spells it (`paper[]`, parameters in
      // another order or at their defaults): compared as the file's spelling, it read as another kernel, exit 1.
      c.kernel = replay_on.empty() ? found_on : replay_on;
      const bool other_kernel = c.kernel != found_on;
      Outcome o;
      try {
        const StillReplaying still(path, c.budget.instances, opt.quiet);
        o = replay_case(c, default_registry());
      } catch (const KernelFault& e) {  // the kernel crashed / hung / wrote out of bounds again: a failure
        o.kernel = c.kernel;
        o.property = c.property;
        o.status = Status::kFail;
        o.message = kernel_fault_message(e);
      } catch (const Error& e) {
        // drift, unknown kernel or property: still name the file; a GPU case where this build has no such kernel
        // names the CPU model it can replay on (cuDNN's verdicts are fa2's: README, "GPU").
        std::string hint;
        if (opt.kernel.empty() && c.kernel.rfind("cuda:", 0) == 0 && !default_registry().find(c.kernel)) {
          const bool cudnn = c.kernel.rfind("cuda:cudnn", 0) == 0;
          const std::string model = cudnn ? "fa2" : c.kernel.substr(5), twin = "twin:" + c.kernel;
          hint = "; to replay it here, use its CPU model: --kernel " + model;
          // the GPU's operation order, where the build has it (a parameterised twin comes from its factory)
          if (!cudnn && default_registry().find("twin:" + c.kernel.substr(0, c.kernel.find('['))))
            hint += ", or on its CPU twin (the GPU's sums in its order): --kernel " + twin;
        }
        throw Error(path + ": " + e.what() + hint);
      }
      bool same = o.status == c.expected;
      const std::string turned = same ? turned_tensors(c.stats, o.stats) : "";
      std::string moved = same && turned.empty() ? moved_tensors(c.stats, o.stats) : "", other_failure;
      if (!turned.empty()) other_failure = "the bias has turned (" + turned + "): another failure", same = false;
      const std::string another = same && o.status == Status::kFail ? another_failure(c, o) : "";
      if (!another.empty()) other_failure = another + ": another failure", same = false;
      // On another kernel the file's stats are the case's kernel's: a statistic failing on other tensors is another
      // failure, not a moved statistic (nothing to update). Per-instance properties: the note's tensor (above).
      if (other_kernel && !moved.empty()) {
        const std::string was = failing_tensors(c.stats), is = failing_tensors(o.stats);
        other_failure = "the case's kernel failed on " + (was.empty() ? std::string("no tensor") : was) + "; " +
                        c.kernel + (is.empty() ? " fails otherwise" : " on " + is) + ": another failure";
        same = false, moved.clear();
      }
      // A parameter the generator does not list that changes nothing it makes (rank on constant_v; an older
      // shrinker's tie_level on near_tie): the file reads as a test of it. Said, not refused: the probe sees the
      // first instances only, and a file that loads must keep loading (check --family refuses such a value). A
      // family that cannot be generated (a kernel that declined before, a skip) gets no note, never an error.
      std::string unread;
      if (!c.literal) try {  // (a literal case's input is its instance: the family's parameters make nothing there)
        const auto& listed = default_family(c.family.generator).params;
        for (const auto& [key, value] : c.family.params)
          if (!listed.count(key) && !param_acts(c.family, key))
            unread += "  note: family.params." + key + " changes nothing " + c.family.generator + " makes here, at " +
                      "this value or others (its first instances are the same bits without it): delete it\n";
      } catch (const Error&) {
        unread.clear();
      }
      // --update-expected: a verdict that differs becomes the file's (a fixed kernel's finding now passes: a
      // regression case; a turned bias: the new direction), pass or fail only (a skip says the kernel declined).
      // Written before it is counted: a write that fails is a file that could not be replayed, not also a difference.
      const bool update = opt.update_expected && !same && (o.status == Status::kPass || o.status == Status::kFail);
      if (update) update_case_verdict(path, o.status, o.stats, updated_note(c, o));
      differ += !same && !update;
      updated += update;
      // The path is the user's; kernel, property and family are text already (load_case refuses anything else).
      // UPDATED, not DIFFER, where --update-expected made the file agree (the run exits 0: DIFFER read as a failure).
      std::cout << (same ? "ok    " : update ? "UPDATED" : "DIFFER") << " " << printable(path) << ": " << c.kernel
                << (other_kernel ? " (the case's kernel: " + found_on + ")" : std::string()) << " / " << c.property
                << " / " << literal_origin(c) << c.family.describe() << ": expected " << status_name(c.expected)
                << ", got " << status_name(o.status) << "\n";
      if (other_kernel) {  // parameters the case's kernel had and this one has not (or the reverse)
        const auto bracket = [](const std::string& n) { return n.find('[') == std::string::npos ? "" : n.substr(n.find('[')); };
        if (bracket(found_on) != bracket(c.kernel))
          std::cout << "  note: the case's kernel is " << found_on << ", this replay's " << c.kernel
                    << ": other parameters\n";
      }
      std::cout << unread;
      if (!other_failure.empty()) std::cout << "  " << other_failure << "\n";
      if (update) {
        std::cout << "  expected and stats updated in the file (" << status_name(c.expected) << " -> "
                  << status_name(o.status) << ")\n";
      } else if (opt.update_stats && !moved.empty()) {
        update_case_stats(path, o.stats);  // only the informative statistic: verdict, family, bits stay as they are
        std::cout << "  stats updated in the file (" << moved << ")\n";
      } else if (!moved.empty()) {
        std::cout << "  note: " << moved << "; --update-stats rewrites them\n";
      }
      if (opt.quiet) {  // the verdict line; a verdict that differs keeps its one-line reason
        if (!same && !o.message.empty()) std::cout << "  " << printable(o.message) << "\n";
      } else if (!o.report.empty()) {  // the report repeats the message and the statistic
        std::cout << printable(o.report, /*keep_newlines=*/true) << (o.report.back() == '\n' ? "" : "\n");
      } else {
        if (!o.message.empty()) std::cout << "  " << printable(o.message) << "\n";
        if (!o.stats.is_null() && !o.stats.empty()) std::cout << "  stats: " << printable(o.stats.dump()) << "\n";
      }
      // A case that differs shows the file's statistic beside today's (a case that now passes read "held on 1
      // instance(s)" and the new numbers only: was it 1171 against 0.30? A UX review, session 48): as it was before
      // --update-expected rewrote it, and naming the kernel it was found on where the replay's is another.
      if (!same && !opt.quiet && !c.stats.is_null() && !c.stats.empty())
        std::cout << "  the file's stats" << (update ? " before the update" : "") << " (" << status_name(c.expected)
                  << (other_kernel ? ", on " + found_on : std::string()) << "): " << printable(c.stats.dump()) << "\n";
    } catch (const std::exception& e) {  // Error for a bad file; anything else must not end the other replays
      ++bad;
      std::cout.flush();
      std::cerr << "attncheck: error: " << printable(e.what()) << "\n";
    }
  }
  const int replayed = static_cast<int>(files.size()) - skipped;
  if (replayed == 0) throw Error("no case file to replay (only fuzz summaries and run reports)");
  if (replayed > 1)
    std::cout << replayed << " cases: " << replayed - bad - differ - updated << " match, " << differ << " differ, "
              << (updated ? std::to_string(updated) + " updated, " : "") << bad << " could not be replayed\n";
  return bad ? kExitUsage : differ ? kExitFail : kExitPass;
}

}  // namespace

void add_replay(CLI::App& app, Runner& run) {
  auto opt = std::make_shared<ReplayOptions>();
  CLI::App* sub = app.add_subcommand("replay", "Re-run saved cases (corpus/findings, corpus/regression) and compare verdicts");
  sub->add_option("files", opt->files, "Case files (JSON, corpus/README.md), or directories of them")
      ->required()
      ->type_name("FILE|DIR");
  sub->footer(
      "Exit status: 0 every replayed verdict is the expected one (a finding that still fails: 0), 1 a verdict\n"
      "differs (e.g. a fixed kernel now passes its finding: update the case, --update-expected; or a bias finding\n"
      "fails with the opposite sign on a tensor), 2 a file could not be replayed.");
  sub->add_flag("-q,--quiet", opt->quiet,
                "Only the verdict lines, the one-line reason of a verdict that differs, the cases' notes and (for "
                "more than one case) the closing count");
  sub->add_flag("--update-expected", opt->update_expected,
                "Where a verdict differs and is pass or fail, write it and this run's statistic into the file's "
                "`expected` and `stats` (a fixed kernel's finding becomes a regression case: review the diff); the "
                "exit status then counts it as updated, not as differing");
  sub->add_flag("--update-stats", opt->update_stats,
                "Where the verdict is the expected one but the saved stats fail on other tensors (the statistic "
                "changed), write this run's statistic into the file's `stats`; no other field changes");
  CLI::Option* kernel = sub->add_option("-k,--kernel", opt->kernel,
                  "Replay every case on this kernel instead of its own (e.g. a cuda:fa2-fixed finding on its CPU twin "
                  "twin:cuda:fa2-fixed or its model fa2-fixed, where there is no GPU), against the file's expected "
                  "verdict; a statistic failing on other tensors than the file's differs too; the case's tiles apply")
      ->type_name("KERNEL");
  add_plugin_option(*sub);  // cases found on plugin kernels need their library loaded again
  sub->callback([&run, opt, kernel] {
    opt->kernel_given = kernel->count() > 0;
    run = [opt] { return run_replay(*opt); };
  });
}

}  // namespace attncheck::cli
