// Small helpers shared by the text renderers.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace heapscope::text {

// 1536 → "1.5 KiB"; exact byte counts stay available in JSON.
inline std::string bytes(std::uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, kUnits[unit]);
}

inline std::string hex(std::uint64_t a) { return fmt::format("0x{:x}", a); }

inline void append_warnings(std::string& out, const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  out += fmt::format("\nWarnings ({}):\n", warnings.size());
  for (const auto& w : warnings) out += "  - " + w + "\n";
}

}  // namespace heapscope::text
