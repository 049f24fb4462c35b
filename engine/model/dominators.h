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

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "base/bit_array.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

inline constexpr std::uint32_t kNoNode = 0xffffffffu;
// Adjacency lists may carry a flag in bit 31 (the reference graph marks interior pointers so); the
// dominator computation ignores it.
inline constexpr std::uint32_t kNodeMask = 0x7fffffffu;

// Predecessors of a node come in up to two lists (e.g. blocks pointing to a block, and roots pointing
// to it), so that neither has to be merged into a copy.
struct AdjacentLists {
  std::span<const std::uint32_t> first, second;
  std::size_t size() const { return first.size() + second.size(); }
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
  // The reachable nodes but the lone leaves, entry first, each after its immediate dominator, so one
  // backwards pass over this order sums anything up the dominator tree: the numbered nodes in depth-first
  // preorder.
  std::vector<std::uint32_t> preorder;
  // The other reachable nodes, a bit each: the lone leaves (dominators_detail::LoneLeaves), which dominate
  // nothing, so that a pass adding each to its dominator may come before the backwards one. Most of a
  // heap's blocks are such (70% of the mixed heap's): 4 bytes each in the order was 14 MB at 5M blocks.
  BitArray lone_leaves;
  // Working arrays of about the node count's size the computation is done with (empty, their capacity
  // kept): a caller that needs arrays that big next reuses their pages, which are already in memory,
  // instead of having the kernel clear fresh ones.
  std::vector<std::vector<std::uint32_t>> spare;
};

// What the entry's first successor reaches (through the first of the entry's successors the search
// enters): shared, as any part of the graph; or owned by it: an edge into that part from outside it is
// taken as absent. The retention tree enters what globals hold first and owns it so (retention_edges.h:
// a pointer into what a global holds, from anything else, is borrowed), which spares a traversal of its own
// to find that part: the search's first subtree is that part.
enum class FirstReach : std::uint8_t { shared, owned };

// Throws std::length_error when the graph has 2^31 nodes or more, std::out_of_range when `entry` is no node.
// A template over the graph's class (final, so its adjacency calls are direct and inlined: the search and
// the semidominators ask them for each of millions of nodes); defined below.
template <std::derived_from<DominatorGraph> Graph>
Dominators compute_dominators(const Graph& graph, std::uint32_t entry, FirstReach first_reach = FirstReach::shared);


namespace dominators_detail {

// Depth-first numbers start at 1; 0 means "not reached". All working arrays below are indexed by number.
using Number = std::uint32_t;

// Progress: the depth-first search and the semidominator pass each count one unit per reached node,
// told every kProgressNodes (throws Interrupted on Ctrl-C).
inline constexpr std::uint32_t kProgressNodes = 1 << 16;

// A lone leaf is a node with no successor and one predecessor, as most heap blocks are (a string, a buffer
// one object points to): its immediate dominator is that predecessor, which alone leads to it, and it
// dominates nothing. The search records that when it meets it, and gives it no number: no room in the
// arrays indexed by number, and no lookup of its number (a cache miss on a large heap) for the one edge to
// it. The entry and the nodes it points to are none: the entry's first reach (FirstReach) ends at a number,
// so its first successor must take one.
//
// Found from the successor lists alone, in one pass on all cores (each worker over whole 64-node words):
// the predecessor lists of a heap's graph (its reverse edges) are built meanwhile on another thread, and
// first needed after the search (retention.cpp).
class LoneLeaves {
 public:
  template <class Graph>
  LoneLeaves(const Graph& g, std::uint32_t entry) : bits_(g.node_count()) {
    const unsigned workers = worker_count(g.node_count(), kBlocksPerWorker);
    // Per worker, the nodes its nodes' edges lead to once and more than once; bits_ takes its own nodes
    // with no successor.
    std::vector<std::vector<std::uint64_t>> once(workers), again(workers);
    run_workers(workers, [&](unsigned w) {
      once[w].assign(bits_.word_count(), 0);
      again[w].assign(bits_.word_count(), 0);
      const auto [first, last] = slice_of(bits_.word_count(), workers, w);
      for (std::size_t word = first; word < last; ++word) {
        if ((word & (kCheckMask >> 6)) == 0) progress_check();
        const std::size_t end = std::min<std::size_t>(64 * word + 64, g.node_count());
        for (std::size_t node = 64 * word; node < end; ++node) {
          const std::span<const std::uint32_t> succ = g.successors(static_cast<std::uint32_t>(node));
          if (succ.empty()) bits_.set(node);
          for (const std::uint32_t e : succ) {
            const std::uint32_t to = e & kNodeMask;
            const std::uint64_t bit = std::uint64_t{1} << (to % 64);
            again[w][to / 64] |= once[w][to / 64] & bit;
            once[w][to / 64] |= bit;
          }
        }
      }
    });
    for (std::size_t word = 0; word < bits_.word_count(); ++word) {
      std::uint64_t one = 0, more = 0;
      for (unsigned w = 0; w < workers; ++w) {
        more |= again[w][word] | (one & once[w][word]);
        one |= once[w][word];
      }
      bits_.word(word) &= one & ~more;
    }
    bits_.clear(entry);
    for (const std::uint32_t e : g.successors(entry)) bits_.clear(e & kNodeMask);
    count_ = bits_.count();
  }
  bool contains(std::uint32_t node) const { return bits_.test(node); }
  std::size_t count() const { return count_; }

