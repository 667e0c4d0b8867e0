// device_slot.cpp — see device_slot.h. POSIX only (flock, /dev scan).
#include "harness/fuzz/device_slot.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>

namespace attncheck::fuzz {

std::string pick_device(const std::vector<std::string>& devices, const std::string& lock_dir) {
  if (devices.empty()) return "";
  for (const std::string& d : devices) {
    const std::string path = lock_dir + "/attncheck-gpu-" + d + ".lock";
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return d;  // fd stays open: the slot is ours until we exit
    ::close(fd);
  }
  return devices[static_cast<std::size_t>(::getpid()) % devices.size()];
}

std::vector<std::string> visible_devices() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s(v), item;
    for (std::size_t i = 0; i <= s.size(); ++i) {
      if (i == s.size() || s[i] == ',') {
        if (!item.empty()) out.push_back(item);
        item.clear();
      } else if (s[i] != ' ') {
        item += s[i];
      }
    }
    return out;
  }
  std::error_code ec;
  int n = 0;
  const std::regex dev_re("nvidia[0-9]+");
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec))
    if (std::regex_match(e.path().filename().string(), dev_re)) ++n;
  for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

bool is_libfuzzer_parent(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const char* flag : {"-fork=", "-jobs="})
      if (a.rfind(flag, 0) == 0 && std::atoi(a.c_str() + std::strlen(flag)) >= 1) return true;
  return false;
}

std::string pin_worker_to_one_device(const std::string& kernel, const std::string& lock_dir) {
  if (kernel.rfind("cuda:", 0) != 0) return "";
  if (const char* off = std::getenv("ATTNCHECK_FUZZ_DEVICE_PIN"); off && std::strcmp(off, "0") == 0) return "";
  const std::vector<std::string> devices = visible_devices();
  if (devices.size() < 2) return "";
  const std::string d = pick_device(devices, lock_dir);
  ::setenv("CUDA_VISIBLE_DEVICES", d.c_str(), 1);
  return d;
}

}  // namespace attncheck::fuzz
