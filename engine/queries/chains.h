// Chains: maximal runs of blocks of one type linked one to one — a continuation chain (each closure
// wrapping the previous one), a runaway linked list, a chain of coroutine frames.
//
// Definition. A block's type is its BlockTypes type, or "unknown (N bytes)" when it has none, so the
// equal nodes of a C list count as one type (types/type_groups.h). Take the reference graph's edges
// between two distinct blocks of the same type, ignoring their direction and duplicates. A block with
// more than two such same-type neighbours is a branch point and belongs to no chain: a tree is not a
// chain. What remains falls apart into paths and rings; each of at least `min_length` blocks is a chain.
// A doubly linked list, or coroutine frames that point to their child and back to their awaiting parent,
// are chains as much as a singly linked list is.
//
// The head of a chain is the end nearest a root (fewest edges from any root, by one breadth-first
// search from the roots); between ends equally near, the one whose link to the chain only goes out of it
// (where a singly linked list starts), else the one at the lower address. A ring's head is its block
// nearest a root. Linear time; per block, 8 bytes of links, 4 of group and 4 of distance.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/reference_graph.h"
#include "heap/heap_model.h"
#include "reports/chains_report.h"
#include "session/session.h"

namespace heapscope {

inline constexpr std::uint32_t kUnreached = 0xffffffffu;
inline constexpr std::size_t kDefaultMinChainLength = 3;

// Fewest edges from any root to each block: 1 for a block a root points to; kUnreached when no root
// reaches it.
std::vector<std::uint32_t> root_distances(const ReferenceGraph& graph);

struct Chain {
  BlockId head = kNoBlock, tail = kNoBlock;
  std::uint32_t length = 0;  // blocks
  std::uint64_t bytes = 0;   // Σ usable bytes
  bool ring = false;
};

// The chains of at least `min_length` (≥ 2) blocks, in no particular order. `group[b]` is block b's type
// group, TypeGroups::kNone for blocks that take no part (free ones); `depth` is root_distances().
std::vector<Chain> find_chains(const ReferenceGraph& graph, const HeapModel& heap, std::span<const std::uint32_t> group,
                               std::span<const std::uint32_t> depth, std::size_t min_length);

// The `count` chains with the most bytes (0: all), with their heads' retained sizes and paths.
ChainsReport build_chains_report(Session& s, std::size_t min_length, std::size_t count);

}  // namespace heapscope
