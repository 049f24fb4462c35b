#include "model/dominators.h"

#include <stdexcept>

#include "base/progress.h"

namespace heapscope {

namespace {

// Depth-first numbers start at 1; 0 means "not reached". All working arrays below are indexed by number.
using Number = std::uint32_t;

// Progress: the depth-first search and the semidominator pass each count one unit per reached node,
// told every kProgressNodes (throws Interrupted on Ctrl-C).
constexpr std::uint32_t kProgressNodes = 1 << 16;

struct Numbering {
  std::vector<Number> number;    // per node
  std::vector<std::uint32_t> vertex;  // per number: the node (vertex[0] unused)
  std::vector<Number> parent;    // per number: the DFS tree parent's number (0 for the entry)
};

// Iterative depth-first search: the stack holds (node, next successor to look at), so a list of
// millions of blocks costs 8 bytes per level instead of a call frame.
Numbering number_depth_first(const DominatorGraph& g, std::uint32_t entry) {
  const std::uint32_t n = g.node_count();
  Numbering out;
  out.number.assign(n, 0);
  out.vertex.reserve(1024);
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
    const std::span<const std::uint32_t> succ = g.successors(top.node);
    std::uint32_t i = top.next;
    while (i < succ.size() && out.number[succ[i] & kNodeMask] != 0) ++i;
    if (i == succ.size()) {
      stack.pop_back();
      continue;
    }
    top.next = i + 1;
    visit(succ[i] & kNodeMask, out.number[top.node]);  // may reallocate the stack: `top` is dead here
  }
  return out;
}

// The forest of Lengauer–Tarjan's EVAL/LINK, with nodes processed in decreasing number. A node is
// linked to its DFS parent right after its semidominator is known, so "w is linked" is simply
// "w > linked_above"; that lets the parent array double as the forest's ancestor array, which path
// compression then shortens.
class LinkEvalForest {
 public:
  LinkEvalForest(std::vector<Number> dfs_parent, const std::vector<Number>& semi)
      : ancestor_(std::move(dfs_parent)), semi_(semi), label_(ancestor_.size()) {
    for (Number v = 0; v < label_.size(); ++v) label_[v] = v;
    linked_above_ = static_cast<Number>(ancestor_.size());
  }

  // v's DFS parent; only valid until v is linked (compression never touches unlinked nodes).
  Number parent(Number v) const { return ancestor_[v]; }
  // Links v to its DFS parent (all nodes numbered v and above are then linked).
  void link(Number v) { linked_above_ = v - 1; }

  // The node of least semidominator on the forest path from v up to (not including) its tree's root.
  Number eval(Number v) {
    if (!linked(v)) return v;
    compress(v);
    return label_[v];
  }

 private:
  bool linked(Number v) const { return v > linked_above_; }

  // Makes every node on v's forest path point at the path's root, carrying down the least label.
  void compress(Number v) {
    path_.clear();
    for (Number x = v; linked(ancestor_[x]); x = ancestor_[x]) path_.push_back(x);
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
      const Number y = *it, a = ancestor_[y];
      if (semi_[label_[a]] < semi_[label_[y]]) label_[y] = label_[a];
      ancestor_[y] = ancestor_[a];
    }
  }

  std::vector<Number> ancestor_;
  const std::vector<Number>& semi_;
  std::vector<Number> label_;
  std::vector<Number> path_;
  Number linked_above_ = 0;
};

}  // namespace

Dominators compute_dominators(const DominatorGraph& g, std::uint32_t entry) {
  if (g.node_count() > kNodeMask) throw std::length_error("dominators: more than 2^31 - 1 nodes");
  if (entry >= g.node_count()) throw std::out_of_range("dominators: the entry is not a node of the graph");
  progress_total(2 * std::uint64_t{g.node_count()});
  Numbering dfs = number_depth_first(g, entry);
  const Number count = static_cast<Number>(dfs.vertex.size() - 1);  // reached nodes, numbered 1..count

  std::vector<Number> semi(count + 1);
  for (Number v = 0; v <= count; ++v) semi[v] = v;
  // idom doubles as the "next" link of the semidominator buckets: a node's idom is only set once it
  // leaves its bucket.
  std::vector<Number> idom(count + 1, 0);
  std::vector<Number> bucket(count + 1, 0);  // per number: first node whose semidominator it is
  LinkEvalForest forest(std::move(dfs.parent), semi);

  for (Number w = count; w >= 2; --w) {
    if (w % kProgressNodes == 0) progress_step(kProgressNodes);
    auto relax = [&](std::span<const std::uint32_t> preds) {
      for (std::uint32_t p : preds) {
        const Number v = dfs.number[p & kNodeMask];
        if (v == 0) continue;  // a predecessor the entry does not reach
        const Number u = forest.eval(v);
        if (semi[u] < semi[w]) semi[w] = semi[u];
      }
    };
    const AdjacentLists preds = g.predecessors(dfs.vertex[w]);
    relax(preds.first);
    relax(preds.second);
    idom[w] = bucket[semi[w]];
    bucket[semi[w]] = w;
    const Number p = forest.parent(w);
    forest.link(w);
    // Every node whose semidominator is p: its idom is p, or (fixed up below) that of a node between.
    for (Number v = bucket[p]; v != 0;) {
      const Number next = idom[v];
      const Number u = forest.eval(v);
      idom[v] = semi[u] < semi[v] ? u : p;
      v = next;
    }
    bucket[p] = 0;
  }
  for (Number w = 2; w <= count; ++w)
    if (idom[w] != semi[w]) idom[w] = idom[idom[w]];

  // Back to node ids, in the numbering's own array (each slot is read before it is written).
  Dominators out;
  out.idom = std::move(dfs.number);
  for (std::uint32_t& slot : out.idom) slot = slot >= 2 ? dfs.vertex[idom[slot]] : kNoNode;
  dfs.vertex.erase(dfs.vertex.begin());
  out.preorder = std::move(dfs.vertex);
  return out;
}

}  // namespace heapscope
