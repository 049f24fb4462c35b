#include "runtime/glibc/glibc_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <unordered_set>

#include "runtime/glibc/chunk_walk.h"
#include "runtime/glibc/sliced_walk.h"
#include "runtime/glibc/free_lists.h"
#include "runtime/glibc/glibc_runtime.h"
#include "runtime/glibc/mmapped_chunks.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope::glibc {

namespace {

// One contiguous piece of an arena to walk: in slices walked at once when it is big (sliced_walk.h).
struct SegmentJob {
  std::uint16_t arena = 0;
  HeapSegment range;
  Address first_chunk = 0;
  Address top = 0;                // when the arena's top chunk is in this segment
  std::vector<SliceWalk> slices;  // each with its part of the model's block array
  SegmentWalk result;             // the slices joined
};

Address align16(Address a) { return (a + 15) & ~Address{15}; }

// The sbrk heap of main_arena: from mp_.sbrk_base (or the start of the mapping that holds top) to the
// end of the top chunk.
void plan_main_arena(const Image& image, const Runtime& rt, Address top, std::uint16_t index,
                     std::vector<SegmentJob>& jobs, ArenaInfo& arena, std::vector<std::string>& warnings) {
  // With glibc.malloc.hugetlb, or when sbrk fails, main_arena takes memory with mmap instead
  // ("non-contiguous"); it still starts at sbrk_base and ends at top while it has one region.
  if (top == rt.layout.initial_top(rt.main_arena)) return;  // never used: nothing to walk
  const auto top_size = image.read_u64(top + 8);
  const MemoryRegion* region = image.region_at(top);
  if (!top_size || !region) {
    warnings.push_back(fmt::format("main arena: top chunk 0x{:x} is not in the image; its heap is skipped", top));
    arena.complete = false;
    return;
  }
  Address start = rt.params && rt.params->sbrk_base ? rt.params->sbrk_base : region->start;
  Address end = top + (*top_size & ~kFlagMask);
  if (start > top) start = region->start;
  if (end > region->end || end < top) {
    // A damaged top size: walk to the end of top's mapping, where the walk reports the damage, rather than
    // sizing the walk's buffers by a garbage number.
    warnings.push_back(fmt::format("main arena: top chunk 0x{:x} has size field 0x{:x}, past the end of its "
                                   "mapping 0x{:x}", top, *top_size, region->end));
    end = region->end;
  }
  SegmentJob job;
  job.arena = index;
  job.range = {start, end};
  job.first_chunk = align16(start);
  job.top = top;
  jobs.push_back(job);
  arena.overhead_bytes += job.first_chunk - start;
}

// A non-main arena's heaps: the newest holds top; heap_info.prev links back to the first, which holds the
// arena itself.
void plan_heap_arena(const Image& image, const Runtime& rt, Address arena_addr, Address top, std::uint16_t index,
                     std::vector<SegmentJob>& jobs, ArenaInfo& arena, std::vector<std::string>& warnings) {
  const std::uint64_t align = rt.heap_alignment();
  Address heap = top & ~(align - 1);
  std::unordered_set<Address> seen;
  while (heap != 0) {
    const auto ar_ptr = image.read_u64(heap);
    const auto prev = image.read_u64(heap + 8);
    const auto size = image.read_u64(heap + 16);
    if (!ar_ptr || !prev || !size || *ar_ptr != arena_addr || *size > align || !seen.insert(heap).second) {
      warnings.push_back(fmt::format("arena 0x{:x}: heap_info at 0x{:x} is unreadable or does not belong to "
                                     "it; its remaining heaps are skipped", arena_addr, heap));
      arena.complete = false;
      return;
    }
    SegmentJob job;
    job.arena = index;
    job.range = {heap, heap + *size};
    const bool first_heap = arena_addr == heap + rt.layout.heap_info_size;
    job.first_chunk = first_heap ? align16(arena_addr + rt.layout.arena.size) : heap + rt.layout.heap_info_size;
    job.top = (top >= heap && top < heap + *size) ? top : 0;
    arena.overhead_bytes += job.first_chunk - heap;
    jobs.push_back(job);
    heap = *prev;
  }
}

// Cuts each segment into the slices its walk takes (one unless it is big and there are cores to share).
void slice_segments(std::vector<SegmentJob>& jobs) {
  const unsigned cores = worker_count(~std::size_t{0} >> 1, 1);
  for (SegmentJob& j : jobs)
    for (const HeapSlice& slice : slices_of(j.first_chunk, j.range.end, cores)) j.slices.push_back({slice, {}, {}, 0});
}

// Every slice of every segment on the pool; then each segment's slices joined, in order. Progress counts
// the segments' bytes; an interrupt (or any failure) in one worker is rethrown here once every worker has
// stopped.
void run_in_parallel(std::vector<SegmentJob>& jobs, const Image& image) {
  std::uint64_t total = 0;
  struct Work {
    SegmentJob* job;
    std::size_t slice;
  };
  std::vector<Work> work;
  for (SegmentJob& j : jobs) {
    total += j.range.end - j.first_chunk;
    for (std::size_t s = 0; s < j.slices.size(); ++s) work.push_back({&j, s});
  }
  progress_total(total);
  std::atomic<std::size_t> next{0};
  run_workers(worker_count(work.size(), 1), [&](unsigned) {
    MemoryCursor mem(image);
    for (std::size_t i = next++; i < work.size(); i = next++) {
      SegmentJob& j = *work[i].job;
      walk_slice(mem, j.slices[work[i].slice], work[i].slice, j.range.end, j.top, j.arena);
    }
  });
  MemoryCursor mem(image);
  for (SegmentJob& j : jobs) {
    std::vector<SliceWalk*> slices;
    for (SliceWalk& s : j.slices) slices.push_back(&s);
    j.result = join_slices(mem, slices, j.range.end, j.top, j.arena);
  }
}

// List entries that lie in the part of a heap its walk skipped after damage: consequences of that one
// damage, counted under it rather than warned about one by one.
class SkippedEntries {
 public:
  explicit SkippedEntries(const HeapModel& model) {
    for (const ArenaInfo& a : model.arenas)
      for (const WalkStop& stop : a.walk_stops)
        for (const HeapSegment& seg : a.heaps)
          if (seg.start == stop.heap) stops_.push_back({stop.chunk, seg.end, {}, {}});
  }

