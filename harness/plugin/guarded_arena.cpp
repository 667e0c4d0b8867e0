// guarded_arena.cpp — layout, encoding, and the out-of-bounds check of a plugin call's buffers.
#include "harness/plugin/guarded_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "kernels/formats.h"

namespace attncheck {

int32_t to_abi_format(Format f) {
  switch (f) {
    case Format::kF32: return ATTNCHECK_FORMAT_FP32;
    case Format::kBF16: return ATTNCHECK_FORMAT_BF16;
    case Format::kF16: return ATTNCHECK_FORMAT_FP16;
    case Format::kE4M3: return ATTNCHECK_FORMAT_E4M3;
    case Format::kE5M2: return ATTNCHECK_FORMAT_E5M2;
    case Format::kF64: break;
  }
  throw Error(std::string("the plugin ABI has no ") + format_name(f) + " format");
}

Format from_abi_format(int32_t f) {
  switch (f) {
    case ATTNCHECK_FORMAT_FP32: return Format::kF32;
    case ATTNCHECK_FORMAT_BF16: return Format::kBF16;
    case ATTNCHECK_FORMAT_FP16: return Format::kF16;
    case ATTNCHECK_FORMAT_E4M3: return Format::kE4M3;
    case ATTNCHECK_FORMAT_E5M2: return Format::kE5M2;
    default: break;
  }
  throw Error("unknown plugin ABI format " + std::to_string(f));
}

std::size_t abi_format_bytes(int32_t f) {
  switch (f) {
    case ATTNCHECK_FORMAT_FP32: return 4;
    case ATTNCHECK_FORMAT_BF16:
    case ATTNCHECK_FORMAT_FP16: return 2;
    case ATTNCHECK_FORMAT_E4M3:
    case ATTNCHECK_FORMAT_E5M2:
    case ATTNCHECK_FORMAT_MASK_U8: return 1;
    default: break;
  }
  throw Error("unknown plugin ABI format " + std::to_string(f));
}

GuardedArena::~GuardedArena() {
  if (base_) munmap(base_, size_);
}

int GuardedArena::add(const std::string& name, int32_t abi_format, std::vector<std::int64_t> shape, bool output) {
  if (base_) throw Error("GuardedArena::add after allocate");
  Region r;
  r.name = name;
  r.format = abi_format;
  r.output = output;
  const std::size_t rank = shape.size();
  r.stride.assign(rank, 1);
  // Innermost rows are padded by pad_ elements; outer strides multiply up from there.
  for (std::size_t k = rank - 1; k-- > 0;)
    r.stride[k] = (k + 2 == rank) ? shape[k + 1] + pad_ : r.stride[k + 1] * shape[k + 1];
  std::int64_t last = 0;  // offset of the last element, in elements
  for (std::size_t k = 0; k < rank; ++k) last += (shape[k] - 1) * r.stride[k];
  r.shape = std::move(shape);
  const std::size_t bytes = abi_format_bytes(abi_format);
  r.span = static_cast<std::size_t>(last + 1) * bytes;
  std::size_t cursor = regions_.empty() ? 0 : regions_.back().offset + ((regions_.back().span + 63) / 64) * 64;
  r.offset = cursor + kGuardBytes;
  regions_.push_back(std::move(r));
  return static_cast<int>(regions_.size() - 1);
}

void GuardedArena::allocate() {
  const Region& last = regions_.back();
  size_ = last.offset + ((last.span + 63) / 64) * 64 + kGuardBytes;
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw Error(std::string("plugin buffers: mmap of ") + std::to_string(size_) + " bytes failed: " + strerror(errno));
  base_ = static_cast<std::uint8_t*>(p);
  std::memset(base_, 0xFF, size_);
  writable_.assign(size_, 0);
  for (const Region& r : regions_) {
    if (!r.output) continue;
    const std::size_t bytes = abi_format_bytes(r.format);
    for_each_element(r, [&](std::size_t, std::size_t off) { std::memset(&writable_[off], 1, bytes); });
  }
}

template <class F>
void GuardedArena::for_each_element(const Region& r, F f) const {
  const std::size_t rank = r.shape.size();
  const std::size_t bytes = abi_format_bytes(r.format);
  std::vector<std::int64_t> idx(rank, 0);
  std::size_t packed = 0;
  for (;;) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < rank; ++k) off += idx[k] * r.stride[k];
    f(packed++, r.offset + static_cast<std::size_t>(off) * bytes);
    std::size_t k = rank;
    while (k > 0 && ++idx[k - 1] == r.shape[k - 1]) idx[--k] = 0;
    if (k == 0) return;
  }
}

