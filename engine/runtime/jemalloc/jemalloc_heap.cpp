#include "runtime/jemalloc/jemalloc_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "base/phase_timer.h"
#include "heap/heap_check.h"
#include "runtime/jemalloc/jemalloc_counters.h"
#include "runtime/jemalloc/jemalloc_extent_map.h"

namespace heapscope::jemalloc {

namespace {

// Bounds of every loop over the allocator's own data: beyond them the data is taken as damaged.
constexpr std::size_t kMaxThreadCaches = std::size_t{1} << 16;
constexpr std::size_t kMaxCachedPerBin = std::size_t{1} << 13;  // a cache bin's stack spans at most 64 KiB
constexpr std::size_t kMaxBaseBlocks = std::size_t{1} << 20;
constexpr std::uint64_t kMaxExtentBytes = Block::kMaxBareBytes & ~(kPageBytes - 1);
constexpr std::size_t kMaxWarningsOfAKind = 8;
constexpr std::size_t kMaxFindings = 1000;

// One extent of the extent map, with what the walk needs of its edata_t.
struct ExtentRecord {
  Address edata = 0;
  Extent extent;
  std::array<std::uint64_t, kSlabBitmapWords> bitmap{};  // a slab's regions: bit set = free
};

struct Cached {
  std::uint32_t size_class = 0;
  bool matched = false;
};

class Walker {
 public:
  // With `verification`, what the walk finds wrong is also recorded there as `verify`'s findings.
  Walker(const Image& image, const Runtime& rt, HeapVerification* verification = nullptr)
      : image_(image), rt_(rt), l_(*rt.layout), verification_(verification) {}

