// device_buffer.h — owning device allocations, host<->device copies, and NaN-poisoned output buffers with
// guard margins (host code).
//
// PoisonedOutput<T>: kGuard elements on each side of the payload; everything starts as the all-ones pattern
// (0xFFFF for bf16, 0xFFFFFFFF for fp32): a NaN whose sign and payload no arithmetic produces (CUDA's own NaN
// is 0x7FFF / 0x7FFFFFFF). After the kernel, check() throws Error when a guard element was overwritten or a
// payload element was left untouched. Every CUDA kernel wrapper runs this check on every call.
// Reuse across calls (forward_many's workspace): DeviceBuffer::ensure and PoisonedOutput::arm grow an allocation
// to at least n elements (never shrink) and arm() re-poisons before each launch, so nothing a kernel wrote in an
// earlier call can pass for this call's output. PinnedHost<T> is page-locked host memory for fast copies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace attncheck::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n), cap_(n) {
    if (n_) ATTN_CUDA_CHECK(cudaMalloc(&p_, n_ * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) { o.p_ = nullptr, o.n_ = o.cap_ = 0; }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  // Makes size() == n, reallocating (contents lost) only when n exceeds what was allocated before.
  void ensure(std::size_t n) {
    if (n > cap_) {
      if (p_) ATTN_CUDA_CHECK(cudaFree(p_));
      p_ = nullptr;
      ATTN_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
      cap_ = n;
    }
    n_ = n;
  }
  void upload(const std::vector<T>& h) {
    if (h.size() != n_) throw Error("DeviceBuffer::upload: size mismatch");
    if (n_) ATTN_CUDA_CHECK(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) ATTN_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0, cap_ = 0;
};

// Page-locked host memory, grown on demand (contents lost on growth).
template <class T>
class PinnedHost {
 public:
  PinnedHost() = default;
  ~PinnedHost() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  T* ensure(std::size_t n) {
    if (n > cap_) {
      if (p_) ATTN_CUDA_CHECK(cudaFreeHost(p_));
      p_ = nullptr;
      ATTN_CUDA_CHECK(cudaMallocHost(&p_, n * sizeof(T)));
      cap_ = n;
    }
    return p_;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t cap_ = 0;
};

template <class T>
class PoisonedOutput {
 public:
  static constexpr std::size_t kGuard = 256;  // elements of guard on each side
  PoisonedOutput(std::size_t n, std::string what) : n_(n), what_(std::move(what)), buf_(n + 2 * kGuard) {
    ATTN_CUDA_CHECK(cudaMemset(buf_.get(), 0xff, buf_.size() * sizeof(T)));
  }
  // A reusable output: nothing allocated until arm().
  explicit PoisonedOutput(std::string what) : n_(0), what_(std::move(what)) {}
  // Sizes the payload to n elements (growing the allocation if needed) and poisons payload and guards.
  void arm(std::size_t n, cudaStream_t stream) {
    n_ = n;
    buf_.ensure(n + 2 * kGuard);
    ATTN_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0xff, buf_.size() * sizeof(T), stream));
  }
  T* get() const { return buf_.get() + kGuard; }  // the payload the kernel writes
  // Downloads, checks guards and coverage, returns the payload.
  std::vector<T> fetch_checked() const {
    std::vector<T> all = buf_.download();
    check(all.data());
    return std::vector<T>(all.begin() + kGuard, all.begin() + kGuard + n_);
  }
  // The same into reusable page-locked memory (synchronous on `stream`); returns the payload's first element.
  // check_payload = false: only the guards are checked here; the caller must then look for the all-ones
  // pattern in every payload element itself (forward_many does it in its parallel unpack).
  const T* fetch_checked(PinnedHost<T>& host, cudaStream_t stream, bool check_payload = true) const {
    T* all = host.ensure(buf_.size());
    ATTN_CUDA_CHECK(cudaMemcpyAsync(all, buf_.get(), buf_.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
    ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
    check(all, check_payload);
    return all + kGuard;
  }

 private:
  // all = guard, payload, guard as downloaded.
  void check(const T* all, bool check_payload = true) const {
    const T poison = all_ones();
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (!same(all[i], poison) || !same(all[kGuard + n_ + i], poison))
        throw Error(what_ + ": kernel wrote into the guard margin (" + (same(all[i], poison) ? "after" : "before") +
                    " the buffer)");
    }
    for (std::size_t i = 0; check_payload && i < n_; ++i)
      if (same(all[kGuard + i], poison))
        throw Error(what_ + ": kernel left element " + std::to_string(i) + " of " + std::to_string(n_) +
                    " untouched (still the NaN poison)");
  }

  static T all_ones() {
    T t;
    std::memset(&t, 0xff, sizeof t);
    return t;
  }
  static bool same(const T& a, const T& b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }
  std::size_t n_;
  std::string what_;
  DeviceBuffer<T> buf_;
};

}  // namespace attncheck::cuda
