#include "model/graph_closure.h"

#include <algorithm>

namespace heapscope {

std::vector<bool> ancestors_of(const ReferenceGraph& graph, std::span<const BlockId> blocks) {
  std::vector<bool> in(graph.block_count(), false);
  std::vector<BlockId> pending;
  for (BlockId b : blocks)
    if (b < in.size() && !in[b]) {
      in[b] = true;
      pending.push_back(b);
    }
  flood(pending, in, [&](BlockId b) { return graph.in_edges(b); }, [](std::uint32_t) { return true; });
  return in;
}

namespace {

// Spends one unit of the budget; false once it is gone.
bool spend(std::uint64_t* budget, std::uint64_t units = 1) {
  if (*budget < units) {
    *budget = 0;
    return false;
  }
  *budget -= units;
  return true;
}

}  // namespace

std::optional<std::uint64_t> retained_by_removal(const ReferenceGraph& graph, const RetentionEdges& edges,
                                                 const HeapModel& heap, const LeakVerdicts& verdicts, BlockId b,
                                                 std::uint64_t* budget) {
  // An unreachable block retains itself only, as in the dominator tree.
  if (verdicts.verdict[b] != Verdict::reachable) return heap.blocks[b].usable_size();

  // 1. What b reaches: the only blocks that removing it can free.
  std::vector<BlockId> reached{b};
  std::vector<bool> below(graph.block_count(), false);
  below[b] = true;
  for (std::size_t i = 0; i < reached.size(); ++i) {
    const auto out = edges.out_edges(reached[i]);
    if (!spend(budget, out.size() + 1)) return std::nullopt;
    for (std::uint32_t e : out) {
      const BlockId to = edge_target(e);
      if (!below[to]) {
        below[to] = true;
        reached.push_back(to);
      }
    }
  }
  // 2. Those of them a root, or a reachable block outside what b reaches, holds stay alive without b:
  // such a block's own path from the roots cannot pass through b, or b would reach it.
  std::vector<bool> alive(graph.block_count(), false);
  std::vector<BlockId> spreading;
  for (BlockId d : reached) {
    if (d == b) continue;
    const auto roots = graph.in_root_edges(d);
    bool held = std::any_of(roots.begin(), roots.end(), [&](std::uint32_t root) { return edges.root_holds(root, d); });
    const auto in = edges.in_edges(d);
    if (!spend(budget, in.size() + roots.size() + 1)) return std::nullopt;
    for (std::size_t i = 0; i < in.size() && !held; ++i) {
      const BlockId from = edge_target(in[i]);
      held = !below[from] && verdicts.verdict[from] == Verdict::reachable;
    }
    if (held) {
      alive[d] = true;
      spreading.push_back(d);
    }
  }
  // 3. Whatever those reach, other than through b, stays alive too.
  flood(spreading, alive, [&](BlockId d) { return edges.out_edges(d); },
        [&](std::uint32_t e) { return edge_target(e) != b; });
  std::uint64_t bytes = 0;
  for (BlockId d : reached)
    if (!alive[d]) bytes += heap.blocks[d].usable_size();
  return bytes;
}

}  // namespace heapscope
