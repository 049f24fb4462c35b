// The interior pointers an idiom explains (model/interior_idioms.h), found in one pass over every block and
// root range that holds an interior pointer into a block the start pointers left unreached, so that the
// flood that follows takes them as it takes pointers to block starts: an intrusive list of a million
// nodes is walked in one traversal, not one round per node.
//
// memcheck's four idioms are tests of one pointer and the bytes it lands in. heapscope's three are tests of
// a population, counted over those pointers whether their blocks are reachable or not (what a program does
// with its structures shows in all of them):
//   length-prefixed  at least kPopulationQuorum distinct blocks are pointed to at the same offset past a
//                    length header (interior_idioms.cpp's test);
//   fixed-offset     at least kPopulationQuorum distinct blocks of one usable size are pointed to at the
//                    same offset, which no other idiom explains;
//   pool             a block (of kLeastPoolBytes at least) is pointed into at kPopulationQuorum distinct
//                    word-aligned offsets or more (a pointer to an unaligned byte, a string's, counts for
//                    none: a parser's pointers into its text make no pool).
// A group meets its quorum for good: its pointers are explained from then on, and those that came before
// wait in its list; a group short of it in every worker may meet it once the workers' are merged. The
// group's members are kept up to the quorum only.
#pragma once

#include <cstdint>
#include <vector>

#include "base/bit_array.h"
#include "model/interior_idioms.h"
#include "model/reference_graph.h"

namespace heapscope {

inline constexpr std::size_t kPopulationQuorum = 8;
inline constexpr std::uint64_t kLeastPoolBytes = 128;

class ExplainedPointers {
 public:
  ExplainedPointers() = default;
  // The census of `g`'s interior pointers for `idioms` into the blocks not `reached` (a byte per block; with
  // no idiom, nothing is read and nothing explained).
  ExplainedPointers(const ReferenceGraph& g, IdiomSet idioms, const std::vector<std::uint8_t>& reached);

  // Whether an idiom explains the pointer behind `edge`, a reference into a span g.out_edges() returned.
  bool explains(const std::uint32_t& edge) const {
    return edges_.size() != 0 && edges_.test(graph_->edge_position(edge));
  }
  // The same for a reference into a span g.root_edges() returned.
  bool explains_root(const std::uint32_t& edge) const {
    return roots_.size() != 0 && roots_.test(graph_->root_edge_position(edge));
  }
  // For each block, the idiom of an explained pointer into it (HeldBy), 0 for none; empty when no pointer
  // is explained.
  std::vector<HeldBy> take_idioms() { return std::move(idioms_); }
  // The blocks and root ranges whose pointers were looked at, in order: where an explained pointer from a
  // block reached before is.
  const std::vector<BlockId>& sources() const { return sources_; }
  const std::vector<std::size_t>& root_sources() const { return root_sources_; }

 private:
  const ReferenceGraph* graph_ = nullptr;
  std::vector<BlockId> sources_;
  std::vector<std::size_t> root_sources_;
  BitArray edges_;  // a bit per block edge (ReferenceGraph::edge_position)
  BitArray roots_;  // a bit per root edge (ReferenceGraph::root_edge_position)
  std::vector<HeldBy> idioms_;
};

}  // namespace heapscope