  HeapModel run() {
    model_.allocator = "jemalloc";
    model_.state_labels = {"in use", "", "free", "thread caches", "", ""};
    model_.version = rt_.version.substr(0, rt_.version.find('-'));
    model_.discovery = rt_.discovery;
    model_.warnings = rt_.warnings;
    if (!rt_.initialized) return std::move(model_);
    {
      PhaseTimer timer("walk: jemalloc arenas and thread caches");
      collect_arenas();
      make_model_arenas();
      for (const auto& [index, arena] : arenas_) {
        collect_thread_caches(arena, index);
        collect_metadata(arena, index);
      }
      std::sort(cache_stacks_.begin(), cache_stacks_.end());
    }
    {
      PhaseTimer timer("walk: jemalloc extents");
      walk_extent_map();
      std::sort(extents_.begin(), extents_.end(),
                [](const ExtentRecord& a, const ExtentRecord& b) { return a.extent.base() < b.extent.base(); });
      Address covered = 0;
      for (const ExtentRecord& r : extents_) {
        if (r.extent.base() < covered) {
          find("extent", r.edata, fmt::format("an extent starting at or after 0x{:x}, where the one before ends", covered),
               fmt::format("0x{:x}", r.extent.base()), "extent map", "the extent's blocks are missing");
          warn(fmt::format("extent 0x{:x} at 0x{:x} overlaps the extent before it; skipped", r.edata, r.extent.base()),
               true, "extent");
          continue;
        }
        add_extent(r);
        covered = r.extent.end();
      }
    }
    std::size_t unmatched = 0;
    for (const auto& [address, cached] : cached_) {
      if (cached.matched) continue;
      ++unmatched;
      find("tcache_link", address, fmt::format("a region or large extent of size class {}", cached.size_class),
           "no block of that class", fmt::format("thread cache bin {}", cached.size_class),
           "none: the pointer is left out");
    }
    if (unmatched)
      warn(fmt::format("{} cached pointer{} in thread caches {} no allocated region or large extent of {} size "
                       "class; left out",
                       unmatched, unmatched == 1 ? "" : "s", unmatched == 1 ? "is" : "are", unmatched == 1 ? "its" : "their"),
           true);
    for (const auto& [what, count] : suppressed_)
      model_.warnings.push_back(fmt::format("… and {} more warnings like the above ({})", count, what));
    add_figures();
    if (verification_) {
      HeapCheckCounts& c = verification_->checked;
      c.arenas = arenas_.size();
      for (const auto& [index, arena] : model_arenas_) c.heaps += arena.heaps.size();
      c.chunks = model_.blocks.size();
      // In jemalloc's words, not glibc's (no bins of free chunks, no fastbins): the counts stay in JSON.
      verification_->counts_in_glibc_words = false;
      verification_->checked_in_own_words.push_back(fmt::format(
          "jemalloc: {} arena{}, {} run{} of contiguous extents, {} regions and large allocations; {} cached pointer{} "
          "in {} thread cache{}",
          c.arenas, c.arenas == 1 ? "" : "s", c.heaps, c.heaps == 1 ? "" : "s", c.chunks, c.tcache_entries,
          c.tcache_entries == 1 ? "" : "s", c.tcaches, c.tcaches == 1 ? "" : "s"));
    }
    for (const SizeClassUse& use : classes_)
      if (use.slabs) model_.size_classes.push_back(use);
    model_.free_pages = {
        {"dirty", "freed pages not purged yet: resident, reused first", dirty_runs_, dirty_bytes_},
        {"muzzy", "pages purged lazily (MADV_FREE): the kernel may take them back", muzzy_runs_, muzzy_bytes_},
        {"retained", "address space kept without memory (not free blocks)", retained_runs_, retained_bytes_},
    };
    for (auto& [index, arena] : model_arenas_) {
      for (const HeapSegment& h : arena.heaps) arena.system_bytes += h.end - h.start;
      model_.arenas.push_back(std::move(arena));
    }
    for (std::vector<HeapSegment>* ranges : {&model_.metadata, &model_.reserved})
      std::sort(ranges->begin(), ranges->end(), [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
    return std::move(model_);
  }

 private:
  void warn(std::string text, bool damage, const char* kind = nullptr) {
    if (damage) model_.complete = false;
    if (kind && ++warnings_of_[kind] > kMaxWarningsOfAKind) {
      ++suppressed_[kind];
      return;
    }
    model_.warnings.push_back(std::move(text));
  }

  // One of `verify`'s findings (when verifying): the walk's checks are jemalloc's consistency checks.
  void find(const char* kind, Address at, std::string expected, std::string found, std::string where,
            const char* affects) {
    if (!verification_) return;
    if (verification_->findings.size() >= kMaxFindings) {
      ++verification_->findings_dropped;
      return;
    }
    HeapFinding f;
    f.kind = kind;
    f.chunk = at;
    f.expected = std::move(expected);
    f.found = std::move(found);
    f.where = std::move(where);
    f.affects = affects;
    verification_->findings.push_back(std::move(f));
  }

  // je_arenas: each arena that exists must say it is the one at its index.
  void collect_arenas() {
    std::vector<std::uint64_t> slots(kArenaLimit);
    if (!image_.read_exact(rt_.arenas, slots.data(), slots.size() * 8)) {
      // Only arena 0 is certain to be readable (the runtime checked it).
      slots.assign(1, image_.read_u64(rt_.arenas).value_or(0));
      warn("jemalloc's arena array cannot be read whole: only arena 0 is walked", true);
    }
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i]) continue;
      if (!is_arena(image_, l_, slots[i], static_cast<std::uint32_t>(i))) {
        find("arena", slots[i], fmt::format("an arena_t naming itself arena {}, with a metadata allocator of its own", i),
             "a pointer to something else", fmt::format("je_arenas[{}]", i),
             "its threads' caches are not read: their blocks show as in use");
        warn(fmt::format("jemalloc arena {} (0x{:x}) does not look like an arena; its thread caches are not read",
                         i, slots[i]),
             true, "arena");
        continue;
      }
      arenas_.emplace_back(static_cast<std::uint32_t>(i), slots[i]);
    }
  }

  // The arena's list of thread caches (cache_bin_array_descriptor_t), each an array of cache bins whose
  // stacks hold the cached pointers.
  void collect_thread_caches(Address arena, std::uint32_t index) {
    const auto first = image_.read_u64(arena + l_.arena.cache_bin_descriptors);
    if (!first) {
      warn(fmt::format("arena {}: its thread cache list cannot be read; cached blocks show as in use", index), true);
      return;
    }
    std::unordered_set<Address> seen;
    for (Address d = *first; d;) {
      if (seen.size() >= kMaxThreadCaches || !seen.insert(d).second) break;  // back at the head: done
      const auto bins = image_.read_u64(d + l_.cache_bin.descriptor_bins);
      const auto next = image_.read_u64(d + l_.cache_bin.descriptor_next);
      if (!bins || !next) {
        warn(fmt::format("arena {}: thread cache descriptor 0x{:x} cannot be read; the caches after it are not read",
                         index, d),
             true);
        return;
      }
      if (verification_) ++verification_->checked.tcaches;
      collect_cache_bins(*bins, index);
      d = *next;
    }
  }

