#include "queries/chains.h"

#include <algorithm>
#include <array>

#include "queries/block_refs.h"
#include "queries/retention_paths.h"
#include "types/type_groups.h"
#include "base/phase_timer.h"

namespace heapscope {

namespace {

// Marks a branch point in Links::first; no block id reaches it (ids stay below 2^31).
constexpr BlockId kBranch = kNoBlock - 1;

// A block's distinct same-type neighbours, as long as it has at most two.
struct Links {
  BlockId first = kNoBlock, second = kNoBlock;

  void add(BlockId n) {
    if (first == kBranch || first == n || second == n) return;
    if (first == kNoBlock) first = n;
    else if (second == kNoBlock) second = n;
    else first = kBranch;
  }
  bool branch() const { return first == kBranch; }
};

std::vector<Links> same_type_links(const ReferenceGraph& graph, std::span<const std::uint32_t> group) {
  std::vector<Links> links(graph.block_count());
  for (BlockId b = 0; b < graph.block_count(); ++b) {
    if (group[b] == TypeGroups::kNone) continue;
    for (std::uint32_t e : graph.out_edges(b)) {
      const BlockId to = edge_target(e);
      if (to == b || group[to] != group[b]) continue;
      links[b].add(to);
      links[to].add(b);
    }
  }
  return links;
}

bool points_to(const ReferenceGraph& graph, BlockId from, BlockId to) {
  const auto edges = graph.out_edges(from);
  return std::any_of(edges.begin(), edges.end(), [to](std::uint32_t e) { return edge_target(e) == to; });
}

// Walks the paths and rings left once branch points are taken out of the same-type links.
class ChainWalker {
 public:
  ChainWalker(const ReferenceGraph& graph, const HeapModel& heap, std::span<const std::uint32_t> depth,
              std::vector<Links> links)
      : graph_(graph), heap_(heap), depth_(depth), links_(std::move(links)), visited_(links_.size(), false) {}

  std::vector<Chain> walk(std::size_t min_length) {
    std::vector<Chain> out;
    auto keep = [&](const Chain& c) {
      if (c.length >= min_length) out.push_back(c);
    };
    // Paths first, each from its end at the lower id; what is left unvisited with two neighbours is rings.
    for (BlockId b = 0; b < links_.size(); ++b)
      if (!visited_[b] && degree(b) == 1) keep(walk_path(b));
    for (BlockId b = 0; b < links_.size(); ++b)
      if (!visited_[b] && degree(b) == 2) keep(walk_ring(b));
    return out;
  }

 private:
  // The block's neighbours in a chain: its same-type links that are not branch points.
  std::array<BlockId, 2> neighbours(BlockId b) const {
    const Links& l = links_[b];
    if (l.branch()) return {kNoBlock, kNoBlock};
    auto usable = [&](BlockId n) { return n != kNoBlock && !links_[n].branch() ? n : kNoBlock; };
    const BlockId a = usable(l.first), c = usable(l.second);
    return a == kNoBlock ? std::array{c, kNoBlock} : std::array{a, c};
  }
  int degree(BlockId b) const {
    const auto n = neighbours(b);
    return (n[0] != kNoBlock) + (n[1] != kNoBlock);
  }
  BlockId next(BlockId at, BlockId from) const {
    const auto n = neighbours(at);
    return n[0] != from ? n[0] : n[1];
  }
  void visit(Chain& c, BlockId b) {
    visited_[b] = true;
    ++c.length;
    c.bytes += heap_.blocks[b].usable_size();
  }

  Chain walk_path(BlockId start) {
    Chain c;
    BlockId from = kNoBlock, at = start;
    for (;;) {
      visit(c, at);
      const BlockId to = next(at, from);
      if (to == kNoBlock) break;
      from = at;
      at = to;
    }
    const BlockId tail = at, before_tail = from;
    const bool tail_first = depth_[tail] != depth_[start]
                                ? depth_[tail] < depth_[start]
                                : only_links_out(tail, before_tail) && !only_links_out(start, next(start, kNoBlock));
    c.head = tail_first ? tail : start;
    c.tail = tail_first ? start : tail;
    return c;
  }

