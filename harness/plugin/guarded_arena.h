// guarded_arena.h — the buffers of one plugin call, in shared memory, fenced with NaN guard margins.
//
// Every tensor of a call (inputs and outputs) gets a region of one MAP_SHARED anonymous mapping (so a
// forked child's writes are seen by the parent, see isolated_call.h):
//     [guard kGuardBytes][tensor span, rounded up to 64 bytes][guard] [next tensor ...]
// Before the call the whole mapping is filled with 0xFF bytes — a NaN in every storage format (bf16/fp16
// 0xFFFF, fp32 0xFFFFFFFF, e4m3 S.1111.111, e5m2 S.11111.11) — and then the inputs are written. Outputs
// therefore start as NaN: an element the kernel forgets to write reads back as NaN and fails the
// properties. After the call, check() compares every byte that is not an element of an output with the
// snapshot taken before the call: a changed guard byte, row-padding byte or input byte is a write outside
// the outputs (FaultKind::kOutOfBounds).
//
// Layout: tensors use attncheck's row-major order (harness/problem.h); with `pad` > 0 every innermost row
// is followed by `pad` unused elements (strides grow accordingly) so that a kernel ignoring strides fails.
// Values are encoded with formats.h encode() (round-to-nearest-even; inputs are exactly representable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/plugin/attncheck_plugin.h"
#include "harness/problem.h"

namespace attncheck {

// Maps between attncheck formats and ABI formats; throws Error for a format the ABI lacks (fp64).
int32_t to_abi_format(Format f);
Format from_abi_format(int32_t f);  // throws Error for MASK_U8 or an unknown value
std::size_t abi_format_bytes(int32_t f);

class GuardedArena {
 public:
  static constexpr std::size_t kGuardBytes = 256;

  explicit GuardedArena(int pad = 0) : pad_(pad) {}
  ~GuardedArena();
  GuardedArena(const GuardedArena&) = delete;
  GuardedArena& operator=(const GuardedArena&) = delete;

  // Declare a tensor (before allocate()); returns its handle.
  int add(const std::string& name, int32_t abi_format, std::vector<std::int64_t> shape, bool output);
  // Map the shared memory and fill it with 0xFF. No add() after this.
  void allocate();
  // Write values (packed row-major, one per element) into a tensor; encodes to its format.
  void write(int t, const std::vector<double>& values);
  void write_mask(int t, const std::vector<std::uint8_t>& keep);
  // The ABI view of a tensor (pointer into the mapping, shape, strides in elements).
  attncheck_tensor tensor(int t) const;
  // Remember every byte; call after the inputs are written, right before the plugin call.
  void snapshot();
  // "" when nothing outside an output element changed since snapshot(); else where the first change is.
  std::string check() const;
  // Decode an output tensor to doubles, packed row-major.
  std::vector<double> read(int t) const;

 private:
  struct Region {
    std::string name;
    int32_t format;
    std::vector<std::int64_t> shape, stride;
    std::size_t offset = 0;  // bytes from the mapping's start to element 0
    std::size_t span = 0;    // bytes from element 0 to the end of the last element
    bool output;
  };
  template <class F> void for_each_element(const Region& r, F f) const;  // f(packed index, byte offset)

  int pad_;
  std::vector<Region> regions_;
  std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::uint8_t> snapshot_;
  std::vector<std::uint8_t> writable_;  // 1 for bytes of output elements
};

}  // namespace attncheck