 private:
  BitArray bits_;
  std::size_t count_ = 0;
};

// A lone leaf's slot in the numbering holds its predecessor's node id with this bit set, in place of a
// number (node ids are below 2^31).
inline constexpr std::uint32_t kLeafOf = 0x80000000u;
inline bool is_leaf_slot(std::uint32_t slot) { return (slot & kLeafOf) != 0; }

struct Numbering {
  std::vector<Number> number;    // per node
  std::vector<std::uint32_t> vertex;  // per number: the node (vertex[0] unused)
  std::vector<Number> parent;    // per number: the DFS tree parent's number (0 for the entry)
  // The numbers the entry's first subtree takes (what its first successor reaches) end before this one.
  Number first_reach_end = 0;
};

// Iterative depth-first search: the stack holds (node, next successor to look at), so a list of
// millions of blocks costs 8 bytes per level instead of a call frame (and none when each node's last
// successor is the one left: see below).
template <class Graph>
Numbering number_depth_first(const Graph& g, std::uint32_t entry, const LoneLeaves& leaves) {
  const std::uint32_t n = g.node_count();
  Numbering out;
  out.number.assign(n, 0);
  // Sized once: grown by doubling, the two arrays would end up to twice the heap's size. The vertices
  // become the preorder. The parents need a slot per numbered node only, but get room for every node: the
  // arrays made from them (the forest's, the idoms climbed) then serve a caller that needs one per node
  // (Dominators::spare). Pages not written to are not in memory.
  out.vertex.reserve(std::size_t{n} - leaves.count() + 1);
  out.parent.reserve(std::size_t{n} + 1);
  out.vertex.push_back(kNoNode);
  out.parent.push_back(0);
  struct Frame {
    std::uint32_t node, next;
  };
  std::vector<Frame> stack;
  auto visit = [&](std::uint32_t node, Number from) {
    if (out.vertex.size() % kProgressNodes == 0) progress_step(kProgressNodes);
    out.number[node] = static_cast<Number>(out.vertex.size());
    out.vertex.push_back(node);
    out.parent.push_back(from);
    stack.push_back({node, 0});
  };
  visit(entry, 0);
  while (!stack.empty()) {
    Frame& top = stack.back();
    // Back at the entry after its first successor's subtree (when the entry's frame is popped before, for
    // its last successor, that subtree is all the rest).
    if (top.node == entry && top.next > 0 && out.first_reach_end == 0)
      out.first_reach_end = static_cast<Number>(out.vertex.size());
    const std::span<const std::uint32_t> succ = g.successors(top.node);
    std::uint32_t i = top.next;
    for (; i < succ.size(); ++i) {
      const std::uint32_t next = succ[i] & kNodeMask;
      if (leaves.contains(next)) out.number[next] = kLeafOf | top.node;  // met once, from its predecessor
      else if (out.number[next] == 0) break;
    }
    if (i == succ.size()) {
      stack.pop_back();
      continue;
    }
    const Number from = out.number[top.node];
    // Its last successor: the frame has nothing left to do, and the child takes its place (a list's nodes,
    // each with one successor, then cost no frame each, nor a second look at their successors).
    if (i + 1 == succ.size()) stack.pop_back();
    else top.next = i + 1;
    visit(succ[i] & kNodeMask, from);  // may reallocate the stack: `top` is dead here
  }
  if (out.first_reach_end == 0) out.first_reach_end = static_cast<Number>(out.vertex.size());
  return out;
}

// The forest of EVAL/LINK, with nodes processed in decreasing number. A node is linked to its DFS parent
// right after its semidominator is known, so "w is linked" is simply "w > linked_above"; that lets the
// parent array double as the forest's ancestor array, which path compression then shortens. Semi-NCA only
// asks for the least semidominator on a path, not for the node that has it, so a label is that value.
class LinkEvalForest {
 public:
  explicit LinkEvalForest(std::vector<Number> dfs_parent) : ancestor_(std::move(dfs_parent)) {
    least_semi_.reserve(ancestor_.capacity());  // room for every node, for whoever reuses it (release_into)
    least_semi_.resize(ancestor_.size());
    for (Number v = 0; v < least_semi_.size(); ++v) least_semi_[v] = v;
    linked_above_ = static_cast<Number>(ancestor_.size());
  }

