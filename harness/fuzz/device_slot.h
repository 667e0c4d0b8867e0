// device_slot.h — one GPU per fuzzing worker. libFuzzer's fork mode (`attncheck fuzz --workers N` = -fork=N)
// starts N identical worker processes with one environment, so each worker picks its own device: it takes the
// first free slot lock (flock on <lock_dir>/attncheck-gpu-<device>.lock, held for the process's life) and
// restricts itself to that device with CUDA_VISIBLE_DEVICES before its first CUDA call. With more workers than
// devices the rest share them by pid. Devices: the entries of CUDA_VISIBLE_DEVICES when it is set, else one per
// /dev/nvidia<N> file (CUDA indices 0..N-1). CPU kernels and single-device hosts: nothing changes.
// ATTNCHECK_FUZZ_DEVICE_PIN=0 turns it off. Test: ctest -R device_slot.
#pragma once

#include <string>
#include <vector>

namespace attncheck::fuzz {

// The device this process should use among `devices` (CUDA_VISIBLE_DEVICES entries): the first whose slot lock
// it can take (kept locked until the process ends), else devices[pid % size]. Empty `devices` -> "".
std::string pick_device(const std::vector<std::string>& devices, const std::string& lock_dir);

// The devices this process may see (CUDA_VISIBLE_DEVICES's entries, else 0..N-1 for the /dev/nvidia<N> files).
std::vector<std::string> visible_devices();

// True for libFuzzer's parent process in fork or jobs mode (-fork=N / -jobs=N, N >= 1, among the arguments):
// it runs no inputs, and its children inherit its environment, so it must not pin itself (on an H200 x2 host
// the parent once took device 0 and every worker inherited CUDA_VISIBLE_DEVICES=0). The children's command lines
// carry neither flag.
bool is_libfuzzer_parent(const std::vector<std::string>& args);

// For a CUDA kernel ("cuda:..."), on a host with several devices: picks this worker's device and sets
// CUDA_VISIBLE_DEVICES to it. Returns the device chosen, or "" when nothing was changed. Call it in the workers
// only (not when is_libfuzzer_parent).
std::string pin_worker_to_one_device(const std::string& kernel, const std::string& lock_dir = "/tmp");

}  // namespace attncheck::fuzz
