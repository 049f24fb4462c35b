// RetentionEdges: the pointers that make one holder of a block its owner, as the dominator tree
// (retention.h) and a single block's retained size (graph_closure.h) both count them. Two kinds of the
// reference graph's edges hold nothing:
//   - the runtime's bookkeeping: a word of a heap block that is a finalizer registration's slot (an
//     exit_function_list entry, a pthread key's second-level data array) is that registration's root, so
//     the block holding the slot does not also hold what the slot points to (the edge stays when another
//     word of the block points to the same block);
//   - borrowed pointers: a global lives as long as the process, so what a global holds, through any chain
//     of blocks, is the global's; a pointer to such a block from a root of another kind (a thread's stack
//     or registers, a registration, an anonymous mapping) or from a block no global holds is borrowed
//     (CPython's frames point to the module dict sys.modules holds; a worker's local to the configuration
//     a global points to).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/bit_array.h"
#include "model/reference_graph.h"
#include "model/roots.h"

namespace heapscope {

// Whether the edges a block outside what globals hold has into it are dropped here (`dropped`: found by a
// traversal from the globals), or left to the dominator tree, which enters what globals hold first and
// takes no edge into it from outside (`left_to_the_tree`: FirstReach::owned; the traversal is spared, and
// then no block counts as held by globals here, so every root's pointer holds).
enum class BorrowedEdges : std::uint8_t { dropped, left_to_the_tree };

class RetentionEdges {
 public:
  RetentionEdges(const ReferenceGraph& graph, const RootSet& roots, BorrowedEdges borrowed = BorrowedEdges::dropped);

  // The block's out-edges (or in-edges) less those that hold nothing. Inline: the floods and the dominator
  // tree ask for every block's, and most blocks have none dropped.
  std::span<const std::uint32_t> out_edges(BlockId b) const {
    if (has_dropped_[b]) [[unlikely]] return kept_edges(out_, b, graph_.out_edges(b));
    return graph_.out_edges(b);
  }
  std::span<const std::uint32_t> in_edges(BlockId b) const {
    if (has_dropped_[b]) [[unlikely]] return kept_edges(in_, b, graph_.in_edges(b));
    return graph_.in_edges(b);
  }
  // Whether a global holds the block, through any chain of the edges above.
  bool held_by_globals(BlockId b) const { return held_by_globals_.test(b); }
  // Whether a pointer to block `b` in root range `root` holds it (false: borrowed).
  bool root_holds(const RootRange& root, BlockId b) const {
    return root.kind == RootKind::global || !held_by_globals(b);
  }
  bool root_holds(std::size_t root, BlockId b) const { return root_holds(roots_.ranges[root], b); }

 private:
  using KeptEdges = std::unordered_map<BlockId, std::vector<std::uint32_t>>;
  // The block's edges in `kept` where it has an entry there, else `all`.
  static std::span<const std::uint32_t> kept_edges(const KeptEdges& kept, BlockId b, std::span<const std::uint32_t> all);
  void drop_slot_edges(BlockId holder, const std::vector<const RootRange*>& slots);
  void find_what_globals_hold();
  void drop_borrowed();
  void filter_in_edges();

  const ReferenceGraph& graph_;
  const RootSet& roots_;
  BitArray held_by_globals_;  // a bit per block
  std::unordered_map<BlockId, std::vector<BlockId>> dropped_into_;  // block → the blocks whose edge to it is dropped
  KeptEdges out_, in_;  // the edges kept, where some are dropped
  // A bit per block that out_ or in_ holds: the dominator computation asks for every block's edges, and a
  // bit spares the millions of blocks with none dropped a hash lookup.
  std::vector<bool> has_dropped_;
};

}  // namespace heapscope
