// Immediate dominators of a directed graph (semi-NCA: Lengauer and Tarjan's semidominators, "A fast
// algorithm for finding dominators in a flowgraph", 1979, with path compression and no balanced linking,
// then each idom as a nearest common ancestor, after Georgiadis 2005; O(m log n)).
// Everything is iterative and kept in 32-bit arrays indexed by depth-first number, because the graphs
// here are heaps of millions of blocks: a recursive DFS would overflow the stack on a long linked list.
//
// The graph is read through a small adjacency interface, so the retention analysis can present the
// reference graph (blocks, plus root nodes and a super-root) without copying it, and the property test
// can feed random graphs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace heapscope {

inline constexpr std::uint32_t kNoNode = 0xffffffffu;
// Adjacency lists may carry a flag in bit 31 (the reference graph marks interior pointers so); the
// dominator computation ignores it.
inline constexpr std::uint32_t kNodeMask = 0x7fffffffu;

// Predecessors of a node come in up to two lists (e.g. blocks pointing to a block, and roots pointing
// to it), so that neither has to be merged into a copy.
struct AdjacentLists {
  std::span<const std::uint32_t> first, second;
};

class DominatorGraph {
 public:
  virtual ~DominatorGraph() = default;
  virtual std::uint32_t node_count() const = 0;  // nodes are 0 .. node_count()-1, at most 2^31 - 1
  virtual std::span<const std::uint32_t> successors(std::uint32_t node) const = 0;
  virtual AdjacentLists predecessors(std::uint32_t node) const = 0;
};

struct Dominators {
  // Per node: its immediate dominator; kNoNode for the entry and for nodes the entry does not reach.
  std::vector<std::uint32_t> idom;
  // The reachable nodes in depth-first preorder, entry first. A dominator always comes before the nodes
  // it dominates, so one backwards pass over this order sums anything up the dominator tree.
  std::vector<std::uint32_t> preorder;
  // Working arrays of about the node count's size the computation is done with (empty, their capacity
  // kept): a caller that needs arrays that big next reuses their pages, which are already in memory,
  // instead of having the kernel clear fresh ones.
  std::vector<std::vector<std::uint32_t>> spare;
};

// Throws std::length_error when the graph has 2^31 nodes or more, std::out_of_range when `entry` is no node.
Dominators compute_dominators(const DominatorGraph& graph, std::uint32_t entry);

}  // namespace heapscope