  Chain walk_ring(BlockId start) {
    Chain c;
    c.ring = true;
    c.head = start;
    BlockId at = start, from = neighbours(start)[1];
    do {
      visit(c, at);
      if (depth_[at] < depth_[c.head]) c.head = at;
      const BlockId to = next(at, from);
      from = at;
      at = to;
    } while (at != start);
    // The tail is the head's neighbour it does not link to, so that going round from the head follows
    // the links.
    const auto n = neighbours(c.head);
    c.tail = points_to(graph_, c.head, n[1]) && !points_to(graph_, c.head, n[0]) ? n[0] : n[1];
    return c;
  }

  // `end` points to its chain neighbour, which does not point back: where a singly linked list starts.
  bool only_links_out(BlockId end, BlockId neighbour) const {
    return points_to(graph_, end, neighbour) && !points_to(graph_, neighbour, end);
  }

  const ReferenceGraph& graph_;
  const HeapModel& heap_;
  std::span<const std::uint32_t> depth_;
  std::vector<Links> links_;
  std::vector<bool> visited_;
};

ChainRow chain_row(Session& s, const Chain& c, const std::vector<std::uint32_t>& depth) {
  ChainRow row;
  row.length = c.length;
  row.bytes = c.bytes;
  row.ring = c.ring;
  row.head = block_ref(s, c.head);
  row.tail = block_ref(s, c.tail);
  row.type = row.head.type;
  row.leaked = depth[c.head] == kUnreached;
  if (row.leaked) return row;
  row.depth = depth[c.head];
  if (const Retention& r = s.retention(); r.reachable(c.head)) row.head_retained = r.retained_bytes(c.head);
  row.path = shortest_retainer_path(s, c.head);
  return row;
}

}  // namespace

std::vector<std::uint32_t> root_distances(const ReferenceGraph& graph) {
  std::vector<std::uint32_t> depth(graph.block_count(), kUnreached);
  std::vector<BlockId> level;
  for (std::size_t r = 0; r < graph.root_count(); ++r)
    for (std::uint32_t e : graph.root_edges(r))
      if (depth[edge_target(e)] == kUnreached) {
        depth[edge_target(e)] = 1;
        level.push_back(edge_target(e));
      }
  for (std::uint32_t d = 2; !level.empty(); ++d) {
    std::vector<BlockId> next;
    for (BlockId b : level)
      for (std::uint32_t e : graph.out_edges(b))
        if (depth[edge_target(e)] == kUnreached) {
          depth[edge_target(e)] = d;
          next.push_back(edge_target(e));
        }
    level = std::move(next);
  }
  return depth;
}

std::vector<Chain> find_chains(const ReferenceGraph& graph, const HeapModel& heap, std::span<const std::uint32_t> group,
                               std::span<const std::uint32_t> depth, std::size_t min_length) {
  return ChainWalker(graph, heap, depth, same_type_links(graph, group)).walk(std::max<std::size_t>(min_length, 2));
}

ChainsReport build_chains_report(Session& s, std::size_t min_length, std::size_t count) {
  const ReferenceGraph& graph = s.graph();
  const HeapModel& heap = s.heap();
  const BlockTypes& types = s.types();
  PhaseTimer timer("chains");
  TypeGroups groups(heap, types);
  const std::vector<std::uint32_t> group =
      group_per_block(groups, graph.block_count(), [&](BlockId b) { return is_allocated(heap.blocks[b].state); });
  const std::vector<std::uint32_t> depth = root_distances(graph);
  std::vector<Chain> chains = find_chains(graph, heap, group, depth, min_length);

  ChainsReport out;
  out.min_length = min_length;
  out.chains = chains.size();
  for (const Chain& c : chains) {
    out.chained_blocks += c.length;
    out.chained_bytes += c.bytes;
  }
  std::sort(chains.begin(), chains.end(), [](const Chain& a, const Chain& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.length != b.length ? a.length > b.length : a.head < b.head;
  });
  if (count && chains.size() > count) chains.resize(count);
  for (const Chain& c : chains) out.rows.push_back(chain_row(s, c, depth));
  return out;
}

}  // namespace heapscope
