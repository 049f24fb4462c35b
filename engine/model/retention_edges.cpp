#include "model/retention_edges.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/progress.h"
#include "base/workers.h"
#include "model/parallel_flood.h"

namespace heapscope {

RetentionEdges::RetentionEdges(const ReferenceGraph& graph, const RootSet& roots, BorrowedEdges borrowed)
    : graph_(graph), roots_(roots), held_by_globals_(graph.block_count()),
      has_dropped_(graph.block_count(), false) {
  std::map<BlockId, std::vector<const RootRange*>> slots_by_block;
  for (const RootRange& r : roots.ranges)
    if (r.kind == RootKind::finalizer)
      if (const BlockId holder = graph.index().find(r.start); holder != kNoBlock) slots_by_block[holder].push_back(&r);
  for (const auto& [holder, slots] : slots_by_block) drop_slot_edges(holder, slots);
  if (borrowed == BorrowedEdges::dropped) {
    find_what_globals_hold();  // through the edges the slots leave
    drop_borrowed();
  }
  filter_in_edges();
}

std::span<const std::uint32_t> RetentionEdges::kept_edges(const KeptEdges& kept, BlockId b,
                                                           std::span<const std::uint32_t> all) {
  const auto it = kept.find(b);
  return it != kept.end() ? std::span<const std::uint32_t>(it->second) : all;
}

void RetentionEdges::drop_slot_edges(BlockId holder, const std::vector<const RootRange*>& slots) {
  const Block& block = graph_.index().blocks()[holder];
  std::set<BlockId> held_by_slots, held_otherwise;
  graph_.for_each_pointer(block.address(), block.address() + block.usable_size(),
                          [&](Address at, std::uint64_t, BlockId target) {
                            const bool in_slot = std::any_of(slots.begin(), slots.end(), [&](const RootRange* r) {
                              return at >= r->start && at < r->end;
                            });
                            (in_slot ? held_by_slots : held_otherwise).insert(target);
                          });
  std::vector<std::uint32_t> kept;
  bool dropped = false;
  for (const std::uint32_t e : graph_.out_edges(holder)) {
    const BlockId t = edge_target(e);
    if (held_by_slots.contains(t) && !held_otherwise.contains(t)) {
      dropped_into_[t].push_back(holder);
      dropped = true;
    } else {
      kept.push_back(e);
    }
  }
  if (dropped) {
    out_[holder] = std::move(kept);
    has_dropped_[holder] = true;
  }
}

void RetentionEdges::find_what_globals_hold() {
  // A byte a block while the workers flood (each mark set once, by whichever gets there first), then a bit.
  std::vector<std::uint8_t> held(graph_.block_count(), 0);
  std::vector<BlockId> pending;
  for (std::size_t r = 0; r < roots_.ranges.size(); ++r)
    if (roots_.ranges[r].kind == RootKind::global)
      for (const std::uint32_t e : graph_.root_edges(r)) add_flood_start(pending, held, edge_target(e), 1);
  progress_total(graph_.block_count());  // at most every block once
  const unsigned workers = worker_count(graph_.block_count(), kBlocksPerWorker);
  parallel_flood(std::move(pending), held, 1, workers, [&](BlockId b) { return out_edges(b); },
                 [](std::uint32_t, unsigned) { return true; });
  run_workers(workers, [&](unsigned w) {  // 64 blocks a word, each worker its own words
    const auto [first, last] = slice_of(held_by_globals_.word_count(), workers, w);
    for (std::size_t word = first; word < last; ++word) {
      std::uint64_t bits = 0;
      for (std::size_t b = word * 64, end = std::min(held.size(), b + 64); b < end; ++b)
        bits |= std::uint64_t{held[b]} << (b & 63);
      held_by_globals_.word(word) = bits;
    }
  });
}

// The few blocks outside what globals hold that point into it (a thread's own objects pointing to shared
// ones) lose those edges; the others, and every block globals hold, keep theirs. The workers find them,
// each in a slice of the blocks; they are recorded in block order, as one pass would.
void RetentionEdges::drop_borrowed() {
  struct Borrowing {
    BlockId block;
    std::vector<std::uint32_t> kept;
  };
  std::vector<Borrowing> found =
      collect_in_slices<Borrowing>(graph_.block_count(), kBlocksPerWorker, [&](std::size_t i, std::vector<Borrowing>& out) {
        const auto b = static_cast<BlockId>(i);
        if (held_by_globals(b)) return;
        const std::span<const std::uint32_t> edges = out_edges(b);
        if (std::none_of(edges.begin(), edges.end(), [&](std::uint32_t e) { return held_by_globals(edge_target(e)); }))
          return;
        Borrowing borrowing{b, {}};
        for (const std::uint32_t e : edges)
          if (!held_by_globals(edge_target(e))) borrowing.kept.push_back(e);
        out.push_back(std::move(borrowing));
      });
  for (Borrowing& borrowing : found) {
    const BlockId b = borrowing.block;
    for (const std::uint32_t e : out_edges(b))
      if (held_by_globals(edge_target(e))) dropped_into_[edge_target(e)].push_back(b);
    out_[b] = std::move(borrowing.kept);
    has_dropped_[b] = true;
  }
}

void RetentionEdges::filter_in_edges() {
  for (auto& [to, from] : dropped_into_) {
    std::sort(from.begin(), from.end());
    std::vector<std::uint32_t>& kept = in_[to];
    has_dropped_[to] = true;
    for (const std::uint32_t e : graph_.in_edges(to))
      if (!std::binary_search(from.begin(), from.end(), edge_target(e))) kept.push_back(e);
  }
  dropped_into_ = {};
}

}  // namespace heapscope
