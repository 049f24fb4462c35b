#include "model/leak_verdicts.h"

#include <atomic>

#include "base/progress.h"
#include "base/workers.h"
#include "model/parallel_flood.h"

namespace heapscope {

namespace {

// What reach() marks a block: reached by a chain of pointers to blocks' first bytes (valgrind's
// "definitely reachable"), or only by chains through a pointer into some block's interior ("possibly").
constexpr std::uint8_t kFirmly = 1, kPossibly = 2;

// Marks every block some root reaches, kFirmly or kPossibly (0: none). One traversal on all cores: first
// along start pointers alone, keeping the interior pointers to blocks not marked yet; then from those,
// along every pointer, over what is still unmarked.
std::vector<std::uint8_t> reach(const ReferenceGraph& g) {
  std::vector<std::uint8_t> marks(g.block_count(), 0);
  const unsigned workers = worker_count(g.block_count(), std::size_t{1} << 16);
  std::vector<std::vector<BlockId>> interior(workers);  // per worker: targets of interior pointers
  std::vector<BlockId> pending;
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (std::uint32_t e : g.root_edges(r)) {
      if (edge_is_interior(e)) interior[0].push_back(edge_target(e));
      else add_flood_start(pending, marks, edge_target(e), kFirmly);
    }
  auto out_edges = [&](BlockId b) { return g.out_edges(b); };
  parallel_flood(std::move(pending), marks, kFirmly, workers, out_edges, [&](std::uint32_t e, unsigned w) {
    if (!edge_is_interior(e)) return true;
    interior[w].push_back(edge_target(e));
    return false;
  });
  pending.clear();
  for (const std::vector<BlockId>& targets : interior)
    for (const BlockId to : targets) add_flood_start(pending, marks, to, kPossibly);
  interior = {};
  parallel_flood(std::move(pending), marks, kPossibly, workers, out_edges, [](std::uint32_t, unsigned) { return true; });
  return marks;
}

}  // namespace

std::vector<BlockId> leaked_blocks(const std::vector<Verdict>& verdict) {
  std::vector<BlockId> out;
  for (std::size_t b = 0; b < verdict.size(); ++b)
    if (is_leaked(verdict[b])) out.push_back(static_cast<BlockId>(b));
  return out;
}

LeakVerdicts compute_verdicts(const ReferenceGraph& g, const HeapModel& heap) {
  const std::size_t n = g.block_count();
  LeakVerdicts out;
  out.verdict.assign(n, Verdict::not_allocated);
  progress_total(n);  // the traversal visits at most every block once
  std::vector<std::uint8_t> marks = reach(g);
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
      if (mark) {
        out.verdict[b] = Verdict::reachable;  // only allocated blocks are reached: no need to read the block
      } else if (is_allocated(heap.blocks[b].state)) {
        out.verdict[b] = Verdict::direct_leak;
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
        std::atomic_ref<Verdict> target(out.verdict[t]);
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
    if (out.verdict[b] == Verdict::direct_leak) {
      covered[b] = 1;
      starts.push_back(b);
    }
  parallel_flood(std::move(starts), covered, 1, leaked_slices, [&](BlockId b) { return g.out_edges(b); },
                 [&](std::uint32_t e, unsigned) { return is_leaked(out.verdict[edge_target(e)]); });
  for (const BlockId b : leaked) {
    if (!covered[b]) out.verdict[b] = Verdict::cycle_leak;
    covered[b] = 0;  // not reached at all: not "possibly" either
  }
  out.possibly = std::move(marks);
  out.leaked = std::move(leaked);
  return out;
}

}  // namespace heapscope
