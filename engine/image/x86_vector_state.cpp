#include "image/x86_vector_state.h"

#include <fmt/format.h>

#include <cstring>

namespace heapscope {

namespace {

constexpr std::size_t kXmmOffset = 160;        // xmm_space in the FXSAVE (legacy) area
constexpr std::size_t kXstateBvOffset = 512;   // XSAVE header: which components hold non-initial state
constexpr std::size_t kYmmHighOffset = 576;    // YMM_Hi128 in the standard (non-compacted) format
constexpr std::size_t kYmmHighSize = 16 * VectorRegisters::kRegisters;
constexpr std::uint64_t kSseComponent = 1u << 1;
constexpr std::uint64_t kAvxComponent = 1u << 2;

std::uint64_t load_u64(std::span<const std::byte> area, std::size_t at) {
  std::uint64_t v = 0;
  std::memcpy(&v, area.data() + at, sizeof v);
  return v;
}

// 16 bytes per register from `at`, into lanes [first, first + 2).
void load_halves(std::span<const std::byte> area, std::size_t at, int first, VectorRegisters& out) {
  for (int r = 0; r < VectorRegisters::kRegisters; ++r)
    for (int lane = 0; lane < 2; ++lane)
      out.lanes[r][first + lane] = load_u64(area, at + 16 * static_cast<std::size_t>(r) + 8 * lane);
}

}  // namespace

bool decode_fxsave(std::span<const std::byte> area, VectorRegisters& out, std::string* problem) {
  if (area.size() != kFxsaveAreaSize) {
    if (problem) *problem = fmt::format("the FXSAVE area is {} bytes instead of {}", area.size(), kFxsaveAreaSize);
    return false;
  }
  out = VectorRegisters{};
  load_halves(area, kXmmOffset, 0, out);
  out.lanes_read = VectorRegisters::kXmmLanes;
  return true;
}

bool decode_xsave(std::span<const std::byte> area, VectorRegisters& out, std::string* problem) {
  if (area.size() < kXsaveMinimumSize) {
    if (problem)
      *problem = fmt::format("the XSAVE area is {} bytes, shorter than its header ({} bytes)", area.size(),
                             kXsaveMinimumSize);
    return false;
  }
  out = VectorRegisters{};
  const std::uint64_t components = load_u64(area, kXstateBvOffset);
  if (components & kSseComponent) load_halves(area, kXmmOffset, 0, out);
  out.lanes_read = VectorRegisters::kXmmLanes;
  if (!(components & kAvxComponent)) {
    out.lanes_read = VectorRegisters::kYmmLanes;  // the upper halves are in their initial state: zero
    return true;
  }
  if (area.size() < kYmmHighOffset + kYmmHighSize) {
    if (problem)
      *problem = fmt::format("the XSAVE area is {} bytes, too short for the AVX state its header marks present "
                             "({} bytes); the upper halves of ymm0-15 are not read",
                             area.size(), kYmmHighOffset + kYmmHighSize);
    return true;
  }
  load_halves(area, kYmmHighOffset, VectorRegisters::kXmmLanes, out);
  out.lanes_read = VectorRegisters::kYmmLanes;
  return true;
}

}  // namespace heapscope
