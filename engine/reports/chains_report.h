// Report of the chains command: maximal chains of same-type blocks linked one to one
// (queries/chains.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope {

struct ChainRow {
  std::string type;          // of every block in the chain
  std::uint64_t length = 0;  // blocks
  std::uint64_t bytes = 0;   // Σ usable bytes of its blocks
  bool ring = false;         // the chain closes on itself
  bool leaked = false;       // no root reaches it
  BlockRef head;             // the end nearest a root (of a ring: its block nearest a root)
  BlockRef tail;             // the other end (of a ring: the block before the head going round)
  std::optional<std::uint64_t> head_retained;  // what the head alone keeps alive; absent when leaked
  std::optional<std::uint64_t> depth;          // fewest edges from a root to the head; absent when leaked
  std::optional<RetainerPath> path;            // a shortest path from a root to the head; absent when leaked
};

struct ChainsReport {
  std::uint64_t min_length = 0;
  std::uint64_t chains = 0;          // chains found, listed or not
  std::uint64_t chained_blocks = 0;  // Σ over all of them
  std::uint64_t chained_bytes = 0;
  std::vector<ChainRow> rows;        // by bytes, largest first; at most -n of them
  std::vector<std::string> warnings;
};

}  // namespace heapscope
