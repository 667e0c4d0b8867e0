// device_check_test.cpp — a CUDA device this build has no code for is no device (device_check.cu): this test's copy
// of the check is built for sm_80 only (kernels/cuda/CMakeLists.txt), so on the H200 (sm_90) it must say 0 devices
// and why, where the library's own copy (sm_90a) says 1. Skips without a GPU, and on compute capability 8.x (sm_80
// code runs on 8.0, 8.6, 8.7, 8.9).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cuda_check.h"

namespace attncheck {
namespace {

TEST(DeviceCheck, ADeviceThisBuildHasNoCodeForIsNoDeviceAndSaysWhy) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  if (p.major == 8) GTEST_SKIP() << "device 0 is compute capability 8.x, which this test's sm_80 build runs on";
  std::string why;
  EXPECT_EQ(cuda_device_count(&why), 0);
  EXPECT_NE(why.find("cannot run this build's code, built for CUDA architectures 80-real"), std::string::npos) << why;
  EXPECT_NE(why.find(p.name), std::string::npos) << why;
  std::string again;
  EXPECT_EQ(cuda_device_count(&again), 0) << "the first answer is kept";
  EXPECT_EQ(again, why);
}

}  // namespace
}  // namespace attncheck
