// replay_main.cpp — a main() for fuzz targets without libFuzzer (the fmt/re2 pattern): runs every file
// named on the command line (directories: every regular file inside, sorted) through LLVMFuzzerTestOneInput
// once. gcc builds, gdb, valgrind and ctest (label corpus) replay seeds and crash artifacts with it.
// Arguments starting with '-' are ignored, so a libFuzzer command line works unchanged.
// Run:  ATTNCHECK_FUZZ_KERNEL=oracle build/harness/fuzz/attncheck_fuzz_kernel corpus/seeds/kernel
// Exit: 0 when every input ran (a finding abort()s, as under libFuzzer), 2 when a file cannot be read.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!a.empty() && a[0] == '-') continue;
    std::error_code ec;
    if (std::filesystem::is_directory(a, ec)) {
      std::vector<std::string> inside;
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) inside.push_back(e.path().string());
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(a);
    }
  }
  int ran = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 2;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    // A copy in its own allocation, so ASan sees reads past the end as libFuzzer would.
    std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
    ++ran;
  }
  std::fprintf(stderr, "replay: %d input(s) ran to the end (no abort)\n", ran);
  return 0;
}
