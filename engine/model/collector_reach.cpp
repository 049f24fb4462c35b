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
  CollectorRulesOnGraph(const ReferenceGraph& g, const HeapModel& heap, unsigned workers)
      : g_(g), heap_(heap), rules_(*heap.collector), read_(workers) {}

  bool in_heap(BlockId b) const { return in_collectors_heap(heap_, heap_.blocks[b]); }

  // Whether `word`, pointing into `target`, keeps it: a pointer to its start does; one into its interior
  // when the collector takes any (or the word lies in a thread's stack or registers: `anywhere`), else at
  // a registered displacement.
  bool keeps(std::uint64_t word, BlockId target, bool anywhere) const {
    const Address start = heap_.blocks[target].address();
    if (word == start || rules_.interior_pointers || anywhere) return true;
    const std::vector<std::uint16_t>& valid = rules_.valid_offsets;
    return !valid.empty() && word - start <= valid.back() &&
           std::binary_search(valid.begin(), valid.end(), static_cast<std::uint16_t>(word - start));
  }

  // Whether a word of block `from` that makes edge `e` keeps its target, on worker `w`. When only
  // registered displacements count, an interior edge's words are read again: all of `from`'s at once, the
  // targets they keep remembered for its next edges (the flood takes a block's edges one after another).
  bool keeps_edge(std::uint32_t e, BlockId from, unsigned w) {
    if (!edge_is_interior(e) || rules_.interior_pointers) return true;
    Read& read = read_[w];
    if (read.from != from) {
      read.from = from;
      read.kept.clear();
      MemoryCursor memory(g_.image());
      g_.for_each_block_pointer(memory, from, [&](Address, std::uint64_t word, BlockId target) {
        if (keeps(word, target, false)) read.kept.push_back(target);
      });
      std::sort(read.kept.begin(), read.kept.end());
    }
    return std::binary_search(read.kept.begin(), read.kept.end(), edge_target(e));
  }

 private:
  // A worker's last block whose words were read, and the blocks they keep.
  struct Read {
    BlockId from = kNoBlock;
    std::vector<BlockId> kept;
  };

  const ReferenceGraph& g_;
  const HeapModel& heap_;
  const CollectorRules& rules_;
  std::vector<Read> read_;
};

}  // namespace

std::vector<std::uint8_t> collector_keeps(const ReferenceGraph& g, const HeapModel& heap) {
  if (!heap.collector) return {};
  PhaseTimer timer("reachability: the collector's rules");
  const unsigned workers = worker_count(g.block_count(), std::size_t{1} << 16);
  CollectorRulesOnGraph rules(g, heap, workers);
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
  parallel_flood(std::move(pending), kept, 1, workers, [&](BlockId b) { return g.out_edges(b); },
                 [&](const std::uint32_t& e, unsigned w, BlockId from) {
                   return rules.in_heap(edge_target(e)) && rules.keeps_edge(e, from, w);
                 });
  return kept;
}

}  // namespace heapscope
