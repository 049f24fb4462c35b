// A field of a structure the allocator plug-ins read from the image as bytes (a segment header, a slice
// entry, a meta area): copied out, so that a field at any offset is read without an unaligned access.
#pragma once

#include <cstdint>
#include <cstring>

namespace heapscope {

template <class T>
T field_at(const std::uint8_t* bytes, std::uint64_t offset) {
  T v;
  std::memcpy(&v, bytes + offset, sizeof v);
  return v;
}
inline std::uint8_t u8_at(const std::uint8_t* bytes, std::uint64_t offset) { return bytes[offset]; }
inline std::uint16_t u16_at(const std::uint8_t* bytes, std::uint64_t offset) { return field_at<std::uint16_t>(bytes, offset); }
inline std::uint32_t u32_at(const std::uint8_t* bytes, std::uint64_t offset) { return field_at<std::uint32_t>(bytes, offset); }
inline std::uint64_t u64_at(const std::uint8_t* bytes, std::uint64_t offset) { return field_at<std::uint64_t>(bytes, offset); }

}  // namespace heapscope
