// Small pieces shared by the graph commands: naming blocks and roots for reports, finding the word that
// holds a pointer, and turning a user's address argument into a block.
#pragma once

#include <optional>
#include <string>

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

BlockRef block_ref(Session& s, BlockId b);

// The root's label, with the word (or register) inside it that points into `target`.
// (The graph's edge sites: ReferenceGraph::root_edge_sites.)
RootRef root_ref(Session& s, std::size_t root, BlockId target);

// Offset of the first word of block `from` that points into block `to` (ReferenceGraph::edge_sites).
std::optional<std::uint64_t> pointer_offset(Session& s, BlockId from, BlockId to);

// The allocated block that contains the address `text` evaluates to. Throws AnalysisError with a clear
// reason otherwise ("0x… is in a free chunk (tcache)", "0x… is not in any heap block").
BlockId block_argument(Session& s, const std::string& text, Address* address);

}  // namespace heapscope
