// Text pieces of the reports built on the dominator tree (top, roots, finalizers): the heap's totals line and
// the retained-size cells, one shape everywhere.
#pragma once

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

}  // namespace heapscope::text