  void collect_cache_bins(Address bins, std::uint32_t arena) {
    const CacheBinLayout& cl = l_.cache_bin;
    std::vector<std::uint8_t> bytes(CacheBinLayout::kMaxBins * cl.stride);
    if (!image_.read_exact(bins, bytes.data(), bytes.size())) {
      warn(fmt::format("arena {}: thread cache bins at 0x{:x} cannot be read; their blocks show as in use", arena,
                       bins),
           true, "cache bin");
      return;
    }
    bool stack_marked = false;
    for (std::size_t b = 0; b < CacheBinLayout::kMaxBins && b < rt_.sizes.size(); ++b) {
      Address head;
      std::uint16_t empty, full;
      std::memcpy(&head, bytes.data() + b * cl.stride + cl.stack_head, 8);
      std::memcpy(&empty, bytes.data() + b * cl.stride + cl.low_bits_empty, 2);
      std::memcpy(&full, bytes.data() + b * cl.stride + cl.low_bits_full, 2);
      if (!head) continue;
      // The stack grows down to stack_head from its empty position; only their low 16 bits are kept apart.
      const auto span = static_cast<std::uint16_t>(empty - static_cast<std::uint16_t>(head));
      if (span % 8 || span / 8 > kMaxCachedPerBin) {
        find("cache_bin", bins + b * cl.stride, "a stack of whole pointers, at most 64 KiB",
             fmt::format("head 0x{:x}, empty position ending 0x{:04x}", head, empty),
             fmt::format("thread cache bin {} of arena {}", b, arena), "that bin's cached blocks show as in use");
        warn(fmt::format("thread cache bin 0x{:x} (size class {}) has a bad stack (head 0x{:x}, empty at 0x{:x})",
                         bins + b * cl.stride, b, head, empty),
             true, "cache bin");
        continue;
      }
      // A bin with room has its stack's last slot (just below the empty position) inside the thread cache's
      // stack allocation: one such slot tells which block that allocation is.
      if (full != empty && !stack_marked) {
        cache_stacks_.push_back(head + span - 8);
        stack_marked = true;
      }
      std::vector<std::uint64_t> items(span / 8);
      if (!image_.read_exact(head, items.data(), items.size() * 8)) {
        warn(fmt::format("thread cache bin 0x{:x}: its stack at 0x{:x} cannot be read", bins + b * cl.stride, head),
             true, "cache bin");
        continue;
      }
      for (std::uint64_t p : items) {
        if (verification_) ++verification_->checked.tcache_entries;
        if (cached_.emplace(p, Cached{static_cast<std::uint32_t>(b), false}).second) continue;
        find("double_free", p, "each block in at most one thread cache", "cached twice",
             fmt::format("thread cache bin {} of arena {}", b, arena),
             "a block freed twice: the next two allocations of its class get the same memory");
        warn(fmt::format("0x{:x} is cached twice in thread caches", p), true, "cache bin");
      }
    }
  }

  // The arena's metadata allocator's blocks (base_block_t chain): arena_t, edata_t, radix tree nodes.
  void collect_metadata(Address arena, std::uint32_t index) {
    const Address base = image_.read_u64(arena + l_.arena.base).value_or(0);  // checked by is_arena
    Address block = image_.read_u64(base + l_.base.blocks).value_or(0);
    for (std::size_t n = 0; block; ++n) {
      const auto size = image_.read_u64(block + l_.base.block_size);
      const auto next = image_.read_u64(block + l_.base.block_next);
      if (n >= kMaxBaseBlocks || !size || !next || *size == 0 || *size % kPageBytes || *size > kMaxExtentBytes) {
        warn(fmt::format("arena {}: metadata block 0x{:x} cannot be read or is damaged; the blocks after it are not "
                         "counted as jemalloc's metadata",
                         index, block),
             false, "metadata");
        return;
      }
      model_.metadata.push_back({block, block + *size});
      block = *next;
    }
  }

