// device_check.cu — cuda_device_count (cuda_check.h): how many CUDA devices there are, and whether this build's code
// runs on the one it would use.
//
// A device is present but unusable when this build has no code for it: the default build is sm_90a only (H100,
// H200; CMAKE_CUDA_ARCHITECTURES), so on an A100 or a Blackwell card every launch failed with "no kernel image",
// every GPU test failed instead of skipping, and the cuda: kernels were registered and failed every check. The probe
// kernel below is compiled with this library's architectures, as the flash kernels are: if the runtime can load it
// on device 0, it can load them. The first call creates device 0's context, as the first kernel would: on a GPU host
// every attncheck process that registers the built-in kernels (`list`, a CPU-only `check`) pays for one. Measured
// on the H200 (2026-12-02): the primary context 0.11 s beside cuInit's 0.18 s, which cudaGetDeviceCount paid before;
// `attncheck list` 0.31-0.47 s, 0.01 s with CUDA_VISIBLE_DEVICES empty. (A CUDA context, like cuInit, also means
// CUDA does not survive a fork: plugins that use CUDA run in-process, harness/plugin/README.md.)
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"

namespace attncheck {
namespace {

__global__ void image_probe() {}

struct DeviceAnswer {
  int count = 0;
  std::string why;
};

DeviceAnswer ask_the_device() {
  DeviceAnswer a;
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    a.why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ", " + cudaGetErrorString(e);
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return a;
  }
  if (n == 0) {
    a.why = "cudaGetDeviceCount: 0 devices";
    return a;
  }
  cudaFuncAttributes attributes;
  if (const cudaError_t e = cudaFuncGetAttributes(&attributes, image_probe); e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaDeviceProp p{};
    const bool named = cudaGetDeviceProperties(&p, 0) == cudaSuccess;
    const std::string device = "device 0" + (named ? " (" + std::string(p.name) + ", compute capability " +
                                                     std::to_string(p.major) + "." + std::to_string(p.minor) + ")"
                                                : std::string());
    // Only these say the code is not for this GPU; anything else (a device held in exclusive-process mode, no
    // memory for a context, a driver too old) is said as CUDA says it.
    const bool no_code = e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
                         e == cudaErrorUnsupportedPtxVersion;
    a.why = no_code ? device + " cannot run this build's code, built for CUDA architectures " ATTNCHECK_CUDA_ARCHITECTURES
                          " (" + std::string(cudaGetErrorName(e)) + "): rebuild with -DCMAKE_CUDA_ARCHITECTURES=<its architecture>"
                    : device + " cannot be used: " + cudaGetErrorName(e) + ", " + cudaGetErrorString(e);
    return a;
  }
  a.count = n;
  return a;
}

}  // namespace

int cuda_device_count(std::string* why) {
  static const DeviceAnswer answer = ask_the_device();
  if (why && answer.count == 0) *why = answer.why;
  return answer.count;
}

}  // namespace attncheck
