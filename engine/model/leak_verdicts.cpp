#include "model/leak_verdicts.h"

#include <algorithm>
#include <atomic>

#include "base/bounded_scan.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"
#include "model/collector_reach.h"
#include "model/idiom_census.h"
#include "model/parallel_flood.h"

namespace heapscope {

namespace {

// What reach() marks a block: reached by a chain of pointers to blocks' first bytes or pointers an idiom
// explains (valgrind's "definitely reachable", and "reachable via heuristic"), or only by chains through a
// pointer into some block's interior ("possibly").
constexpr std::uint8_t kFirmly = 1, kPossibly = 2;
// A block of a collector's heap that its rules leave unreached (model/collector_reach.h): no pointer malloc's
// rules would follow reaches it, since the next collection frees it.
constexpr std::uint8_t kCollected = 4;
bool reached(std::uint8_t mark) { return mark == kFirmly || mark == kPossibly; }

// A block an idiom held that a start pointer from another reached block or a root reaches too is held by
// that pointer, as memcheck counts it ("reachable via heuristic" only where no such pointer is; a block's
// pointer to its own start, as an arena's to itself, reaches nothing new); nor does an idiom hold a block
// no firm chain reached (its explained pointers came from unreached blocks).
void keep_held_by_idioms_alone(const ReferenceGraph& g, const std::vector<std::uint8_t>& marks, std::vector<HeldBy>& held) {
  const auto release = [&](std::uint32_t e, BlockId from) {
    if (!edge_is_interior(e) && edge_target(e) != from)
      std::atomic_ref<HeldBy>(held[edge_target(e)]).store(0, std::memory_order_relaxed);
  };
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (const std::uint32_t e : g.root_edges(r)) release(e, kNoBlock);
  const unsigned slices = worker_count(g.block_count(), kBlocksPerWorker);
  run_workers(slices, [&](unsigned w) {
    const auto [first, last] = slice_of(g.block_count(), slices, w);
    for (std::size_t b = first; b < last; ++b) {
      if (marks[b] != kFirmly) std::atomic_ref<HeldBy>(held[b]).store(0, std::memory_order_relaxed);
      if (reached(marks[b]))
        for (const std::uint32_t e : g.out_edges(static_cast<BlockId>(b))) release(e, static_cast<BlockId>(b));
    }
  });
  if (std::none_of(held.begin(), held.end(), [](HeldBy h) { return h != 0; })) held = {};
}

// Marks every block some root reaches, kFirmly or kPossibly (0: none), and fills `held` for the blocks an
// idiom holds. Traversals on all cores, each block visited once: along start pointers; then, once the
// interior pointers into what is still unmarked have been looked at (model/idiom_census.h), on from those
// an idiom explains, along start pointers and explained ones alike; then from every other interior pointer
// of a firmly reached block or a root, along every pointer, over what is still unmarked.
// A collector's heap is decided first by its own rules: what they keep starts the traversals, firmly
// reached, and what they leave is kCollected, which no traversal enters.
std::vector<std::uint8_t> reach(const ReferenceGraph& g, const HeapModel& heap, IdiomSet idioms,
                                std::vector<HeldBy>& held) {
  std::vector<std::uint8_t> marks(g.block_count(), 0);
  const unsigned workers = worker_count(g.block_count(), std::size_t{1} << 16);
  std::vector<BlockId> pending;
  if (heap.collector) {
    const std::vector<std::uint8_t> kept = collector_keeps(g, heap);
    for (std::size_t b = 0; b < kept.size(); ++b)
      if (collectable(heap, heap.blocks[b])) {  // an uncollectable object is left to malloc's rules
        marks[b] = kept[b] ? kFirmly : kCollected;
        if (kept[b]) pending.push_back(static_cast<BlockId>(b));
      }
  }
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (const std::uint32_t e : g.root_edges(r))
      if (!edge_is_interior(e)) add_flood_start(pending, marks, edge_target(e), kFirmly);
  auto out_edges = [&](BlockId b) { return g.out_edges(b); };
  parallel_flood(std::move(pending), marks, kFirmly, workers, out_edges,
                 [](std::uint32_t e, unsigned) { return !edge_is_interior(e); });

  ExplainedPointers explained(g, idioms, marks);
  pending.clear();
  for (const std::size_t r : explained.root_sources())
    for (const std::uint32_t& e : g.root_edges(r))
      if (edge_is_interior(e) && explained.explains_root(e)) add_flood_start(pending, marks, edge_target(e), kFirmly);
  for (const BlockId b : explained.sources())
    if (marks[b] == kFirmly)
      for (const std::uint32_t& e : g.out_edges(b))
        if (edge_is_interior(e) && explained.explains(e)) add_flood_start(pending, marks, edge_target(e), kFirmly);
  parallel_flood(std::move(pending), marks, kFirmly, workers, out_edges, [&](const std::uint32_t& e, unsigned) {
    return !edge_is_interior(e) || explained.explains(e);
  });
  std::vector<BlockId> interior_from_roots;
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (const std::uint32_t& e : g.root_edges(r))
      if (edge_is_interior(e) && !explained.explains_root(e)) interior_from_roots.push_back(edge_target(e));
  held = explained.take_idioms();
  if (!held.empty()) {
    PhaseTimer timer("reachability: what idioms alone hold");
    keep_held_by_idioms_alone(g, marks, held);
  }
  pending.clear();
  for (const BlockId to : interior_from_roots) add_flood_start(pending, marks, to, kPossibly);
  // Every block an interior pointer of a firmly reached block leads into and still unmarked: one pass over
  // the edges on all cores, for what a list of every such pointer met by the floods would have held.
  const std::vector<BlockId> inside = collect_in_slices<BlockId>(g.block_count(), kBlocksPerWorker, [&](std::size_t b, auto& out) {
    if (marks[b] != kFirmly) return;
    for (const std::uint32_t e : g.out_edges(static_cast<BlockId>(b)))
      if (edge_is_interior(e) && !marks[edge_target(e)]) out.push_back(edge_target(e));
  });
  for (const BlockId to : inside) add_flood_start(pending, marks, to, kPossibly);
  parallel_flood(std::move(pending), marks, kPossibly, workers, out_edges, [](std::uint32_t, unsigned) { return true; });
  return marks;
}

}  // namespace

// On all cores, 16 verdicts at a time: a new process with a saved index makes the list from the saved
// verdicts (20 M of them on a large heap), most of whose words hold no leak.
std::vector<BlockId> leaked_blocks(std::span<const Verdict> verdict) {
  static_assert(static_cast<int>(Verdict::direct_leak) == static_cast<int>(Verdict::reachable) + 1,
                "the leaked verdicts are those above reachable");
  const std::span<const std::uint8_t> bytes{reinterpret_cast<const std::uint8_t*>(verdict.data()), verdict.size()};
  return collect_from_slices<BlockId>(bytes.size(), kBlocksPerWorker, [&](std::size_t first, std::size_t last, auto& out) {
    each_above(bytes, first, last, static_cast<std::uint8_t>(Verdict::reachable),
               [&](std::size_t b) { out.push_back(static_cast<BlockId>(b)); });
  });
}

LeakVerdicts compute_verdicts(const ReferenceGraph& g, const HeapModel& heap, IdiomSet idioms) {
  const std::size_t n = g.block_count();
  std::vector<Verdict> verdict(n, Verdict::not_allocated);
  std::vector<HeldBy> held_by;
  progress_total(n);  // the traversal visits at most every block once
  std::vector<std::uint8_t> marks = reach(g, heap, idioms, held_by);
  // One pass over every block, in slices on all cores, reading the block array (the largest thing here)
  // only for the blocks not reached; what follows looks at the leaked blocks alone. Each mark becomes the
  // block's "possibly" flag in place (the marks are out.possibly in the end: one array less to fault in).
  const unsigned slices = worker_count(n, kBlocksPerWorker);
  std::vector<std::vector<BlockId>> leaked_in(slices);
  run_workers(slices, [&](unsigned w) {
    const auto [first, last] = slice_of(n, slices, w);
    for (std::size_t b = first; b < last; ++b) {
      const std::uint8_t mark = marks[b];
      marks[b] = mark == kPossibly;
      if (reached(mark)) {
        verdict[b] = Verdict::reachable;  // only allocated blocks are reached: no need to read the block
      } else if (is_allocated(heap.blocks[b].state)) {
        verdict[b] = Verdict::direct_leak;
        leaked_in[w].push_back(static_cast<BlockId>(b));
      }
    }
  });
  std::vector<BlockId> leaked;  // in block order
  for (const std::vector<BlockId>& slice : leaked_in) leaked.insert(leaked.end(), slice.begin(), slice.end());
  leaked_in = {};

  // A leaked block that another leaked block points to is indirect; what remains direct starts a leak.
  // In slices on all cores: a verdict only ever turns from direct to indirect, both leaked, so what a
  // worker reads of another's writes changes nothing.
  const unsigned leaked_slices = worker_count(leaked.size(), std::size_t{1} << 16);
  run_workers(leaked_slices, [&](unsigned w) {
    const auto [first, last] = slice_of(leaked.size(), leaked_slices, w);
    for (std::size_t i = first; i < last; ++i)
      for (std::uint32_t e : g.out_edges(leaked[i])) {
        const BlockId t = edge_target(e);
        std::atomic_ref<Verdict> target(verdict[t]);
        if (t != leaked[i] && is_leaked(target.load(std::memory_order_relaxed)))
          target.store(Verdict::indirect_leak, std::memory_order_relaxed);
      }
  });
  // Leaked blocks no direct leak reaches sit in (or under) cycles with no entry.
  // No root reached a leaked block, so its flag is 0: the array serves again, as "covered", and is
  // cleared there after.
  std::vector<std::uint8_t>& covered = marks;
  std::vector<BlockId> starts;
  for (const BlockId b : leaked)
    if (verdict[b] == Verdict::direct_leak) {
      covered[b] = 1;
      starts.push_back(b);
    }
  parallel_flood(std::move(starts), covered, 1, leaked_slices, [&](BlockId b) { return g.out_edges(b); },
                 [&](std::uint32_t e, unsigned) { return is_leaked(verdict[edge_target(e)]); });
  for (const BlockId b : leaked) {
    if (!covered[b]) verdict[b] = Verdict::cycle_leak;
    covered[b] = 0;  // not reached at all: not "possibly" either
  }
  LeakVerdicts out;
  out.verdict = ViewedArray<Verdict>(std::move(verdict));
  out.possibly = ViewedArray<std::uint8_t>(std::move(marks));
  out.held_by = ViewedArray<HeldBy>(std::move(held_by));
  out.leaked = std::move(leaked);
  return out;
}

}  // namespace heapscope
