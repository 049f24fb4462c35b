#include "runtime/cpython/pymalloc_heap.h"

#include <fmt/format.h>

#include <cstddef>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/cpython/cpython_frames.h"
#include "runtime/cpython/cpython_layout.h"
#include "runtime/cpython/cpython_roots.h"

namespace heapscope::pymalloc {

namespace {

constexpr std::uint64_t kHeaderBytes = 48;      // POOL_OVERHEAD: the header rounded up to 16
constexpr std::uint32_t kSizeClasses = 32;      // 512 bytes in steps of 16
constexpr std::uint64_t kPageBytes = 4096;      // the smaller pool size, and the scan's step
constexpr std::uint32_t kMaxArenaIndex = 1u << 24;
constexpr std::size_t kMaxFindingsListed = 64;

std::string hex(Address a) { return fmt::format("{:#x}", a); }

struct RawHeader {
  std::uint64_t count_word, freeblock, nextpool, prevpool;
  std::uint32_t arenaindex, szidx, nextoffset, maxnextoffset;
};
static_assert(sizeof(RawHeader) == kHeaderBytes);

std::uint64_t capacity(const Pool& p) { return (p.pool_bytes - kHeaderBytes) / p.slot_bytes(); }
std::uint64_t carved(const Pool& p) { return (p.next_offset - kHeaderBytes) / p.slot_bytes(); }

// The pool whose header is at `at`, when the header is one: a size class, offsets that fit it and a pool
// of 4 or 16 KiB aligned to its size, a count within the carved slots, a free list starting at a carved
// slot. A partly used pool is on its class's used list: its neighbours point back to it.
std::optional<Pool> pool_at(const Image& image, Address at) {
  RawHeader h;
  if (!image.read_exact(at, &h, sizeof h)) return std::nullopt;
  if (h.szidx >= kSizeClasses || h.arenaindex >= kMaxArenaIndex) return std::nullopt;
  Pool p;
  p.address = at;
  p.size_class = h.szidx;
  const std::uint64_t slot = p.slot_bytes();
  const std::uint64_t pool_bytes = std::uint64_t{h.maxnextoffset} + slot;
  if ((pool_bytes != 4096 && pool_bytes != 16384) || at % pool_bytes != 0) return std::nullopt;
  p.pool_bytes = static_cast<std::uint32_t>(pool_bytes);
  if (h.nextoffset < kHeaderBytes + 2 * slot || h.nextoffset > pool_bytes || (h.nextoffset - kHeaderBytes) % slot)
    return std::nullopt;
  p.next_offset = h.nextoffset;
  p.count = static_cast<std::uint32_t>(h.count_word);
  if (p.count > carved(p)) return std::nullopt;
  if (h.freeblock != 0 && (h.freeblock < at + kHeaderBytes || h.freeblock >= at + h.nextoffset ||
                           (h.freeblock - at - kHeaderBytes) % slot))
    return std::nullopt;
  p.freeblock = h.freeblock;
  p.arena_index = h.arenaindex;
  if (p.count > 0 && p.count < capacity(p)) {
    const auto back = image.read_u64(h.nextpool + offsetof(RawHeader, prevpool));
    const auto forth = image.read_u64(h.prevpool + offsetof(RawHeader, nextpool));
    if (!back || *back != at || !forth || *forth != at) return std::nullopt;
  }
  return p;
}

// Anonymous writable memory: where pymalloc's arenas are mmap'ed.
bool may_hold_arenas(const MemoryRegion& r) {
  return r.readable && r.writable && r.backing_path.empty() && r.bytes_present;
}

class Walker {
 public:
  Walker(const Image& image, const Runtime& rt, HeapVerification* check) : image_(image), rt_(rt), check_(check) {}