void GuardedArena::write(int t, const std::vector<double>& values) {
  const Region& r = regions_.at(t);
  const Format f = from_abi_format(r.format);
  for_each_element(r, [&](std::size_t i, std::size_t off) {
    const double x = values.at(i);
    if (r.format == ATTNCHECK_FORMAT_FP32) {
      const float v = static_cast<float>(x);  // exact: the values are fp32-representable (Instance::validate)
      std::memcpy(base_ + off, &v, 4);
    } else if (abi_format_bytes(r.format) == 2) {
      const auto v = static_cast<std::uint16_t>(encode(x, f));
      std::memcpy(base_ + off, &v, 2);
    } else {
      base_[off] = static_cast<std::uint8_t>(encode(x, f));
    }
  });
}

void GuardedArena::write_mask(int t, const std::vector<std::uint8_t>& keep) {
  const Region& r = regions_.at(t);
  for_each_element(r, [&](std::size_t i, std::size_t off) { base_[off] = keep.at(i) ? 1 : 0; });
}

attncheck_tensor GuardedArena::tensor(int t) const {
  const Region& r = regions_.at(t);
  attncheck_tensor out{};
  out.data = base_ + r.offset;
  out.format = r.format;
  out.rank = static_cast<int32_t>(r.shape.size());
  for (std::size_t k = 0; k < r.shape.size(); ++k) {
    out.shape[k] = r.shape[k];
    out.stride[k] = r.stride[k];
  }
  return out;
}

void GuardedArena::snapshot() { snapshot_.assign(base_, base_ + size_); }

std::string GuardedArena::check() const {
  for (std::size_t i = 0; i < size_; ++i) {
    if (writable_[i] || base_[i] == snapshot_[i]) continue;
    // Name the place: inside which region's span, or in the guard before which region.
    std::ostringstream s;
    s << "byte " << i << " of the call's buffers changed (0x" << std::hex << int(snapshot_[i]) << " -> 0x"
      << int(base_[i]) << std::dec << "): ";
    for (std::size_t k = 0; k < regions_.size(); ++k) {
      const Region& r = regions_[k];
      if (i < r.offset) {  // a guard margin (or alignment slack) in front of region k
        if (k == 0) {
          s << "guard margin, " << (r.offset - i) << " bytes before " << r.name;
        } else {
          const Region& prev = regions_[k - 1];
          s << "guard margin, " << (i - (prev.offset + prev.span)) << " bytes after the end of " << prev.name
            << " (" << (r.offset - i) << " bytes before " << r.name << ")";
        }
        return s.str();
      }
      if (i < r.offset + r.span) {
        s << (r.output ? "in row padding of output " : "in input ") << r.name << " at element "
          << (i - r.offset) / abi_format_bytes(r.format);
        return s.str();
      }
    }
    const Region& last = regions_.back();
    s << "guard margin, " << (i - (last.offset + last.span)) << " bytes after the end of " << last.name;
    return s.str();
  }
  return "";
}

std::vector<double> GuardedArena::read(int t) const {
  const Region& r = regions_.at(t);
  std::size_t n = 1;
  for (auto s : r.shape) n *= static_cast<std::size_t>(s);
  std::vector<double> out(n);
  const Format f = from_abi_format(r.format);
  for_each_element(r, [&](std::size_t i, std::size_t off) {
    if (r.format == ATTNCHECK_FORMAT_FP32) {
      float v;
      std::memcpy(&v, base_ + off, 4);
      out[i] = v;
    } else if (abi_format_bytes(r.format) == 2) {
      std::uint16_t v;
      std::memcpy(&v, base_ + off, 2);
      out[i] = decode(v, f);
    } else {
      out[i] = decode(base_[off], f);
    }
  });
  return out;
}

}  // namespace attncheck