  // True when the chunk lies past a damaged chunk in its heap; it is then counted.
  bool take(Address chunk, const char* list) {
    for (Stop& s : stops_) {
      if (chunk < s.damage || chunk >= s.heap_end) continue;
      ++s.entries[list];
      if (s.examples.size() < 3) s.examples.push_back(chunk + 16);
      return true;
    }
    return false;
  }

  void warn(std::vector<std::string>& warnings) const {
    for (const Stop& s : stops_) {
      if (s.entries.empty()) continue;
      std::string counts, examples;
      std::uint64_t total = 0;
      for (const auto& [list, n] : s.entries) {
        counts += fmt::format("{}{} {} entr{}", counts.empty() ? "" : " and ", n, list, n == 1 ? "y" : "ies");
        total += n;
      }
      for (Address e : s.examples) examples += fmt::format("{}0x{:x}", examples.empty() ? "" : " ", e);
      warnings.push_back(fmt::format("because of the heap damage at chunk 0x{:x}: {} lie in the part of its heap that "
                                     "was skipped, so {} not shown as free (e.g. {})",
                                     s.damage, counts, total == 1 ? "it is" : "they are", examples));
    }
  }

 private:
  struct Stop {
    Address damage = 0, heap_end = 0;
    std::map<std::string, std::uint64_t> entries;  // by list name
    std::vector<Address> examples;
  };
  std::vector<Stop> stops_;
};

// Tcache and fastbin chunks look in use to the chunk walk (their successor's PREV_INUSE stays set).
void mark_cached(HeapModel& model, const std::vector<Address>& chunks, BlockState state, const char* list,
                 SkippedEntries& skipped) {
  for (Address c : chunks) {
    auto it = std::lower_bound(model.blocks.begin(), model.blocks.end(), c,
                               [](const Block& b, Address a) { return b.chunk < a; });
    if (it == model.blocks.end() || it->chunk != c) {
      if (!skipped.take(c, list))
        model.warnings.push_back(fmt::format("{} entry 0x{:x} is not a chunk of any walked heap", list, c + 16));
      continue;
    }
    if (it->state != BlockState::in_use) {
      model.warnings.push_back(fmt::format("{} entry 0x{:x} is listed twice or is also free in a bin "
                                           "(double free or corruption?)", list, c + 16));
      continue;
    }
    StateTotals& totals = model.arenas[it->arena].totals;  // the walk counted it in use
    totals[static_cast<int>(BlockState::in_use)].remove(it->chunk_size());
    totals[static_cast<int>(state)].add(it->chunk_size());
    it->state = state;
  }
}

void collect_free_lists(const Image& image, const Runtime& rt, HeapModel& model) {
  SkippedEntries skipped(model);
  if (rt.tcache_tp_offset) {
    for (const ThreadState& t : image.threads()) {
      if (t.fs_base() == 0) continue;
      const auto tcache = image.read_u64(t.fs_base() + static_cast<std::uint64_t>(*rt.tcache_tp_offset));
      if (!tcache || *tcache == 0) continue;
      FreeListMembers m = tcache_members(image, rt.layout, *tcache, t.tid);
      mark_cached(model, m.chunks, BlockState::tcache, "tcache", skipped);
      model.warnings.insert(model.warnings.end(), m.warnings.begin(), m.warnings.end());
    }
  }
  for (const ArenaInfo& a : model.arenas) {
    FreeListMembers m = fastbin_members(image, rt.layout, a.address, model.blocks.size());
    mark_cached(model, m.chunks, BlockState::fastbin, "fastbin", skipped);
    model.warnings.insert(model.warnings.end(), m.warnings.begin(), m.warnings.end());
  }
  skipped.warn(model.warnings);
}

std::vector<HeapSegment> thread_stacks(const Image& image) {
  std::vector<HeapSegment> out;
  for (const ThreadState& t : image.threads())
    if (const MemoryRegion* r = image.region_at(t.sp())) out.push_back({r->start, r->end});
  return out;
}

void add_mmapped_chunks(const Image& image, const Runtime& rt, std::vector<SegmentJob>& jobs, HeapModel& model,
                        std::vector<Block>& mmapped) {
  std::vector<HeapSegment> exclude = thread_stacks(image);
  for (const SegmentJob& j : jobs) {
    // A non-main arena's heap reserves its whole aligned stretch (HEAP_MAX_SIZE) and uses the start of it:
    // no mapping of another chunk lies in the rest, which a core may still hold (gdb writes the
    // reservation out: tens of MB of pages that would each be faulted in to be looked at).
    const bool reservation = !model.arenas[j.arena].is_main && (j.range.start & (rt.heap_alignment() - 1)) == 0;
    exclude.push_back(reservation ? HeapSegment{j.range.start, j.range.start + rt.heap_alignment()} : j.range);
  }
  std::sort(exclude.begin(), exclude.end(), [](auto& a, auto& b) { return a.start < b.start; });
  MemoryCursor mem(image);
  MmappedChunks found = find_mmapped_chunks(mem, exclude);
  model.mmapped_total.blocks = found.blocks.size();
  model.mmapped_total.bytes = found.mapped_bytes;
  for (const Block& b : found.blocks) model.mmapped_chunks.add(b.chunk_size());
  model.discovery.push_back({"mmapped chunks", 0, "scan"});
  // A chunk the scan missed (its mapping split or partly unmapped and the pieces not all in the image, its
  // header page unreadable) is scanned as anonymous memory: blocks only it points to look reachable, and
  // it is in no leak report. Say so, and let the analyses mark their results partial.
  if (rt.params && (rt.params->n_mmaps != static_cast<int>(found.blocks.size()) ||
                    rt.params->mmapped_mem != found.mapped_bytes)) {
    model.complete = false;
    model.warnings.push_back(fmt::format(
        "mmapped chunks: found {} ({} bytes) but mp_ counts {} ({} bytes): a chunk whose mapping was changed "
        "(mprotect or munmap of part of it, its pages left out of the image) was not recognised; its memory "
        "is scanned as anonymous memory, so it and the blocks only it holds are missing from leak reports",
        found.blocks.size(), found.mapped_bytes, rt.params->n_mmaps, rt.params->mmapped_mem));
  }
  mmapped = std::move(found.blocks);
}

// Every heap segment and mmapped block gets a slice of one block array, in address order, sized for
// its worst case; the walkers fill their slices in parallel and compact() closes the gaps. No block is
// copied between buffers, and untouched slack never becomes resident.
struct Piece {
  Address start = 0;
  SliceWalk* slice = nullptr;  // or a single mmapped block
  Block mmapped;
  std::size_t capacity = 1;
};

BlockArray lay_out_blocks(std::vector<SegmentJob>& jobs, const std::vector<Block>& mmapped,
                          std::vector<Piece>& pieces) {
  for (SegmentJob& j : jobs)
    for (std::size_t s = 0; s < j.slices.size(); ++s) {
      SliceWalk& slice = j.slices[s];
      const Address end = slice.slice.limit ? slice.slice.limit : j.range.end;
      pieces.push_back({s == 0 ? j.range.start : slice.slice.start, &slice, Block{}, max_chunks(slice.slice.start, end)});
    }
  for (const Block& b : mmapped) pieces.push_back({b.chunk, nullptr, b, 1});
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
  std::size_t total = 0;
  for (const Piece& p : pieces) total += p.capacity;
  BlockArray blocks(total);
  std::size_t offset = 0;
  for (Piece& p : pieces) {
    if (p.slice)
      p.slice->sink = {blocks.data() + offset, p.capacity, 0};
    else
      blocks.data()[offset] = p.mmapped;
    offset += p.capacity;
  }
  return blocks;
}

void compact_blocks(const std::vector<Piece>& pieces, BlockArray& blocks) {
  std::vector<BlockArray::Slice> slices;
  std::size_t offset = 0;
  for (const Piece& p : pieces) {
    slices.push_back(p.slice ? BlockArray::Slice{offset + p.slice->skip, p.slice->sink.count - p.slice->skip}
                             : BlockArray::Slice{offset, 1});
    offset += p.capacity;
  }
  blocks.compact(slices);
}

// The arenas' totals by state are the walks' (and the free lists' moves); here, mallinfo2's figures and the
// checks of the walk against the arenas' own counts (`in_bins`: each arena's chunks on its bins, counted
// beside the walk).
void compute_mallinfo(const Image& image, const Runtime& rt, std::span<const std::optional<std::uint64_t>> in_bins,
                      HeapModel& model) {
  MallInfo& mi = model.mallinfo.emplace();
  for (std::size_t i = 0; i < model.arenas.size(); ++i) {
    ArenaInfo& a = model.arenas[i];
    const auto& t = a.totals;
    const auto bytes = [&](BlockState s) { return t[static_cast<int>(s)].bytes; };
    const std::uint64_t avail = bytes(BlockState::free) + bytes(BlockState::fastbin) + bytes(BlockState::top);
    mi.arena += a.system_bytes;
    mi.ordblks += 1 + t[static_cast<int>(BlockState::free)].blocks;
    mi.smblks += t[static_cast<int>(BlockState::fastbin)].blocks;
    mi.fsmblks += bytes(BlockState::fastbin);
    mi.fordblks += avail;
    mi.uordblks += a.system_bytes - avail;
    if (a.is_main) mi.keepcost = bytes(BlockState::top);
    std::uint64_t walked = a.overhead_bytes;
    for (const StateTotal& st : t) walked += st.bytes;
    if (walked != a.system_bytes && a.complete) {
      const auto flags = image.read_u32(a.address + rt.layout.arena.flags);
      const bool noncontiguous = a.is_main && flags && (*flags & MallocStateLayout::kNonContiguousBit);
      model.warnings.push_back(fmt::format(
          "arena 0x{:x}: the walk accounts for {} bytes but the arena has {} from the system{}", a.address, walked,
          a.system_bytes, noncontiguous ? " (it is non-contiguous: regions before its current one are not walked)" : ""));
    }
    // A count past the heap's blocks (finished before the walk gave its bound) is a damaged list's.
    const std::optional<std::uint64_t> on_bins =
        in_bins[i] && *in_bins[i] <= model.blocks.size() ? in_bins[i] : std::nullopt;
    if (on_bins && *on_bins != t[static_cast<int>(BlockState::free)].blocks)
      model.warnings.push_back(fmt::format("arena 0x{:x}: {} chunks are on its bins but the walk found {} free{}",
                                           a.address, *on_bins, t[static_cast<int>(BlockState::free)].blocks,
                                           a.walk_stops.empty() ? ""
                                                                : fmt::format(" (because of the heap damage at chunk "
                                                                              "0x{:x}: the rest of its heap was skipped)",
                                                                              a.walk_stops.front().chunk)));
  }
  mi.hblks = model.mmapped_total.blocks;
  mi.hblkhd = model.mmapped_total.bytes;
}

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& runtime) {
  HeapModel model;
  model.allocator = "glibc";
  model.version = runtime.layout.minor ? runtime.layout.name() : "";
  model.discovery = runtime.discovery;
  model.warnings = runtime.warnings;
  model.metadata.push_back({runtime.main_arena, runtime.main_arena + runtime.layout.arena.size});
  if (runtime.params) model.trim = TrimSettings{runtime.params->trim_threshold, runtime.params->top_pad};
  if (runtime.params)
    model.metadata.push_back({runtime.params->address, runtime.params->address + runtime.layout.par.sbrk_base +
                                                       runtime.layout.par.tcache_count_from_sbrk + 16});

  std::vector<SegmentJob> jobs;
  bool ring_closed = false;
  const std::vector<Address> ring =
      arena_ring(image, runtime.layout, runtime.main_arena, &model.warnings, 4096, &ring_closed);
  if (!ring_closed) model.complete = false;  // arenas past the break are not walked
  for (Address a : ring) {
    const auto index = static_cast<std::uint16_t>(model.arenas.size());
    ArenaInfo info;
    info.address = a;
    info.is_main = a == runtime.main_arena;
    info.system_bytes = image.read_u64(a + runtime.layout.arena.system_mem).value_or(0);
    const auto top = image.read_u64(a + runtime.layout.arena.top);
    if (!top) {
      model.warnings.push_back(fmt::format("arena 0x{:x} cannot be read; skipped", a));
      model.complete = false;
      continue;
    }
    if (info.is_main)
      plan_main_arena(image, runtime, *top, index, jobs, info, model.warnings);
    else {
      plan_heap_arena(image, runtime, a, *top, index, jobs, info, model.warnings);
      model.discovery.push_back({"arena", a, "arena-ring"});
    }
    model.arenas.push_back(std::move(info));
  }

  // Each arena's count of the chunks on its bins, a check of the walk (compute_mallinfo), is a pointer chase,
  // a cache miss a chunk: a tenth of `leaks` on the mixed heap, whose main arena's unsorted bin holds
  // millions. So it runs on a thread of its own beside the walk, bounded by the heap's block count (a
  // damaged list may be cyclic) once the walk knows it, and by nothing until then but the walk's end.
  std::vector<Address> arenas;
  for (const ArenaInfo& a : model.arenas) arenas.push_back(a.address);
  std::vector<std::optional<std::uint64_t>> in_bins(arenas.size());
  std::atomic<std::size_t> bins_bound{std::numeric_limits<std::size_t>::max()};
  run_workers(2, [&](unsigned worker) {
    if (worker == 1) {
      PhaseTimer t("walk: bin counts");
      for (std::size_t i = 0; i < arenas.size(); ++i)
        in_bins[i] = regular_bin_count(image, runtime.layout, arenas[i], bins_bound);
      return;
    }
    try {
      std::vector<Block> mmapped;
      {
        PhaseTimer t("walk: mmapped chunks");
        add_mmapped_chunks(image, runtime, jobs, model, mmapped);
      }
      slice_segments(jobs);
      std::vector<Piece> pieces;
      BlockArray blocks = lay_out_blocks(jobs, mmapped, pieces);
      {
        PhaseTimer t("walk: chunks");
        run_in_parallel(jobs, image);
      }
      {
        PhaseTimer t("walk: compact");
        compact_blocks(pieces, blocks);
        model.blocks = std::move(blocks);
      }
    } catch (...) {
      bins_bound = 0;  // the count stops too
      throw;
    }
    bins_bound = model.blocks.size();
  });
  for (SegmentJob& j : jobs) {
    ArenaInfo& arena = model.arenas[j.arena];
    arena.heaps.push_back(j.range);
    arena.overhead_bytes += j.result.overhead_bytes;
    add_totals(arena.totals, j.result.totals);
    if (!j.result.reached_end) arena.complete = false;
    if (j.result.stopped_at) arena.walk_stops.push_back({j.range.start, j.result.stopped_at, j.result.last_good});
    model.warnings.insert(model.warnings.end(), j.result.warnings.begin(), j.result.warnings.end());
  }
  for (ArenaInfo& a : model.arenas) {
    std::sort(a.heaps.begin(), a.heaps.end(), [](auto& x, auto& y) { return x.start < y.start; });
    model.complete = model.complete && a.complete;
  }

  {
    PhaseTimer t("walk: free lists, totals");
    collect_free_lists(image, runtime, model);
    compute_mallinfo(image, runtime, in_bins, model);
  }
  return model;
}

}  // namespace heapscope::glibc
