#include "runtime/mimalloc/mimalloc_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/phase_timer.h"
#include "runtime/walk_problems.h"

namespace heapscope::mimalloc {

namespace {

constexpr std::uint64_t kMaxDelayedBlocks = std::uint64_t{1} << 24;
// Pages of blocks up to this size hold many blocks (small and medium pages): fragmentation's size classes.
constexpr std::uint64_t kMediumBlockMax = 128 * 1024;
constexpr std::uint64_t kMinBlock = 8;

// What the walk knows of one mi_heap_t.
struct HeapInfo {
  Address tld = 0, backing = 0, thread_id = 0;
  bool readable = false;
};

// A block's state within its page while the page is walked.
enum class Slot : std::uint8_t { in_use, free, local_free, thread_free, delayed };

class Walker {
 public:
  Walker(const Image& image, const Runtime& rt) : image_(image), rt_(rt), l_(*rt.layout) {}

  HeapModel run() {
    model_.allocator = "mimalloc";
    model_.version = rt_.version;
    model_.state_labels = {"in use", "", "free", "deferred free", "", ""};
    model_.terms = {"thread", "segments", "page", "deferred",
                    "deferred ones are freed but not yet back on their page's free list"};
    model_.discovery = rt_.discovery;
    model_.warnings = rt_.warnings;
    model_.complete = !rt_.segments_missing;
    {
      PhaseTimer timer("walk: mimalloc heaps");
      read_slices();
      read_heaps();
    }
    {
      PhaseTimer timer("walk: mimalloc segments");
      for (std::size_t i = 0; i < rt_.segments.size(); ++i) walk_segment(i);
    }
    if (delayed_matched_ < delayed_.size())
      problem("delayed_list", 0, "blocks of pages in use", fmt::format("{} blocks on heaps' thread-delayed free lists "
              "that are no block of a page in use", delayed_.size() - delayed_matched_),
              "the heaps' thread-delayed lists", "those blocks are left out", true);
    problems_.add_suppressed(model_.warnings);
    add_figures();
    for (auto& [size, use] : classes_) model_.size_classes.push_back(use);
    model_.free_pages = {
        {"free spans", "free slices inside segments, for new pages", free_spans_, free_span_bytes_},
        {"cached segments", "whole segments freed to mimalloc's segment cache, reused before memory is mapped anew",
         cached_segments_, cached_segment_bytes_},
    };
    for (ArenaInfo& a : arenas_) model_.arenas.push_back(std::move(a));
    std::sort(model_.metadata.begin(), model_.metadata.end(),
              [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
    verification_.checked.arenas = model_.arenas.size();
    verification_.checked.chunks = model_.blocks.size();
    verification_.checked.tcaches = heaps_.size();
    const HeapCheckCounts& c = verification_.checked;
    verification_.object_word = "block";
    verification_.counts_in_glibc_words = false;
    verification_.checked_in_own_words.push_back(fmt::format(
        "{} segments of {} threads, {} blocks; list entries: {} on pages' free lists, {} deferred (local-free, "
        "thread-free and {} heaps' thread-delayed lists)",
        c.heaps, c.arenas, c.chunks, c.bin_entries, c.tcache_entries, c.tcaches));
    return std::move(model_);
  }

  HeapVerification verification() && { return std::move(verification_); }

 private:
  // One problem: a finding for `verify`, and a warning of the walk (at most a few of each kind).
  void problem(const std::string& kind, Address at, std::string expected, std::string found, std::string where,
               std::string affects, bool damage, Address segment = 0) {
    if (damage) {
      model_.complete = false;
      if (current_arena_) current_arena_->complete = false;
    }
    HeapFinding f;
    f.kind = kind;
    f.chunk = at;
    f.expected = std::move(expected);
    f.found = std::move(found);
    f.heap = segment;
    f.arena = current_arena_ ? current_arena_->address : 0;
    f.where = std::move(where);
    f.affects = std::move(affects);
    problems_.add(std::move(f), verification_, model_.warnings);
  }

  // Each segment's slice entries, and the heaps its pages name.
  void read_slices() {
    slices_.resize(rt_.segments.size());
    for (std::size_t i = 0; i < rt_.segments.size(); ++i) {
      const Segment& s = rt_.segments[i];
      if (s.cached()) continue;
      std::vector<std::uint8_t>& bytes = slices_[i];
      bytes.resize((s.slice_entries + 1) * l_.page.size);
      bytes.resize(image_.read(s.address + l_.segment.slices, bytes.data(), bytes.size()));
      for (std::uint64_t k = 0; (k + 1) * l_.page.size <= bytes.size();) {
        const std::uint8_t* p = bytes.data() + k * l_.page.size;
        const std::uint32_t count = u32_at(p, l_.page.slice_count);
        if (count == 0) break;
        if (k > 0 && u32_at(p, l_.page.xblock_size) != 0)
          if (const Address heap = u64_at(p, l_.page.xheap)) heaps_.emplace(heap, HeapInfo{});
        k += count;
      }
    }
  }

  // Every heap pages name: its thread, its thread's data, and the blocks other threads freed into its full
  // pages (the thread-delayed list).
  void read_heaps() {
    for (auto& [heap, info] : heaps_) {
      const auto tld = image_.read_u64(heap + l_.heap.tld);
      const auto thread = image_.read_u64(heap + l_.heap.thread_id);
      const auto delayed = image_.read_u64(heap + l_.heap.thread_delayed_free);
      const auto backing = tld ? image_.read_u64(*tld + l_.tld.heap_backing) : WordRead{};
      if (!tld || !thread || !delayed || !backing || (heap & 7)) {
        problem("heap", heap, "a readable mi_heap_t and its thread data", "unreadable memory", "heap",
                "its thread-delayed frees show as in use", true);
        continue;
      }
      info = {*tld, *backing, *thread, true};
      // A thread's backing heap and its thread data (mi_thread_data_t, mapped for it; the main thread's are
      // the library's statics) are mimalloc's own: their pointers lead to pages and free blocks, not roots.
      if (heap == *backing) {
        model_.metadata.push_back({heap, heap + l_.heap.size});
        model_.metadata.push_back({*tld, *tld + l_.tld.stats + l_.stats.size});
      }
      if (*thread == 0)
        problem("heap", heap, "the id of the thread it belongs to", "thread id 0", "heap",
                "none (the heap's pages are walked all the same)", false);
      const bool in_library = heap >= rt_.module->start && heap < rt_.module->end;
      if (in_library && !main_heap_) main_heap_ = heap;
      Address block = *delayed;
      for (std::uint64_t n = 0; block; ++n) {
        if (n >= kMaxDelayedBlocks || (block & 7) || !delayed_.emplace(block, false).second) {
          problem("delayed_list", block, "a list of distinct blocks", "a loop, a misaligned or a repeated block",
                  fmt::format("thread-delayed free list of heap 0x{:x}", heap),
                  "the rest of that list shows as in use", true);
          break;
        }
        ++verification_.checked.tcache_entries;
        const auto next = image_.read_u64(block);
        if (!next) {
          problem("delayed_list", block, "a readable block", "unreadable memory",
                  fmt::format("thread-delayed free list of heap 0x{:x}", heap), "the rest of that list shows as in use",
                  true);
          break;
        }
        block = *next;
      }
    }
    if (!main_heap_) main_heap_ = rt_.main_heap;
    if (main_heap_ && !rt_.main_heap) model_.discovery.push_back({"_mi_heap_main", main_heap_, "page owner in libmimalloc's data"});
    if (!heaps_.empty())
      model_.discovery.push_back(
          {"heaps", heaps_.begin()->first, fmt::format("page owners ({} heaps)", heaps_.size())});
  }

  // The arena of the thread `thread_id` (0: the abandoned segments).
  std::uint16_t arena_of(Address thread_id) {
    if (const auto it = arena_index_.find(thread_id); it != arena_index_.end()) return it->second;
    ArenaInfo a;
    if (thread_id)
      for (const auto& [heap, info] : heaps_)
        if (info.readable && info.thread_id == thread_id) {
          a.address = info.backing;
          break;
        }
    a.is_main = a.address && a.address == main_heap_;
    const auto index = static_cast<std::uint16_t>(arenas_.size());
    arenas_.push_back(std::move(a));
    arena_index_.emplace(thread_id, index);
    return index;
  }

  void push(Address at, std::uint64_t bytes, BlockState state) {
    model_.blocks.push_back(Block::bare(at, bytes, state, arena_));
    current_arena_->totals[static_cast<int>(state)].add(bytes);
  }

  void walk_segment(std::size_t index) {
    const Segment& s = rt_.segments[index];
    if (s.cached()) {
      ++cached_segments_;
      cached_segment_bytes_ += s.bytes();
      model_.reserved.push_back({s.address, s.end()});
      return;
    }
    arena_ = arena_of(s.thread_id);
    current_arena_ = &arenas_[arena_];
    current_arena_->heaps.push_back({s.address, s.end()});
    current_arena_->system_bytes += s.bytes();
    ++verification_.checked.heaps;
    ++live_segments_;
    if (s.abandoned_whole()) ++abandoned_segments_;
    const std::vector<std::uint8_t>& bytes = slices_[index];
    std::uint64_t k = 0;  // slice index
    std::uint64_t pages = 0;
    bool stopped = false;  // damage stopped the walk of the slices
    while (k < s.slice_entries) {
      if ((k + 1) * l_.page.size > bytes.size()) {
        problem("segment", s.address, "readable slice entries", fmt::format("slice {} unreadable", k), "segment",
                "the rest of the segment is not walked", true, s.address);
        stopped = true;
        break;
      }
      const std::uint8_t* p = bytes.data() + k * l_.page.size;
      const std::uint64_t count = u32_at(p, l_.page.slice_count);
      const std::uint32_t offset = u32_at(p, l_.page.slice_offset);
      if (count == 0 || offset != 0 || k + count > s.slices) {
        problem("slice", s.address + l_.segment.slices + k * l_.page.size,
                "the first slice of a page or span, within its segment",
                fmt::format("slice {}: {} slices, back offset {}", k, count, offset),
                fmt::format("slice entries of segment 0x{:x}", s.address), "the rest of the segment is not walked",
                true, s.address);
        if (k == s.info_slices && !layout_hint_given_) {
          // Not even the first page after the header: the slices are not 80 bytes apart.
          layout_hint_given_ = true;
          model_.warnings.push_back(
              "mimalloc's page entries are not where a release build keeps them: a debug or secure build "
              "(MI_DEBUG, MI_SECURE: encoded free lists, padded blocks) lays its pages out otherwise, and heapscope "
              "reads release builds only (Debian's libmimalloc2.0 is one)");
        }
        stopped = true;
        break;
      }
      const Address start = s.address + k * kSliceBytes;
      const std::uint64_t span_bytes = count * kSliceBytes;
      if (k == 0) {  // the segment's own header
        model_.metadata.push_back({start, start + span_bytes});
        current_arena_->overhead_bytes += span_bytes;
      } else if (u32_at(p, l_.page.xblock_size) == 0) {
        ++free_spans_;
        free_span_bytes_ += span_bytes;
        push(start, span_bytes, BlockState::free);
      } else {
        ++pages;
        walk_page(s, k, p, start, span_bytes);
      }
      k += count;
    }
    const std::uint64_t covered = std::min(k, s.slices) * kSliceBytes;
    current_arena_->overhead_bytes += s.bytes() - covered;  // a guard slice; or what damage left unwalked
    if (!stopped && pages < s.used)
      problem("segment", s.address, fmt::format("{} pages in use (its `used`)", s.used),
              fmt::format("{} pages", pages), "segment", "none", false, s.address);
  }

  // Follows one of a page's lists, marking each block it holds as `as`; false when the list is damaged.
  void follow(Address head, Slot as, const char* list, Address page_entry, Address start, std::uint64_t block,
              std::uint64_t capacity, std::vector<Slot>& slots, Address segment) {
    Address at = head;
    for (std::uint64_t n = 0; at; ++n) {
      const std::uint64_t offset = at - start;
      if (at < start || offset >= capacity * block || offset % block) {
        problem("free_list", at, fmt::format("a block of page 0x{:x} ({} blocks of {} bytes from 0x{:x})", page_entry,
                                             capacity, block, start),
                "an address outside its blocks", fmt::format("{} list of page 0x{:x}", list, page_entry),
                "the rest of that list shows as in use", true, segment);
        return;
      }
      Slot& slot = slots[offset / block];
      if (slot != Slot::in_use || n >= capacity) {
        problem(as == Slot::free ? "free_list" : "double_free", at, "each free block on one list once",
                "a block already on a list (a loop, or a block freed twice)",
                fmt::format("{} list of page 0x{:x}", list, page_entry), "the rest of that list shows as in use", true,
                segment);
        return;
      }
      slot = as;
      if (as == Slot::free) ++verification_.checked.bin_entries;
      else ++verification_.checked.tcache_entries;
      const auto next = image_.read_u64(at);
      if (!next) {
        problem("free_list", at, "a readable free block", "unreadable memory",
                fmt::format("{} list of page 0x{:x}", list, page_entry), "the rest of that list shows as in use", true,
                segment);
        return;
      }
      at = *next;
    }
  }

  void walk_page(const Segment& s, std::uint64_t k, const std::uint8_t* p, Address span_start,
                 std::uint64_t span_bytes) {
    const Address entry = s.address + l_.segment.slices + k * l_.page.size;  // the mi_page_t
    const std::uint32_t xblock = u32_at(p, l_.page.xblock_size);
    const std::uint64_t offset = (xblock >= kMinBlock && xblock <= kSmallPageOffsetMaxBlock) ? kSmallPageStartOffset : 0;
    const Address start = span_start + offset;
    const std::uint64_t page_bytes = span_bytes - offset;
    const std::uint64_t block = xblock < kHugeBlockSize ? xblock : page_bytes;
    const std::uint64_t capacity = u16_at(p, l_.page.capacity), reserved = u16_at(p, l_.page.reserved);
    if (block < kMinBlock || block % 8 || block > Block::kMaxBareBytes || reserved == 0 || capacity > reserved ||
        reserved * block > page_bytes) {
      problem("page", entry, "blocks of a multiple of 8 bytes, capacity <= reserved, and room for them",
              fmt::format("{}-byte blocks, capacity {}, reserved {} in {} bytes", block, capacity, reserved, page_bytes),
              fmt::format("page of segment 0x{:x}", s.address), "its blocks are not walked", true, s.address);
      current_arena_->overhead_bytes += span_bytes;
      return;
    }
    std::vector<Slot> slots(capacity, Slot::in_use);
    follow(u64_at(p, l_.page.free), Slot::free, "free", entry, start, block, capacity, slots, s.address);
    follow(u64_at(p, l_.page.local_free), Slot::local_free, "local-free", entry, start, block, capacity, slots,
           s.address);
    follow(u64_at(p, l_.page.xthread_free) & ~Address{3}, Slot::thread_free, "thread-free", entry, start, block,
           capacity, slots, s.address);
    std::uint64_t in_use = 0, free = reserved - capacity, deferred = 0, counted_used = 0;
    for (std::uint64_t j = 0; j < capacity; ++j) {
      Slot& slot = slots[j];
      if (slot == Slot::in_use && !delayed_.empty())
        if (const auto it = delayed_.find(start + j * block); it != delayed_.end() && !it->second) {
          it->second = true;
          ++delayed_matched_;
          slot = Slot::delayed;
        }
      if (slot == Slot::in_use || slot == Slot::thread_free || slot == Slot::delayed) ++counted_used;
      if (slot == Slot::in_use) ++in_use;
      else if (slot == Slot::free) ++free;
      else ++deferred;
    }
    const std::uint32_t used = u32_at(p, l_.page.used);
    if (used != counted_used)
      problem("used_count", entry, fmt::format("`used` = blocks neither free nor local-free ({})", counted_used),
              fmt::format("used = {}", used), fmt::format("page of segment 0x{:x}", s.address),
              "mimalloc's own count of the page's blocks is off; the walk follows the lists", false, s.address);
    for (std::uint64_t j = 0; j < reserved; ++j) {
      const Slot slot = j < capacity ? slots[j] : Slot::free;
      const BlockState state = slot == Slot::in_use ? BlockState::in_use
                               : slot == Slot::free ? BlockState::free
                                                    : BlockState::tcache;
      push(start + j * block, block, state);
    }
    current_arena_->overhead_bytes += span_bytes - reserved * block;
    if (block <= kMediumBlockMax) {
      SizeClassUse& use = classes_[block];
      use.object_bytes = block;
      ++use.slabs;
      use.slab_bytes += span_bytes;
      use.in_use += in_use;
      use.cached += deferred;
      use.free += free;
    }
  }

  // mimalloc's own statistics beside the walk's counts: _mi_stats_main (what ended threads merged into it)
  // and each live thread's own statistics (in its thread data).
  void add_figures() {
    std::optional<std::uint64_t> own_segments, own_abandoned;
    if (rt_.stats_main) {
      std::set<Address> stats{rt_.stats_main};
      for (const auto& [heap, info] : heaps_)
        if (info.readable) stats.insert(info.tld + l_.tld.stats);
      std::int64_t segments = 0, abandoned = 0;
      bool readable = true;
      for (const Address at : stats) {
        const auto current = image_.read_u64(at + l_.stats.segments + StatsLayout::kCurrent);
        const auto current_abandoned = image_.read_u64(at + l_.stats.segments_abandoned + StatsLayout::kCurrent);
        if (!current || !current_abandoned) {
          readable = false;
          break;
        }
        segments += static_cast<std::int64_t>(*current);
        abandoned += static_cast<std::int64_t>(*current_abandoned);
      }
      if (readable && segments + abandoned >= 0 && abandoned >= 0) {
        own_segments = static_cast<std::uint64_t>(segments + abandoned);
        own_abandoned = static_cast<std::uint64_t>(abandoned);
      }
    }
    model_.figures = {
        {"segments", "segments in use, owned or abandoned; mimalloc's: stats segments + segments_abandoned (current), "
         "over _mi_stats_main and each live thread's statistics",
         own_segments, live_segments_},
        {"segments_abandoned", "segments whose threads ended, waiting to be reclaimed; mimalloc's: stats "
         "segments_abandoned (current)",
         own_abandoned, abandoned_segments_},
    };
  }

  const Image& image_;
  const Runtime& rt_;
  const Layout& l_;
  HeapModel model_;
  HeapVerification verification_;
  std::vector<std::vector<std::uint8_t>> slices_;  // per segment
  std::map<Address, HeapInfo> heaps_;
  std::unordered_map<Address, bool> delayed_;  // block on a thread-delayed list → matched to a page
  std::size_t delayed_matched_ = 0;
  Address main_heap_ = 0;
  bool layout_hint_given_ = false;
  std::vector<ArenaInfo> arenas_;
  std::unordered_map<Address, std::uint16_t> arena_index_;
  std::uint16_t arena_ = 0;
  ArenaInfo* current_arena_ = nullptr;
  std::map<std::uint64_t, SizeClassUse> classes_;
  std::uint64_t free_spans_ = 0, free_span_bytes_ = 0, cached_segments_ = 0, cached_segment_bytes_ = 0;
  std::uint64_t live_segments_ = 0, abandoned_segments_ = 0;
  WalkProblems problems_{"mimalloc"};
};

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& runtime) { return Walker(image, runtime).run(); }

HeapVerification verify_heap(const Image& image, const Runtime& runtime) {
  Walker walker(image, runtime);
  walker.run();
  return std::move(walker).verification();
}

}  // namespace heapscope::mimalloc