  HeapModel run() {
    PhaseTimer timer("walk: pymalloc pools");
    model_.allocator = "pymalloc";
    model_.version = rt_.version.empty() ? "" : "CPython " + rt_.version;
    model_.state_labels = {"in use", "", "free", "", "", ""};
    model_.terms = {.arena = "arena", .heaps = "arenas", .slab = "pool", .cached = "cached",
                    .cached_meaning = "cached ones are free to their thread"};
    model_.discovery.push_back({"pools", rt_.pools.empty() ? 0 : rt_.pools.front().address,
                                fmt::format("scan of anonymous memory for pool headers, checked ({} pools)",
                                            rt_.pools.size())});
    arena_.address = rt_.pools.empty() ? 0 : rt_.pools.front().address;
    arena_.is_main = false;
    std::uint64_t header_counts = 0;
    for (std::size_t i = 0; i < rt_.pools.size(); ++i) {
      if ((i & 0xff) == 0) progress_check();
      const Pool& p = rt_.pools[i];
      header_counts += p.count;
      walk_pool(p);
      extend_segment(p);
    }
    arena_.heaps = segments_;
    for (const HeapSegment& s : segments_) arena_.system_bytes += s.end - s.start;
    for (const SizeClassUse& use : classes_)
      if (use.slabs) model_.size_classes.push_back(use);
    model_.figures.push_back({"pools' counts of blocks in use",
                              "the sum of every pool header's count (what sys.getallocatedblocks() adds up for "
                              "pymalloc's share); the walk's: carved slots not on their pool's free list",
                              header_counts, in_use_});
    model_.arenas.push_back(std::move(arena_));
    model_.not_roots = rt_.not_roots;
    model_.interpreter_frames = rt_.frames;
    if (check_)
      check_->checked_in_own_words.push_back(fmt::format(
          "pymalloc: {} pool{} in {} run{} of pools, {} slots, {} on free lists", rt_.pools.size(),
          rt_.pools.size() == 1 ? "" : "s", segments_.size(), segments_.size() == 1 ? "" : "s", slots_, listed_free_));
    return std::move(model_);
  }

 private:
  const Image& image_;
  const Runtime& rt_;
  HeapVerification* check_;
  HeapModel model_;
  ArenaInfo arena_;
  std::vector<HeapSegment> segments_;
  std::vector<SizeClassUse> classes_ = std::vector<SizeClassUse>(kSizeClasses);
  std::uint64_t in_use_ = 0, slots_ = 0, listed_free_ = 0;
  std::size_t damage_count_ = 0;

  void damage(const char* kind, Address where, std::string expected, std::string found, std::string affects) {
    model_.complete = false;
    arena_.complete = false;
    if (++damage_count_ <= 8)
      model_.warnings.push_back(fmt::format("pymalloc {} at {}: expected {}, found {}; {}", kind, hex(where), expected,
                                            found, affects));
    if (!check_) return;
    if (check_->findings.size() >= kMaxFindingsListed) {
      ++check_->findings_dropped;
      return;
    }
    check_->findings.push_back({.kind = kind, .chunk = where, .expected = std::move(expected),
                                .found = std::move(found), .where = "pool", .affects = std::move(affects)});
  }

  // Pools of one arena one after the other make one segment.
  void extend_segment(const Pool& p) {
    if (!segments_.empty() && segments_.back().end == p.address && last_arena_ == p.arena_index)
      segments_.back().end += p.pool_bytes;
    else
      segments_.push_back({p.address, p.address + p.pool_bytes});
    last_arena_ = p.arena_index;
  }
  std::uint32_t last_arena_ = 0;

  // The carved slots on the pool's free list, by index; nothing when the list is damaged (then the
  // header's count decides: the pool's slots are all in use or all free as it says, and a warning says so).
  std::optional<std::vector<bool>> free_slots(const Pool& p) {
    const std::uint64_t slot = p.slot_bytes(), n = carved(p);
    std::vector<bool> free(n, false);
    Address at = p.freeblock;
    for (std::uint64_t steps = 0; at != 0; ++steps) {
      const std::uint64_t offset = at - p.address - kHeaderBytes;
      if (at < p.address + kHeaderBytes || offset % slot || offset / slot >= n || free[offset / slot] || steps > n) {
        damage("free_list", p.address, "a list of the pool's carved slots, each once",
               fmt::format("{} after {} entries", hex(at), steps), "the pool's slots are taken as its count says");
        return std::nullopt;
      }
      free[offset / slot] = true;
      const auto next = image_.read_u64(at);
      if (!next) {
        damage("free_list", p.address, "a readable free slot", hex(at) + " unreadable",
               "the pool's slots are taken as its count says");
        return std::nullopt;
      }
      at = *next;
    }
    return free;
  }

