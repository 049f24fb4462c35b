// Tables of library builds whose hidden data heapscope has placed ahead of time (a stripped shared
// allocator's globals), each entry keyed by the build's GNU build-id. Shared by the allocator plug-ins.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace heapscope {

// The entry of `builds` (each with a `build_id` member) for `build_id`; nothing for an unknown build.
template <class Build>
std::optional<Build> find_known_build(std::span<const Build> builds, std::string_view build_id) {
  for (const Build& b : builds)
    if (b.build_id == build_id) return b;
  return std::nullopt;
}

}  // namespace heapscope
