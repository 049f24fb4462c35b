// Small helpers shared by the text renderers.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

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

// "0x5555555592a0 (Node, 24 bytes)".
inline std::string block_line(const BlockRef& b) { return fmt::format("0x{:x} ({}, {} bytes)", b.address, b.type, b.size); }

// A retainer path under a numbered item: the root, then one line per block down to the target.
inline void append_path(std::string& out, const std::optional<RetainerPath>& p) {
  if (!p) return;
  out += fmt::format("     path: {}{}\n", p->root.label, p->root.address ? fmt::format(" [0x{:x}]", p->root.address) : "");
  for (const PathStep& s : p->steps)
    out += fmt::format("       → {}{}\n", block_line(s.block),
                       s.offset ? fmt::format(", pointer at +0x{:x}", *s.offset) : "");
}

inline void append_warnings(std::string& out, const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  out += fmt::format("\nWarnings ({}):\n", warnings.size());
  for (const auto& w : warnings) out += "  - " + w + "\n";
}

}  // namespace heapscope::text
