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

// "+0x10 into 0x… (Node, 48 bytes)": where a pointer lands in block `b`, `into` bytes past its start (the
// block alone when it points to the start).
inline std::string landing_line(std::uint64_t into, const BlockRef& b) {
  return (into ? fmt::format("+0x{:x} into ", into) : std::string()) + block_line(b);
}

// "global g_registry in app, field .clients [0x5555…]": a path's root with the member holding the pointer.
inline std::string root_line(const RootRef& r) {
  return r.label + (r.field.empty() ? std::string() : ", field " + r.field) +
         (r.address ? fmt::format(" [0x{:x}]", r.address) : std::string());
}

// ", pointer at +0x88 ([17])": where in a path step's block the pointer to the next step sits.
inline std::string pointer_place(const PathStep& s) {
  if (!s.offset) return {};
  return fmt::format(", pointer at +0x{:x}", *s.offset) + (s.field.empty() ? std::string() : " (" + s.field + ")");
}

// A retainer path under a numbered item: the root, then one line per block down to the target.
inline void append_path(std::string& out, const std::optional<RetainerPath>& p) {
  if (!p) return;
  out += fmt::format("     path: {}\n", root_line(p->root));
  for (const PathStep& s : p->steps) out += fmt::format("       → {}{}\n", block_line(s.block), pointer_place(s));
}

// What a report without some modules' files lacks, said before the report: "No symbols for app (its file is
// missing or is not the one the process ran; see the warnings): ...". Empty when every module has its file.
inline std::string missing_symbols_note(const std::vector<std::string>& modules) {
  if (modules.empty()) return {};
  std::string names;
  for (const std::string& m : modules) names += (names.empty() ? "" : ", ") + m;
  return fmt::format("No symbols for {} (the file is missing or is not the one the process ran; see the "
                     "warnings): types and global variables from {} are unnamed. Every writable mapping in the "
                     "image is still scanned, so the verdicts on the heap walked stand. Give the right file with --exe, or "
                     "open the core where the program's files are.\n\n",
                     names, modules.size() == 1 ? "it" : "them");
}

// "dwarf 62% (1.2 KiB), inferred 30% (...), content 8% (...)": the share of `total` bytes per evidence.
inline std::string naming_shares(const std::vector<NamingShare>& shares, std::uint64_t total) {
  std::string out;
  for (const NamingShare& s : shares)
    out += fmt::format("{}{} {:.0f}% ({} in {} blocks)", out.empty() ? "" : ", ", s.naming,
                       total ? 100.0 * static_cast<double>(s.bytes) / static_cast<double>(total) : 0.0, bytes(s.bytes),
                       s.blocks);
  return out;
}

// A site's frames, one a line: the first after `first` ("allocated at: "), the callers under it after
// `indent` and an arrow; then how many more there are.
inline std::string site_lines(const AllocatedAt& a, const std::string& first, const std::string& indent) {
  if (a.frames.empty()) return first + "(no frame of the program)\n";
  std::string out;
  for (std::size_t i = 0; i < a.frames.size(); ++i)
    out += (i == 0 ? first : indent + "← ") + a.frames[i].text + "\n";
  if (a.more_frames) out += fmt::format("{}… {} more frame{} (--stack shows all)\n", indent, a.more_frames, a.more_frames == 1 ? "" : "s");
  return out;
}

// "  allocated at: f() at x.c:3", or why there is none (`no_site`), or nothing.
inline std::string allocated_at_lines(const std::optional<AllocatedAt>& a, const std::string& no_site = {}) {
  if (a) {
    std::string out = site_lines(*a, "  allocated at: ", "                ");
    if (a->requested) out += fmt::format("                ({} bytes requested)\n", a->requested);
    return out;
  }
  return no_site.empty() ? std::string() : "  allocated at: " + no_site + "\n";
}

inline void append_warnings(std::string& out, const std::vector<std::string>& warnings) {
  if (warnings.empty()) return;
  out += fmt::format("\nWarnings ({}):\n", warnings.size());
  for (const auto& w : warnings) out += "  - " + w + "\n";
}

}  // namespace heapscope::text