  void walk_pool(const Pool& p) {
    const std::uint64_t slot = p.slot_bytes(), n = carved(p), cap = capacity(p);
    model_.metadata.push_back({p.address, p.address + kHeaderBytes});
    std::optional<std::vector<bool>> free = free_slots(p);
    std::uint64_t used = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const bool is_free = free ? (*free)[i] : p.count == 0;
      add(Block::bare(p.address + kHeaderBytes + i * slot, slot, is_free ? BlockState::free : BlockState::in_use, 0));
      used += !is_free;
    }
    if (free) listed_free_ += n - used;
    if (free && used != p.count)
      damage("pool_count", p.address, fmt::format("a count of {} (the carved slots not on the free list)", used),
             std::to_string(p.count), "the free list decides which slots are in use");
    if (n < cap) add(Block::bare(p.address + p.next_offset, (cap - n) * slot, BlockState::free, 0));
    arena_.overhead_bytes += kHeaderBytes + (p.pool_bytes - kHeaderBytes) % slot;
    slots_ += n;
    in_use_ += used;
    SizeClassUse& use = classes_[p.size_class];
    use.object_bytes = slot;
    ++use.slabs;
    use.slab_bytes += p.pool_bytes;
    use.in_use += used;
    use.free += cap - used;
  }

  void add(const Block& b) {
    model_.blocks.push_back(b);
    arena_.totals[static_cast<int>(b.state)].add(b.chunk_size());
  }
};

}  // namespace

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, std::string* why_not) {
  Runtime rt;
  rt.module = cpython::interpreter_module(image, symbols);
  if (!rt.module) {
    *why_not = "no module exports PyObject_Malloc (no CPython interpreter)";
    return std::nullopt;
  }
  const int minor = cpython::interpreter_release(image, symbols, *rt.module).value_or(cpython::InterpreterRelease{}).minor;
  if (minor) rt.version = fmt::format("3.{}", minor);
  {
    PhaseTimer timer("walk: locate pymalloc pools");
    for (const MemoryRegion& r : image.regions()) {
      if (!may_hold_arenas(r)) continue;
      for (Address at = (r.start + kPageBytes - 1) / kPageBytes * kPageBytes; at + kPageBytes <= r.end;) {
        if ((at & 0xffffff) == 0) progress_check();
        if (const std::optional<Pool> p = pool_at(image, at); p && at + p->pool_bytes <= r.end) {
          rt.pools.push_back(*p);
          at += p->pool_bytes;
        } else {
          at += kPageBytes;
        }
      }
    }
  }
  if (rt.pools.empty()) {
    *why_not = "no pymalloc pool in the image's anonymous memory (PYTHONMALLOC=malloc, or nothing small allocated)";
    return std::nullopt;
  }
  if (const ModuleSymbols* syms = symbols.symbols_for(*rt.module)) {
    const WritableRanges data = writable_ranges(*rt.module, *syms);
    const std::vector<cpython::DataStack> stacks = cpython::find_data_stacks(image, data);
    rt.not_roots = cpython::non_reference_ranges(image, data, stacks, minor);
    rt.frames = cpython::python_frames(image, stacks, minor, rt.not_roots);
    rt.tracemalloc = cpython::tracemalloc_place(symbols, *rt.module, data, minor);
    // Sorted once, the frames' spent slots with the rest.
    std::sort(rt.not_roots.begin(), rt.not_roots.end(), [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
  }
  return rt;
}

HeapModel walk_heap(const Image& image, const Runtime& rt) { return Walker(image, rt, nullptr).run(); }

HeapVerification verify_heap(const Image& image, const Runtime& rt) {
  HeapVerification out;
  Walker(image, rt, &out).run();
  return out;
}

}  // namespace heapscope::pymalloc