  // Links v, whose semidominator is `semi`, to its DFS parent (all nodes numbered v and above are then linked).
  void link(Number v, Number semi) {
    least_semi_[v] = semi;
    linked_above_ = v - 1;
  }

  // The least semidominator on the forest path from v up to (not including) its tree's root; an unlinked
  // v's own number (a node not processed yet is its own semidominator candidate).
  Number eval(Number v) {
    if (!linked(v)) return v;
    compress(v);
    return least_semi_[v];
  }

  // The forest's two arrays, emptied, for their memory to serve again.
  void release_into(std::vector<std::vector<Number>>& spare) {
    for (std::vector<Number>* a : {&ancestor_, &least_semi_}) {
      a->clear();
      spare.push_back(std::move(*a));
    }
  }

 private:
  bool linked(Number v) const { return v > linked_above_; }

  // Makes every node on v's forest path point at the path's root, carrying down the least value.
  void compress(Number v) {
    path_.clear();
    for (Number x = v; linked(ancestor_[x]); x = ancestor_[x]) path_.push_back(x);
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
      const Number y = *it, a = ancestor_[y];
      least_semi_[y] = std::min(least_semi_[y], least_semi_[a]);
      ancestor_[y] = ancestor_[a];
    }
  }

  std::vector<Number> ancestor_;
  std::vector<Number> least_semi_;
  std::vector<Number> path_;
  Number linked_above_ = 0;
};

}  // namespace dominators_detail

