#include "model/leak_verdicts.h"

#include <algorithm>
#include <atomic>

#include "base/bit_array.h"
#include "base/bounded_scan.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"
#include "model/parallel_flood.h"

namespace heapscope {

namespace {

// What reach() marks a block: reached by a chain of pointers to blocks' first bytes (valgrind's
// "definitely reachable"), or only by chains through a pointer into some block's interior ("possibly").
constexpr std::uint8_t kFirmly = 1, kPossibly = 2;
// How many blocks must share a length-prefixed offset before it counts as the program's idiom.
constexpr std::size_t kLengthPrefixedQuorum = 8;

// `ids` (block ids below `block_count`) in ascending order, each once. A long list is ordered through a bit
// per block, in time linear in both: the idioms' round orders 1.5 M blocks twice on redis' heap, where
// std::sort took 80 ms each time.
std::vector<BlockId> ascending_once(std::vector<BlockId> ids, std::size_t block_count) {
  if (ids.size() < block_count / 64) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  }
  BitArray bits(block_count);
  for (const BlockId b : ids) bits.set(b);
  ids.clear();
  bits.for_each_set([&](std::size_t b) { ids.push_back(static_cast<BlockId>(b)); });
  return ids;
}

// The interior pointers an idiom explains (interior_idioms.h), found among those a flood met: the blocks
// they lead to count as firmly reached, and keep which idiom held them.
class IdiomReach {
 public:
  IdiomReach(const ReferenceGraph& g, IdiomSet idioms, std::vector<std::uint8_t>& marks)
      : g_(g), check_(g.image(), idioms), marks_(marks) {}

  // The blocks that the pointers from `sources` (blocks, or with `roots` also the root ranges) into
  // unreached blocks now hold through an idiom, marked kFirmly: the next flood's starts.
  std::vector<BlockId> resolve(std::vector<BlockId> sources, bool roots) {
    sources = ascending_once(std::move(sources), g_.block_count());
    const unsigned slices = worker_count(sources.size(), std::size_t{1} << 14);
    std::vector<std::vector<Found>> found(slices);
    run_workers(slices, [&](unsigned w) {
      MemoryCursor memory(g_.image());
      const auto [first, last] = slice_of(sources.size(), slices, w);
      for (std::size_t i = first; i < last; ++i) {
        if (((i - first) & kCheckMask) == 0) progress_check();
        g_.for_each_block_pointer(memory, sources[i], [&](Address, std::uint64_t word, BlockId t) { look_at(word, t, found[w]); });
      }
    });
    if (roots)
      for (std::size_t r = 0; r < g_.root_count(); ++r) {
        const auto edges = g_.root_edges(r);
        if (std::any_of(edges.begin(), edges.end(), edge_is_interior))
          g_.for_each_root_pointer(r, [&](Address, std::uint64_t word, BlockId t) { look_at(word, t, found[0]); });
      }
    // What was found, a block and an idiom per pointer (millions on redis' heap, where every string is
    // pointed into), is let go part by part as it is read, and the blocks held are counted first: the
    // two are never both whole in memory with room to spare.
    sources = {};
    std::size_t found_count = 0;
    for (const std::vector<Found>& part : found) found_count += part.size();
    std::vector<BlockId> held;
    held.reserve(found_count);
    for (std::vector<Found>& part : found) {
      for (const Found& f : part) {
        if (held_idiom(f.held) != Idiom::length_prefixed) accept(f.block, f.held, held);
        else prefixed_[held_offset(f.held)].push_back(f.block);
      }
      part = {};
    }
    // A length-prefixed offset counts once enough distinct blocks share it; then every block met at it does.
    for (std::uint32_t offset = 1; offset <= kMaxPrefixBytes; ++offset) {
      std::vector<BlockId>& blocks = prefixed_[offset];
      blocks = ascending_once(std::move(blocks), g_.block_count());
      if (blocks.size() < kLengthPrefixedQuorum) continue;
      for (const BlockId b : blocks) accept(b, held_by(Idiom::length_prefixed, offset), held);
      blocks.clear();
    }
    return held;
  }

  std::vector<HeldBy> take_held() { return std::move(held_); }

 private:
  struct Found {
    BlockId block;
    HeldBy held;
  };

