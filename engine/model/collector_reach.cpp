#include "model/collector_reach.h"

#include <algorithm>

#include "base/phase_timer.h"
#include "base/workers.h"
#include "image/memory_cursor.h"
#include "model/parallel_flood.h"

namespace heapscope {

namespace {

class CollectorRulesOnGraph {
 public:
  CollectorRulesOnGraph(const ReferenceGraph& g, const HeapModel& heap) : g_(g), heap_(heap), rules_(*heap.collector) {}

  bool in_heap(BlockId b) const {
    const Block& blk = heap_.blocks[b];
    return blk.arena == rules_.arena && is_allocated(blk.state);
  }

  // Whether `word`, pointing into `target`, keeps it: a pointer to its start does; one into its interior
  // when the collector takes any (or the word lies in a thread's stack or registers: `anywhere`), else at
  // a registered displacement.
  bool keeps(std::uint64_t word, BlockId target, bool anywhere) const {
    const Address start = heap_.blocks[target].address();
    if (word == start || rules_.interior_pointers || anywhere) return true;
    return word - start < 4096 && std::binary_search(rules_.valid_offsets.begin(), rules_.valid_offsets.end(),
                                                     static_cast<std::uint16_t>(word - start));
  }

  // Whether a word of block `from` that makes edge `e` keeps its target: the words of `from` read again
  // for an interior edge when only registered displacements count.
  bool keeps_edge(std::uint32_t e, BlockId from) const {
    if (!edge_is_interior(e) || rules_.interior_pointers) return true;
    const BlockId to = edge_target(e);
    bool kept = false;
    MemoryCursor memory(g_.image());
    g_.for_each_block_pointer(memory, from, [&](Address, std::uint64_t word, BlockId target) {
      kept = kept || (target == to && keeps(word, to, false));
    });
    return kept;
  }

 private:
  const ReferenceGraph& g_;
  const HeapModel& heap_;
  const CollectorRules& rules_;
};

}  // namespace

std::vector<std::uint8_t> collector_keeps(const ReferenceGraph& g, const HeapModel& heap) {
  if (!heap.collector) return {};
  PhaseTimer timer("reachability: the collector's rules");
  const CollectorRulesOnGraph rules(g, heap);
  std::vector<std::uint8_t> kept(g.block_count(), 0);
  std::vector<BlockId> pending;
  // The collector's roots word by word: a thread's stack from its stack pointer (the red zone below it,
  // which the scan of malloc's roots reads, is not the collector's), any pointer into an object from a
  // stack or registers.
  const std::vector<RootRange>& ranges = g.roots().ranges;
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const RootRange& root = ranges[r];
    if (!root.collector_root) continue;
    const bool anywhere = root.kind == RootKind::stack || root.kind == RootKind::registers;
    g.for_each_root_pointer(r, [&](Address at, std::uint64_t word, BlockId target) {
      if (root.kind == RootKind::stack && at < root.anchor) return;
      if (rules.in_heap(target) && rules.keeps(word, target, anywhere)) add_flood_start(pending, kept, target, 1);
    });
  }
  // Uncollectable objects: kept, and scanned, whatever reaches them.
  const std::vector<BlockId> uncollectable =
      collect_in_slices<BlockId>(g.block_count(), kBlocksPerWorker, [&](std::size_t b, auto& out) {
        if (heap.blocks[b].uncollectable && rules.in_heap(static_cast<BlockId>(b))) out.push_back(static_cast<BlockId>(b));
      });
  for (const BlockId b : uncollectable) add_flood_start(pending, kept, b, 1);
  parallel_flood(std::move(pending), kept, 1, worker_count(g.block_count(), std::size_t{1} << 16),
                 [&](BlockId b) { return g.out_edges(b); },
                 [&](const std::uint32_t& e, unsigned, BlockId from) {
                   return rules.in_heap(edge_target(e)) && rules.keeps_edge(e, from);
                 });
  return kept;
}

}  // namespace heapscope
