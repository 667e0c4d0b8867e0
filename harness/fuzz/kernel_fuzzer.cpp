// kernel_fuzzer.cpp — libFuzzer entry points of the kernel fuzz target (attncheck_fuzz_kernel).
//
// The body is KernelTarget (kernel_target.h); the kernel comes from ATTNCHECK_FUZZ_KERNEL (default paper).
// With clang the target links -fsanitize=fuzzer; with gcc it links replay_main.cpp instead and replays files.
// Run:  ATTNCHECK_FUZZ_KERNEL=paper build-fuzz/harness/fuzz/attncheck_fuzz_kernel corpus/seeds/kernel
//         -max_total_time=60 -seed=1        (or: attncheck fuzz --kernel paper --time 60)
// ATTNCHECK_FUZZ_MUTATOR=0 turns the structure-aware mutator off (plain libFuzzer byte mutations only).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness/fuzz/device_slot.h"
#include "harness/fuzz/kernel_target.h"
#include "harness/fuzz/mutator.h"

namespace {
attncheck::fuzz::KernelTarget& target() {
  static attncheck::fuzz::KernelTarget t(attncheck::fuzz::config_from_env());
  return t;
}
#if defined(ATTNCHECK_LIBFUZZER)
bool structured_mutator() {
  static const bool on = [] {
    const char* v = std::getenv("ATTNCHECK_FUZZ_MUTATOR");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}
#endif
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // A CUDA kernel on a host with several GPUs: this worker takes one device (device_slot.h), before any CUDA call.
  // libFuzzer's fork/jobs parent runs no inputs and passes its environment on: it leaves the choice to the workers.
  const char* kernel = std::getenv("ATTNCHECK_FUZZ_KERNEL");
  const bool parent =
      argc && argv && attncheck::fuzz::is_libfuzzer_parent(std::vector<std::string>(*argv, *argv + *argc));
  const std::string device = parent ? "" : attncheck::fuzz::pin_worker_to_one_device(kernel ? kernel : "");
  if (!device.empty() && !std::getenv("ATTNCHECK_FUZZ_QUIET"))
    std::fprintf(stderr, "attncheck-fuzz: this worker (pid %d) runs on CUDA device %s\n", static_cast<int>(::getpid()),
                 device.c_str());
  try {
    target();  // build the registry and read the config once, before the first input
  } catch (const std::exception& e) {  // a bad ATTNCHECK_FUZZ_* setting or kernel name: say so, exit 2 (not abort)
    std::fprintf(stderr, "attncheck-fuzz: error: %s\n", e.what());
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  target().run_input(data, size);
  return 0;
}

#if defined(ATTNCHECK_LIBFUZZER)
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

// Three mutations in four know the layout; the fourth is libFuzzer's own (it also splices and uses the
// comparison tables, which the structured mutator cannot).
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  if (!structured_mutator() || seed % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  return attncheck::fuzz::mutate_structured(data, size, max_size, seed / 4);
}
#endif
