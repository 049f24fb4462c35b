// Small pieces shared by the graph commands: naming blocks and roots for reports, finding the word that
// holds a pointer, and turning a user's address argument into a block.
#pragma once

#include <optional>
#include <string>

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

// The block as reports show it, named by `names` (Session::names(), or names_for() when a command is
// about a few blocks).
BlockRef block_ref(Session& s, const BlockNames& names, BlockId b);
inline BlockRef block_ref(Session& s, BlockId b) { return block_ref(s, s.names(), b); }

// The root's label, with the word (or register) inside it that points into `target`.
// (The graph's edge sites: ReferenceGraph::root_edge_sites.)
RootRef root_ref(Session& s, const BlockNames& names, std::size_t root, BlockId target);

// Where retained sizes come from: the dominator tree, or, for the few blocks of a command about one block,
// removal (graph_closure.h) while that costs less than building the tree.
enum class RetainedSizes { dominator_tree, cheapest };

// What freeing block `b` would free (Retention::retained_bytes).
class RetainedBytes {
 public:
  RetainedBytes(Session& s, RetainedSizes how);
  std::uint64_t operator()(BlockId b);

 private:
  Session& s_;
  const Retention* tree_;
  std::uint64_t budget_;  // edges and blocks removal may visit, over all its calls
};

// How far into block `to` the pointer held at `site` lands: a word in memory (of root `root`, when given: a
// registers root's site is the register slot ReferenceGraph::root_edge_sites gives, a hidden-pointer root's
// word is complemented). 0 when it cannot be read.
std::uint64_t landing_offset(Session& s, Address site, BlockId to, const RootRange* root = nullptr);

// The runtime's name for the word at `offset` of block `b` (a Python dict's `["orders"]`, a list's `[3]`),
// when the image runs a runtime whose objects heapscope reads; empty otherwise.
std::string runtime_field(Session& s, BlockId b, std::uint64_t offset);

// Offset of the first word of block `from` that points into block `to` (ReferenceGraph::edge_sites).
std::optional<std::uint64_t> pointer_offset(Session& s, BlockId from, BlockId to);

// The allocated block that contains the address `text` evaluates to. Throws AnalysisError with a clear
// reason otherwise ("0x… is in a free chunk (tcache)", "0x… is not in any heap block").
BlockId block_argument(Session& s, const std::string& text, Address* address);

}  // namespace heapscope