  // Every extent of the extent map, once.
  void walk_extent_map() {
    const bool read = for_each_extent(
        image_, rt_, [&](Address edata, Address page, const LeafEntry&) { read_extent(edata, page); },
        [&](Address leaf) {
          warn(fmt::format("jemalloc extent map leaf 0x{:x} cannot be read; the extents it maps are missing", leaf),
               true, "leaf");
        });
    if (!read) warn("jemalloc's extent map root cannot be read: no extents were walked", true);
  }

  void read_extent(Address edata, Address page) {
    ExtentRecord r;
    r.edata = edata;
    std::uint64_t words[3];
    if (!image_.read_exact(edata + l_.edata.bits, words, sizeof words)) {
      warn(fmt::format("page 0x{:x}: its extent 0x{:x} cannot be read", page, edata), true, "extent");
      return;
    }
    r.extent = decode_extent(words[0], words[1], words[2]);
    const Extent& e = r.extent;
    if (e.size == 0 || e.size > kMaxExtentBytes || page < e.base() || page >= e.end()) {
      find("extent", edata, fmt::format("an extent covering page 0x{:x}, which the extent map gives it", page),
           fmt::format("0x{:x}, {} bytes", e.address, e.size), "extent map", "the extent's blocks are missing");
      warn(fmt::format("page 0x{:x}: its extent 0x{:x} (0x{:x}, {} bytes) does not cover it; skipped", page, edata,
                       e.address, e.size),
           true, "extent");
      return;
    }
    if (e.slab && !image_.read_exact(edata + l_.edata.slab_bitmap, r.bitmap.data(), sizeof r.bitmap)) {
      warn(fmt::format("slab 0x{:x}: its region bitmap cannot be read; skipped", e.base()), true, "extent");
      return;
    }
    extents_.push_back(r);
  }

  void add_figures() {
    const std::optional<OwnCounters> own = read_own_counters(image_, rt_, arenas_);
    auto own_of = [&](std::uint64_t OwnCounters::*field, std::uint64_t scale) -> std::optional<std::uint64_t> {
      if (!own) return std::nullopt;
      return (*own).*field * scale;
    };
    std::uint64_t handed_out = cache_stack_bytes_;
    for (const auto& [index, arena] : model_arenas_)
      handed_out += arena.totals[static_cast<int>(BlockState::in_use)].bytes +
                    arena.totals[static_cast<int>(BlockState::tcache)].bytes;
    model_.figures = {
        {"stats.allocated",
         "bytes allocated (small regions and large extents at their class sizes); the walk's: in use + thread "
         "caches + the thread caches' own stacks",
         own_of(&OwnCounters::allocated, 1), handed_out},
        {"stats.arenas.<i>.bins.<j>.curslabs", "slabs of all small classes; the walk's: slabs in the extent map",
         own_of(&OwnCounters::slabs, 1), slabs_},
        {"stats.arenas.<i>.pdirty", "bytes of dirty pages (freed, not yet purged); the walk's: dirty extents",
         own_of(&OwnCounters::dirty_pages, kPageBytes), dirty_bytes_},
        {"stats.arenas.<i>.pmuzzy", "bytes of muzzy pages (purged lazily); the walk's: muzzy extents",
         own_of(&OwnCounters::muzzy_pages, kPageBytes), muzzy_bytes_},
        {"stats.retained", "bytes of address space kept without memory; the walk's: retained extents",
         own_of(&OwnCounters::retained_pages, kPageBytes), retained_bytes_},
    };
    if (!own) warn("jemalloc's own statistics in its arenas cannot be read; summary shows the walk's figures only", false);
  }

  // The model's arenas are jemalloc's in index order, made before the first block names one.
  void make_model_arenas() {
    for (const auto& [index, address] : arenas_) {
      ArenaInfo info;
      info.address = address;
      info.is_main = index == 0;
      model_arenas_.emplace_back(index, std::move(info));
    }
  }

  ArenaInfo& arena_for(std::uint32_t index, std::uint16_t* model_index) {
    auto it = std::find_if(model_arenas_.begin(), model_arenas_.end(),
                           [&](const auto& entry) { return entry.first == index; });
    if (it == model_arenas_.end()) {
      warn(fmt::format("extents name arena {}, which the arena array does not hold", index), true);
      model_arenas_.emplace_back(index, ArenaInfo{});
      it = model_arenas_.end() - 1;
    }
    *model_index = static_cast<std::uint16_t>(it - model_arenas_.begin());
    return it->second;
  }