  void look_at(std::uint64_t word, BlockId t, std::vector<Found>& out) const {
    if (std::atomic_ref<std::uint8_t>(marks_[t]).load(std::memory_order_relaxed) || !g_.points_inside(t, word)) return;
    const Block& block = g_.index().blocks()[t];
    const Idiom idiom = check_.classify(block, word);
    if (idiom != Idiom::none) out.push_back({t, held_by(idiom, static_cast<std::uint32_t>(word - block.address()))});
  }

  void accept(BlockId b, HeldBy h, std::vector<BlockId>& held) {
    if (marks_[b]) return;
    if (held_.empty()) held_.assign(g_.block_count(), 0);
    marks_[b] = kFirmly;
    held_[b] = h;
    held.push_back(b);
  }

  const ReferenceGraph& g_;
  IdiomCheck check_;
  std::vector<std::uint8_t>& marks_;
  std::vector<HeldBy> held_;
  std::vector<BlockId> prefixed_[kMaxPrefixBytes + 1];  // length-prefixed candidates by offset, not yet enough
};

// A block an idiom held that a start pointer from a reached block or a root reaches too is held by that
// pointer, as memcheck counts it ("reachable via heuristic" only where no such pointer is).
void keep_held_by_idioms_alone(const ReferenceGraph& g, const std::vector<std::uint8_t>& marks, std::vector<HeldBy>& held) {
  const auto release = [&](std::uint32_t e) {
    if (!edge_is_interior(e)) std::atomic_ref<HeldBy>(held[edge_target(e)]).store(0, std::memory_order_relaxed);
  };
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (const std::uint32_t e : g.root_edges(r)) release(e);
  const unsigned slices = worker_count(g.block_count(), kBlocksPerWorker);
  run_workers(slices, [&](unsigned w) {
    const auto [first, last] = slice_of(g.block_count(), slices, w);
    for (std::size_t b = first; b < last; ++b)
      if (marks[b])
        for (const std::uint32_t e : g.out_edges(static_cast<BlockId>(b))) release(e);
  });
  if (std::none_of(held.begin(), held.end(), [](HeldBy h) { return h != 0; })) held = {};
}

// Marks every block some root reaches, kFirmly or kPossibly (0: none), and fills `held` for the blocks an
// idiom holds. One traversal on all cores: along start pointers alone, noting the blocks with an interior
// pointer to a block not marked yet; then along the interior pointers of those an idiom explains, as start
// pointers, for as long as that finds more; then from every interior pointer of a firmly reached block,
// along every pointer, over what is still unmarked.
std::vector<std::uint8_t> reach(const ReferenceGraph& g, IdiomSet idioms, std::vector<HeldBy>& held) {
  std::vector<std::uint8_t> marks(g.block_count(), 0);
  const unsigned workers = worker_count(g.block_count(), std::size_t{1} << 16);
  // Per worker, each round: the blocks it flooded that point inside a block not marked then, once each (a
  // block's edges come together). The blocks alone, not the pointers: the idioms read the sources' words
  // anyway, and the pointers are found again at the end. redis' heap has one per string (1.5 M).
  std::vector<std::vector<BlockId>> pointing_inside(workers);
  std::vector<BlockId> interior_from_roots;
  std::vector<BlockId> pending;
  for (std::size_t r = 0; r < g.root_count(); ++r)
    for (std::uint32_t e : g.root_edges(r)) {
      if (edge_is_interior(e)) interior_from_roots.push_back(edge_target(e));
      else add_flood_start(pending, marks, edge_target(e), kFirmly);
    }
  auto out_edges = [&](BlockId b) { return g.out_edges(b); };
  IdiomReach idiom_reach(g, idioms, marks);
  for (bool first_round = true;; first_round = false) {
    parallel_flood(std::move(pending), marks, kFirmly, workers, out_edges, [&](std::uint32_t e, unsigned w, BlockId from) {
      if (!edge_is_interior(e)) return true;
      std::vector<BlockId>& sources = pointing_inside[w];
      if (sources.empty() || sources.back() != from) sources.push_back(from);
      return false;
    });
    if (idioms == kNoIdioms) break;
    PhaseTimer timer("reachability: idioms");
    std::vector<BlockId> sources;
    for (std::vector<BlockId>& part : pointing_inside) {
      sources.insert(sources.end(), part.begin(), part.end());
      part = {};
    }
    pending = idiom_reach.resolve(std::move(sources), first_round);
    if (pending.empty()) break;
  }
  pointing_inside = {};
  held = idiom_reach.take_held();
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
  std::vector<std::uint8_t> marks = reach(g, idioms, held_by);
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