// Semi-NCA (Georgiadis, "Linear-time algorithms for dominators and related problems", 2005): the
// semidominators as Lengauer–Tarjan computes them, then each idom as the nearest common ancestor of the
// DFS parent and the semidominator, found by climbing the idoms already known. It needs no buckets: at
// the peak, one 32-bit array per node (the numbering) and four per numbered node (lone leaves have none).
template <std::derived_from<DominatorGraph> Graph>
Dominators compute_dominators(const Graph& g, std::uint32_t entry, FirstReach first_reach) {
  using namespace dominators_detail;
  if (g.node_count() > kNodeMask) throw std::length_error("dominators: more than 2^31 - 1 nodes");
  if (entry >= g.node_count()) throw std::out_of_range("dominators: the entry is not a node of the graph");
  progress_total(2 * std::uint64_t{g.node_count()});
  std::optional<LoneLeaves> leaves;
  {
    PhaseTimer timer("dominators: lone leaves");
    leaves.emplace(g, entry);
  }
  Numbering dfs;
  {
    PhaseTimer timer("dominators: depth-first");
    dfs = number_depth_first(g, entry, *leaves);
  }
  leaves.reset();
  const Number count = static_cast<Number>(dfs.vertex.size() - 1);  // reached nodes, numbered 1..count

  std::vector<std::vector<Number>> spare;
  std::vector<Number> idom;  // the DFS parent, climbed up to the idom below (room for every node: spare)
  idom.reserve(dfs.parent.capacity());
  idom.assign(dfs.parent.begin(), dfs.parent.end());
  // vertex[w] is read once, at w's turn; from then on its slot holds w's semidominator, and the array is
  // made again from the numbering at the end: one array fewer of the size of the heap.
  std::vector<Number>& semi = dfs.vertex;
  {
    PhaseTimer timer("dominators: semidominators");
    LinkEvalForest forest(std::move(dfs.parent));
    // A node of an owned first reach takes no predecessor numbered after it (none from outside it).
    const Number owned_end = first_reach == FirstReach::owned ? dfs.first_reach_end : 0;
    for (Number w = count; w >= 2; --w) {
      if (w % kProgressNodes == 0) progress_step(kProgressNodes);
      const AdjacentLists preds = g.predecessors(dfs.vertex[w]);
      // A node with one predecessor was reached from it: that is its DFS parent (still idom[w] here, and
      // not linked yet, so it is its own eval), its semidominator. Most heap blocks have one referrer;
      // this spares each a lookup of the referrer's number, a cache miss on a large heap.
      if (preds.size() == 1) {
        semi[w] = idom[w];
        forest.link(w, idom[w]);
        continue;
      }
      Number least = w;
      // Predecessors numbered 1 .. below `end` count: 0 is one the entry does not reach. One unsigned
      // comparison: v - 1 wraps for 0.
      const Number end = w < owned_end ? owned_end : kNoNode;
      auto relax = [&](std::span<const std::uint32_t> list) {
        for (std::uint32_t p : list) {
          const Number v = dfs.number[p & kNodeMask];
          if (v - 1 < end - 1) least = std::min(least, forest.eval(v));
        }
      };
      relax(preds.first);
      relax(preds.second);
      semi[w] = least;
      forest.link(w, least);
    }
    forest.release_into(spare);
  }
  PhaseTimer timer("dominators: idoms");
  for (Number w = 2; w <= count; ++w) {
    if (w % kProgressNodes == 0) progress_step(kProgressNodes);
    while (idom[w] > semi[w]) idom[w] = idom[idom[w]];
  }
  // Both passes below touch every node once, each node on its own: on all cores (each a gather or scatter
  // over arrays of the heap's size, memory-bound). The first also marks the lone leaves met, each worker
  // in whole words of the bits.
  const std::size_t nodes = dfs.number.size();
  const unsigned workers = worker_count(nodes, kBlocksPerWorker);
  Dominators out;
  out.lone_leaves = BitArray(nodes);
  run_workers(workers, [&](unsigned w) {
    const auto [first, last] = slice_of(out.lone_leaves.word_count(), workers, w);
    for (std::size_t node = 64 * first; node < std::min<std::size_t>(64 * last, nodes); ++node) {
      if ((node & kCheckMask) == 0) progress_check();
      const Number k = dfs.number[node];
      if (is_leaf_slot(k)) out.lone_leaves.set(node);
      else if (k != 0) dfs.vertex[k] = static_cast<std::uint32_t>(node);
    }
  });

  // Back to node ids, in the numbering's own array (each slot is read before it is written).
  out.idom = std::move(dfs.number);
  run_workers(workers, [&](unsigned w) {
    const auto [first, last] = slice_of(nodes, workers, w);
    for (std::size_t i = first; i < last; ++i) {
      std::uint32_t& slot = out.idom[i];
      slot = is_leaf_slot(slot) ? slot & kNodeMask : slot >= 2 ? dfs.vertex[idom[slot]] : kNoNode;
    }
  });
  dfs.vertex.erase(dfs.vertex.begin());
  out.preorder = std::move(dfs.vertex);
  idom.clear();
  spare.push_back(std::move(idom));
  out.spare = std::move(spare);
  return out;
}

}  // namespace heapscope