  // An allocated block holding a thread cache's stacks is the allocator's own: its slots below each stack's
  // head are stale pointers to blocks since handed out, which must not keep them alive. It is metadata and
  // overhead, not a block.
  bool is_cache_stack(Address at, std::uint64_t bytes) const {
    const auto it = std::lower_bound(cache_stacks_.begin(), cache_stacks_.end(), at);
    return it != cache_stacks_.end() && *it < at + bytes;
  }

  void push(ArenaInfo& arena, std::uint16_t arena_index, Address at, std::uint64_t bytes, BlockState state) {
    if (is_allocated(state) && is_cache_stack(at, bytes)) {
      model_.metadata.push_back({at, at + bytes});
      arena.overhead_bytes += bytes;
      cache_stack_bytes_ += bytes;
      return;
    }
    const Block b = Block::bare(at, bytes, state, arena_index);
    model_.blocks.push_back(b);
    arena.totals[static_cast<int>(state)].add(b.chunk_size());
  }

  // A cached pointer of this size class at `at` makes the block cached.
  BlockState allocated_state(Address at, std::uint32_t size_class) {
    const auto it = cached_.find(at);
    if (it == cached_.end() || it->second.size_class != size_class) return BlockState::in_use;
    it->second.matched = true;
    return BlockState::tcache;
  }

  // A region free in its slab's bitmap that a thread cache also holds was freed twice.
  void cached_free_region(Address at, std::uint32_t size_class) {
    const auto it = cached_.find(at);
    if (it == cached_.end() || it->second.size_class != size_class) return;
    it->second.matched = true;
    find("double_free", at, "a cached region allocated in its slab", "free in its slab's bitmap too",
         fmt::format("thread cache bin {}", size_class),
         "a block freed twice: the next two allocations of its class get the same memory");
    warn(fmt::format("0x{:x} is free in its slab and in a thread cache (freed twice)", at), true, "double free");
  }

  void add_extent(const ExtentRecord& r) {
    const Extent& e = r.extent;
    if (e.state == ExtentState::retained) {  // address space kept without memory: no blocks
      retained_bytes_ += e.size;
      ++retained_runs_;
      model_.reserved.push_back({e.base(), e.base() + e.size});
      return;
    }
    if (e.state != ExtentState::active && e.state != ExtentState::dirty && e.state != ExtentState::muzzy) {
      warn(fmt::format("extent 0x{:x} at 0x{:x} is in transition (state {}); skipped", r.edata, e.base(),
                       static_cast<unsigned>(e.state)),
           false, "extent in transition");
      return;
    }
    std::uint16_t arena_index = 0;
    ArenaInfo& arena = arena_for(e.arena, &arena_index);
    if (!arena.heaps.empty() && arena.heaps.back().end == e.base())
      arena.heaps.back().end = e.end();
    else
      arena.heaps.push_back({e.base(), e.end()});
    if (e.state != ExtentState::active) {  // dirty or muzzy: pages free for reuse, not yet returned
      (e.state == ExtentState::dirty ? dirty_bytes_ : muzzy_bytes_) += e.size;
      ++(e.state == ExtentState::dirty ? dirty_runs_ : muzzy_runs_);
      push(arena, arena_index, e.base(), e.size, BlockState::free);
      return;
    }
    if (e.slab) {
      add_slab(r, arena, arena_index);
      return;
    }
    // A sampled small allocation (heap profiling) is promoted to a large extent of its own whose size
    // class stays the small one's.
    const std::uint64_t large_min = rt_.sizes[kSmallClasses];  // with or without its cache-oblivious page
    const bool promoted = e.szind < kSmallClasses && (e.size == large_min || e.size == large_min + kPageBytes);
    if ((e.szind < kSmallClasses && !promoted) || e.szind >= rt_.sizes.size()) {
      warn(fmt::format("large extent 0x{:x} at 0x{:x} names size class {}; taken as one block of the extent",
                       r.edata, e.base(), e.szind),
           true, "extent");
      push(arena, arena_index, e.base(), e.size, BlockState::in_use);
      return;
    }
    // A large (or promoted) allocation: its user pointer lies in the first page (a random cache-line
    // offset), its usable size is its class's.
    const std::uint64_t usable = rt_.sizes[e.szind];
    if (e.address + usable > e.end()) {
      warn(fmt::format("large extent 0x{:x}: {} bytes from 0x{:x} overrun its {} bytes at 0x{:x}; taken as one "
                       "block of the extent",
                       r.edata, usable, e.address, e.size, e.base()),
           true, "extent");
      push(arena, arena_index, e.base(), e.size, BlockState::in_use);
      return;
    }
    push(arena, arena_index, e.address, usable, allocated_state(e.address, e.szind));
    arena.overhead_bytes += e.size - usable;
  }

