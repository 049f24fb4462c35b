// Text pieces of the reports built on the dominator tree (top, roots, finalizers): the heap's totals line,
// the retained-size cells and the suspects' sentences, one shape everywhere (text, HTML, the report's findings).
#pragma once

#include <algorithm>

#include "formatters/text/text_util.h"
#include "reports/retention_reports.h"

namespace heapscope::text {

// "1 block", "3 blocks".
inline std::string blocks(std::uint64_t n) { return fmt::format("{} block{}", n, n == 1 ? "" : "s"); }

inline std::string heap_line(const HeapTotals& h) {
  return fmt::format("In use: {} in {}; reachable from roots: {} in {}; leaked: {} in {}\n", bytes(h.in_use_bytes),
                     blocks(h.in_use_blocks), bytes(h.reachable_bytes), blocks(h.reachable_blocks),
                     bytes(h.in_use_bytes - h.reachable_bytes), blocks(h.in_use_blocks - h.reachable_blocks));
}

// Retained bytes, share of the heap and blocks, right-aligned under "retained       %    blocks".
inline std::string retained_cells(const Retained& r) {
  return fmt::format("{:>10} {:>6.1f}% {:>9}", bytes(r.bytes), r.percent, r.blocks);
}

// What holds a suspect's bytes: "block 0x… (Node, 48 bytes)", or the root's label.
inline std::string holder_line(const Holder& h) {
  if (h.block) return "block " + block_line(*h.block);
  if (h.root) return h.root->label;
  return "?";
}

// A suspect in one sentence: "global g_cache in app retains 1.2 MiB (34.0% of the in-use heap) in 12 blocks",
// "3000 blocks of Session (1.1 MiB) accumulate under …, which retains 2.0 MiB (40.1%)".
inline std::string suspect_headline(const Suspect& s) {
  if (s.kind == Suspect::Kind::big_retainer)
    return fmt::format("{} retains {} ({:.1f}% of the in-use heap) in {}", holder_line(s.holder), bytes(s.retained.bytes),
                       s.retained.percent, blocks(s.retained.blocks));
  return fmt::format("{} of {} ({}) accumulate under {}, which retains {} ({:.1f}%)", blocks(s.instances), s.type,
                     bytes(s.instance_bytes), holder_line(s.holder), bytes(s.retained.bytes), s.retained.percent);
}

// The owners a roots report lists: its rows are owners (depth 0), each followed by its parts.
inline std::size_t owners_shown(const RootsReport& r) {
  return static_cast<std::size_t>(
      std::count_if(r.roots.begin(), r.roots.end(), [](const TopRootRow& row) { return row.root.depth == 0; }));
}

}  // namespace heapscope::text
