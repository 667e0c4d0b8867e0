// device_slot_test.cpp — one device per fuzzing worker (device_slot.h): slot locks hand out distinct devices,
// overflow falls back to a listed device, CPU kernels are never pinned. Run: ctest -R device_slot
#include "harness/fuzz/device_slot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace attncheck::fuzz {
namespace {

std::string temp_dir() {
  const std::string d = std::filesystem::temp_directory_path() / ("attncheck-slot-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// Each pick holds its slot lock (a separate open file description: flock locks conflict even within one
// process), so successive picks behave like successive workers.
TEST(DeviceSlot, WorkersGetDistinctDevicesThenShare) {
  const std::string dir = temp_dir();
  const std::vector<std::string> devices{"3", "5"};
  EXPECT_EQ(pick_device(devices, dir), "3");
  EXPECT_EQ(pick_device(devices, dir), "5");
  const std::string third = pick_device(devices, dir);  // both slots held: shares one of them
  EXPECT_TRUE(third == "3" || third == "5") << third;
  EXPECT_EQ(pick_device({}, dir), "");
  std::filesystem::remove_all(dir);
}

TEST(DeviceSlot, ReadsCudaVisibleDevices) {
  ::setenv("CUDA_VISIBLE_DEVICES", "2, 7,", 1);
  EXPECT_EQ(visible_devices(), (std::vector<std::string>{"2", "7"}));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST(DeviceSlot, PinsOnlyCudaKernelsOnSeveralDevices) {
  const std::string dir = temp_dir();
  ::setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  EXPECT_EQ(pin_worker_to_one_device("paper", dir), "");  // a CPU kernel: nothing changes
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "0,1");
  const std::string d = pin_worker_to_one_device("cuda:fa2", dir);
  EXPECT_EQ(d, "0");
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(pin_worker_to_one_device("cuda:fa2", dir), "");  // now one device is visible: nothing to choose
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  std::filesystem::remove_all(dir);
}

// The fork/jobs parent must not pin (its children inherit the environment); workers (no such flag) do.
TEST(DeviceSlot, RecognisesLibFuzzerParent) {
  EXPECT_TRUE(is_libfuzzer_parent({"fuzzer", "-fork=2", "-ignore_crashes=1", "corpus"}));
  EXPECT_TRUE(is_libfuzzer_parent({"fuzzer", "-jobs=4"}));
  EXPECT_FALSE(is_libfuzzer_parent({"fuzzer", "-fork=0", "corpus"}));
  EXPECT_FALSE(is_libfuzzer_parent({"fuzzer", "-max_total_time=60", "-runs=10", "corpus"}));
  EXPECT_FALSE(is_libfuzzer_parent({"fuzzer", "fork=2"}));  // a path, not a flag
}

}  // namespace
}  // namespace attncheck::fuzz
