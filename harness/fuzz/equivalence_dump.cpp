// equivalence_dump.cpp — attncheck_fuzz_dump: prints, per kernel-fuzzer input, everything a speed change of the
// kernel target must leave as it was, so that a before and an after build can be compared with diff.
//
// Per input file (directories: every regular file inside, sorted by name), one block of lines:
//   * the target's own run (KernelTarget::run_input, keep-going, findings into a scratch directory): skipped,
//     finding, the last failing property and its message, the O error, and a hash of every error-guided feedback
//     counter (feedback.h) — which also holds each property's status (record_property);
//   * every per-instance property checked afresh on the plain kernel (no memo): status, message, stats;
//   * the kernel's forward and backward outputs of instance 0 (and the model trace for a CPU model) as hashes
//     of their bits.
// Invariants: reads only its arguments and ATTNCHECK_FUZZ_PROPERTIES (unset: the ten per-instance properties);
// prints nothing time-dependent (no seconds), so two builds of the same code give the same text.
// Run:  attncheck_fuzz_dump <kernel> <file-or-dir>... > dump.txt   (then diff a before and an after dump)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harness/fuzz/feedback.h"
#include "harness/fuzz/fuzz_input.h"
#include "harness/fuzz/kernel_target.h"
#include "kernels/cpu/builtin_kernels.h"
#include "kernels/cpu/flash_model.h"

namespace {

using attncheck::fuzz::FuzzInput;

// FNV-1a over raw bytes: equal hashes for bit-identical vectors (NaN payloads and signed zeros included).
std::uint64_t fnv(const void* p, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
std::uint64_t fnv(const std::vector<double>& v) { return fnv(v.data(), v.size() * sizeof(double)); }

std::vector<std::string> input_files(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (std::filesystem::is_directory(argv[i], ec)) {
      std::vector<std::string> inside;
      for (const auto& e : std::filesystem::directory_iterator(argv[i]))
        if (e.is_regular_file()) inside.push_back(e.path().string());
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(argv[i]);
    }
  }
  return files;
}

}  // namespace

int dump(int argc, char** argv) {
  using namespace attncheck;
  if (argc < 3) {
    std::fprintf(stderr, "usage: attncheck_fuzz_dump <kernel> <file-or-dir>...\n");
    return 2;
  }
  const std::string scratch = (std::filesystem::temp_directory_path() / "attncheck-fuzz-dump-findings").string();
  fuzz::TargetConfig cfg = fuzz::config_from_env();  // the target's own settings (ATTNCHECK_FUZZ_*), then ours
  cfg.kernel = argv[1];
  cfg.findings_dir = scratch;
  cfg.keep_going = true;
  cfg.quiet = true;
  if (cfg.properties.empty())  // every per-instance property (the bias property is not dumped)
    for (const Property& p : all_properties())
      if (!p.across_instances) cfg.properties.push_back(p.name);
  fuzz::KernelTarget target(cfg);
  const Kernel& kernel = default_registry().get(cfg.kernel);
  std::vector<const Property*> checks;
  for (const Property& p : all_properties())
    if (!p.across_instances && std::find(cfg.properties.begin(), cfg.properties.end(), p.name) != cfg.properties.end())
      checks.push_back(&p);

  for (const std::string& path : input_files(argc, argv)) {
    std::ifstream f(path, std::ios::binary);
    const std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::printf("== %s\n", std::filesystem::path(path).filename().c_str());
    fuzz::clear();
    const fuzz::RunResult r = target.run_input(data.data(), data.size(), false);
    std::printf("target skipped=%d finding=%d property=%s max_ulp_o=%.17g counters=%016llx\n  message: %s\n",
                r.skipped, r.finding, r.property.c_str(), r.max_ulp_o,
                static_cast<unsigned long long>(fnv(fuzz::counters(), fuzz::counter_count())), r.message.c_str());
    const FuzzInput in = fuzz::decode_input(data.data(), data.size());
    if (!kernel.caps().unsupported_reason(in.family.problem, false).empty()) continue;  // the target skipped it too
    try {
      Budget b;
      b.instances = 1;
      for (const Property* p : checks) {
        const Outcome o = p->check(kernel, in.family, b);
        std::printf("  %s status=%d message=%s stats=%s\n", p->name.c_str(), static_cast<int>(o.status),
                    o.message.c_str(), o.stats.dump().c_str());
      }
      const std::shared_ptr<const Instance> inst = make_instance_shared(in.family, 0);
      const ForwardOutput fw = kernel.forward(*inst);
      std::printf("  forward o=%016llx lse=%016llx\n", static_cast<unsigned long long>(fnv(fw.o)),
                  static_cast<unsigned long long>(fnv(fw.lse)));
      if (kernel.caps().backward) {
        const BackwardOutput bw = kernel.backward(*inst, fw);
        std::printf("  backward dq=%016llx dk=%016llx dv=%016llx delta=%016llx\n",
                    static_cast<unsigned long long>(fnv(bw.dq)), static_cast<unsigned long long>(fnv(bw.dk)),
                    static_cast<unsigned long long>(fnv(bw.dv)), static_cast<unsigned long long>(fnv(bw.delta)));
      }
      if (const auto* model = dynamic_cast<const ModelKernel*>(&kernel)) {
        ModelTrace t;
        model_forward(model->spec(), *inst, &t);
        std::printf("  trace %s\n", t.describe().c_str());
      }
    } catch (const Error& e) {
      std::printf("  error: %s\n", e.what());
    }
  }
  std::filesystem::remove_all(scratch);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return dump(argc, argv);
  } catch (const std::exception& e) {  // a bad ATTNCHECK_FUZZ_* setting or kernel name
    std::fprintf(stderr, "attncheck_fuzz_dump: error: %s\n", e.what());
    return 2;
  }
}