  void add_slab(const ExtentRecord& r, ArenaInfo& arena, std::uint16_t arena_index) {
    const Extent& e = r.extent;
    if (e.szind >= kSmallClasses || rt_.bins[e.szind].slab_size != e.size) {
      find("extent", r.edata, "a slab of its size class's slab size",
           fmt::format("size class {}, {} bytes", e.szind, e.size), "extent map",
           "the slab is one block: its regions are missing");
      warn(fmt::format("slab 0x{:x} at 0x{:x} names size class {} but has {} bytes; taken as one block", r.edata,
                       e.base(), e.szind, e.size),
           true, "slab");
      push(arena, arena_index, e.base(), e.size, BlockState::in_use);
      return;
    }
    const BinInfo& bin = rt_.bins[e.szind];
    ++slabs_;
    SizeClassUse& use = classes_[e.szind];
    use.object_bytes = bin.region_size;
    ++use.slabs;
    use.slab_bytes += e.size;
    std::uint32_t free = 0;
    for (std::uint32_t i = 0; i < bin.regions; ++i) {
      const Address at = e.base() + i * bin.region_size;
      const bool is_free = (r.bitmap[i / 64] >> (i % 64)) & 1;
      free += is_free;
      if (is_free) cached_free_region(at, e.szind);
      const BlockState state = is_free ? BlockState::free : allocated_state(at, e.szind);
      ++(state == BlockState::free ? use.free : state == BlockState::tcache ? use.cached : use.in_use);
      push(arena, arena_index, at, bin.region_size, state);
    }
    if (free != e.nfree) {
      find("slab_count", r.edata, fmt::format("{} free regions, as its bitmap says", free),
           fmt::format("a free count of {}", e.nfree), fmt::format("slab 0x{:x}", e.base()),
           "none for heapscope (it goes by the bitmap); jemalloc may hand out a region twice or never");
      warn(fmt::format("slab 0x{:x}: {} regions free by its bitmap, {} by its count", e.base(), free, e.nfree), false,
           "slab count");
    }
    arena.overhead_bytes += e.size - std::uint64_t{bin.regions} * bin.region_size;
  }

  const Image& image_;
  const Runtime& rt_;
  const Layout& l_;
  HeapModel model_;
  std::vector<std::pair<std::uint32_t, Address>> arenas_;  // jemalloc index → arena_t
  std::vector<std::pair<std::uint32_t, ArenaInfo>> model_arenas_;  // by jemalloc index
  std::vector<ExtentRecord> extents_;
  std::unordered_map<Address, Cached> cached_;
  std::vector<Address> cache_stacks_;  // one slot inside each thread cache's stack allocation, sorted
  std::uint64_t cache_stack_bytes_ = 0;
  std::uint64_t dirty_bytes_ = 0, muzzy_bytes_ = 0, retained_bytes_ = 0, slabs_ = 0;
  std::uint64_t dirty_runs_ = 0, muzzy_runs_ = 0, retained_runs_ = 0;
  std::vector<SizeClassUse> classes_ = std::vector<SizeClassUse>(kSmallClasses);
  std::unordered_map<std::string, std::size_t> warnings_of_, suppressed_;
  HeapVerification* verification_ = nullptr;
};

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& runtime) { return Walker(image, runtime).run(); }

HeapVerification verify_heap(const Image& image, const Runtime& runtime) {
  HeapVerification v;
  if (!runtime.initialized) {
    v.notes.push_back("jemalloc is not initialised yet: there is nothing to check");
    return v;
  }
  Walker(image, runtime, &v).run();
  return v;
}

}  // namespace heapscope::jemalloc
