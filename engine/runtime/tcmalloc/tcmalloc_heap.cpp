#include "runtime/tcmalloc/tcmalloc_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "base/phase_timer.h"

namespace heapscope::tcmalloc {

namespace {

// Bounds of every loop over the allocator's own data: beyond them the data is taken as damaged.
constexpr std::uint64_t kPageNumberLimit = std::uint64_t{1} << (PageHeapLayout::kRootBits + PageHeapLayout::kLeafBits);
constexpr std::uint64_t kMaxSpanPages = Block::kMaxBareBytes >> kPageShift;  // just under 32 GiB
constexpr std::size_t kMaxSpans = std::size_t{1} << 26;
constexpr std::size_t kMaxThreadCaches = std::size_t{1} << 16;
constexpr std::uint32_t kMaxThreadCacheList = 1u << 20;
constexpr std::size_t kMaxWarningsOfAKind = 8;

struct SpanInfo {
  Address address = 0;  // the Span object
  std::uint64_t start = 0, length = 0;  // pages
  Address objects = 0;
  std::uint32_t size_class = 0;
  unsigned location = 0;
};

class Walker {
 public:
  Walker(const Image& image, const Runtime& rt) : image_(image), rt_(rt), l_(*rt.layout) {}

  HeapModel run() {
    model_.allocator = "tcmalloc";
    model_.state_labels = {"in use", "", "free", "thread/transfer caches", "", ""};
    model_.version = rt_.version;
    model_.discovery = rt_.discovery;
    model_.warnings = rt_.warnings;
    if (!rt_.inited) return std::move(model_);
    arena_.address = rt_.pageheap;
    arena_.is_main = true;
    arena_.system_bytes = image_.read_u64(rt_.pageheap + l_.pageheap.stats).value_or(0);
    {
      PhaseTimer timer("walk: tcmalloc caches");
      collect_thread_caches();
      collect_transfer_caches();
    }
    {
      PhaseTimer timer("walk: tcmalloc spans");
      walk_page_map();
    }
    if (cached_matched_ < cached_.size())
      warn(fmt::format("{} objects on thread or transfer cache lists are not objects of their size class in any "
                       "span in use; they are left out",
                       cached_.size() - cached_matched_),
           true);
    for (const auto& [what, count] : suppressed_)
      model_.warnings.push_back(fmt::format("… and {} more warnings like the above ({})", count, what));
    add_figures();
    for (const SizeClassUse& use : classes_)
      if (use.slabs) model_.size_classes.push_back(use);
    model_.free_pages = {
        {"free spans", "free page runs still mapped", free_spans_, free_span_bytes_},
        {"returned spans", "free page runs returned to the system (madvised), mapped again on reuse", returned_spans_,
         returned_span_bytes_},
    };
    if (!arena_.heaps.empty() || !model_.blocks.empty()) model_.arenas.push_back(std::move(arena_));
    std::sort(model_.metadata.begin(), model_.metadata.end(),
              [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
    return std::move(model_);
  }

 private:
  void warn(std::string text, bool damage, const char* kind = nullptr) {
    if (damage) {
      model_.complete = false;
      arena_.complete = false;
    }
    if (kind && ++warnings_of_[kind] > kMaxWarningsOfAKind) {
      ++suppressed_[kind];
      return;
    }
    model_.warnings.push_back(std::move(text));
  }

  // Follows a free list of `count` objects of class `size_class` from `head` (`tail` its expected last
  // object when known), recording each as cached.
  void follow_cached_list(Address head, std::uint64_t count, std::uint32_t size_class, Address tail,
                          const std::string& where) {
    Address obj = head;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (obj == 0) {
        warn(fmt::format("{}: its list ends after {} of {} objects", where, i, count), true, "cache list");
        return;
      }
      const auto next = (obj & 7) ? std::nullopt : image_.read_u64(obj);
      if (!next) {
        warn(fmt::format("{}: object 0x{:x} cannot be read", where, obj), true, "cache list");
        return;
      }
      if (!cached_.emplace(obj, size_class).second) {
        warn(fmt::format("{}: object 0x{:x} is on two cache lists (or its list loops)", where, obj), true,
             "cache list");
        return;
      }
      if (tail && i + 1 == count && obj != tail) {
        warn(fmt::format("{}: the chain's last object is 0x{:x}, not its tail 0x{:x}", where, obj, tail), true,
             "cache list");
        return;
      }
      obj = *next;
    }
  }

  void collect_thread_caches() {
    if (!rt_.thread_heaps) return;
    const auto first = image_.read_u64(rt_.thread_heaps);
    if (!first) {
      warn("tcmalloc's thread cache list head cannot be read: cached objects are shown as in use", true);
      return;
    }
    std::unordered_set<Address> seen;
    const ThreadCacheLayout& tl = l_.thread_cache;
    for (Address cache = *first; cache; ) {
      if (seen.size() >= kMaxThreadCaches || !seen.insert(cache).second) {
        warn(fmt::format("tcmalloc's thread cache list loops or is longer than {} caches; stopped at 0x{:x}",
                         kMaxThreadCaches, cache),
             true);
        return;
      }
      std::vector<std::uint8_t> bytes(tl.next + 16);
      if (!image_.read_exact(cache, bytes.data(), bytes.size())) {
        warn(fmt::format("tcmalloc thread cache 0x{:x} cannot be read; the caches after it are not walked", cache),
             true);
        return;
      }
      auto u64 = [&](std::uint64_t off) {
        std::uint64_t v;
        std::memcpy(&v, bytes.data() + off, 8);
        return v;
      };
      auto u32 = [&](std::uint64_t off) {
        std::uint32_t v;
        std::memcpy(&v, bytes.data() + off, 4);
        return v;
      };
      // Each free list knows its class's object size: a check that this is a thread cache at all.
      bool sizes_match = true;
      for (std::size_t c = 1; c < rt_.classes.size(); ++c)
        if (u32(c * tl.free_list_stride + tl.list_object_size) != rt_.classes[c].size) sizes_match = false;
      if (!sizes_match) {
        warn(fmt::format("0x{:x} on tcmalloc's thread cache list does not look like a thread cache (its lists' "
                         "object sizes differ from the size classes); the caches from there on are not walked",
                         cache),
             true);
        return;
      }
      model_.metadata.push_back({cache, cache + tl.object_bytes});
      for (std::size_t c = 1; c < rt_.classes.size(); ++c) {
        const std::uint64_t list = c * tl.free_list_stride;
        const std::uint32_t length = u32(list + tl.list_length);
        if (length > kMaxThreadCacheList) {
          warn(fmt::format("thread cache 0x{:x}: class {} claims {} objects", cache, c, length), true, "cache list");
          continue;
        }
        follow_cached_list(u64(list), length, static_cast<std::uint32_t>(c), 0,
                           fmt::format("thread cache 0x{:x}, size class {}", cache, c));
      }
      cache = u64(tl.next);
    }
  }

  void collect_transfer_caches() {
    const CentralFreeListLayout& cl = l_.central;
    for (std::size_t c = 1; c < rt_.classes.size(); ++c) {
      const Address list = rt_.central_cache + c * cl.stride;
      if (!is_central_list(image_, l_, list, c)) {
        warn(fmt::format("the central free list of size class {} (0x{:x}) is damaged: its transfer cache is not "
                         "read, and objects cached there show as in use",
                         c, list),
             true, "transfer cache");
        continue;
      }
      const std::uint32_t used = image_.read_u32(list + cl.used_slots).value_or(0);  // checked: at most 64
      for (std::uint32_t s = 0; s < used; ++s) {
        const auto head = image_.read_u64(list + cl.tc_slots + 16 * s);
        const auto tail = image_.read_u64(list + cl.tc_slots + 16 * s + 8);
        if (!head || !tail) continue;
        follow_cached_list(*head, rt_.classes[c].move_count, static_cast<std::uint32_t>(c), *tail,
                           fmt::format("transfer cache of size class {}, slot {}", c, s));
      }
    }
  }

  void walk_page_map() {
    const PageHeapLayout& pl = l_.pageheap;
    constexpr std::size_t kRootLength = std::size_t{1} << PageHeapLayout::kRootBits;
    constexpr std::size_t kLeafLength = std::size_t{1} << PageHeapLayout::kLeafBits;
    std::vector<std::uint64_t> root(kRootLength);
    if (!image_.read_exact(rt_.pageheap + pl.pagemap_root, root.data(), root.size() * 8)) {
      warn("tcmalloc's page map root cannot be read: no spans were walked", true);
      return;
    }
    std::vector<std::uint64_t> leaf(kLeafLength);
    std::uint64_t next_page = 0;
    std::size_t spans = 0;
    for (std::size_t i1 = 0; i1 < kRootLength; ++i1) {
      if (!root[i1]) continue;
      if (!image_.read_exact(root[i1], leaf.data(), leaf.size() * 8)) {
        warn(fmt::format("tcmalloc page map leaf 0x{:x} (pages 0x{:x}-0x{:x}) cannot be read; its spans are "
                         "missing",
                         root[i1], i1 << PageHeapLayout::kLeafBits, ((i1 + 1) << PageHeapLayout::kLeafBits) - 1),
             true);
        continue;
      }
      model_.metadata.push_back({root[i1], root[i1] + 8 * kLeafLength});
      for (std::size_t i2 = 0; i2 < kLeafLength; ++i2) {
        const std::uint64_t page = (std::uint64_t{i1} << PageHeapLayout::kLeafBits) | i2;
        if (page < next_page || !leaf[i2]) continue;
        SpanInfo span;
        if (!read_span(leaf[i2], &span)) {
          warn(fmt::format("page 0x{:x}: its Span 0x{:x} cannot be read", page, leaf[i2]), true, "span");
          continue;
        }
        if (span.start != page) continue;  // an inner page, or a stale entry of a span merged away
        if (span.length == 0 || span.length > kMaxSpanPages || page + span.length > kPageNumberLimit) {
          warn(fmt::format("span 0x{:x} at page 0x{:x} has a bad length of {} pages; skipped", span.address, page,
                           span.length),
               true, "span");
          continue;
        }
        if (++spans > kMaxSpans) {
          warn(fmt::format("more than {} spans in tcmalloc's page map; the rest is not walked", kMaxSpans), true);
          return;
        }
        add_span(span);
        next_page = page + span.length;
      }
    }
  }

  // The page heap's own counters (PageHeap::stats_) beside the walk's spans.
  void add_figures() {
    std::uint64_t stats[3];
    const bool readable = image_.read_exact(rt_.pageheap + l_.pageheap.stats, stats, sizeof stats);
    auto own = [&](int i) { return readable ? std::optional<std::uint64_t>(stats[i]) : std::nullopt; };
    std::uint64_t span_bytes = 0;
    for (const HeapSegment& h : arena_.heaps) span_bytes += h.end - h.start;
    model_.figures = {
        {"pageheap system_bytes", "bytes the page heap got from the system; the walk's: all spans", own(0), span_bytes},
        {"pageheap free_bytes", "bytes of free spans still mapped; the walk's: spans on the normal free lists", own(1),
         free_span_bytes_},
        {"pageheap unmapped_bytes", "bytes of free spans returned to the system; the walk's: spans on the returned "
         "free lists",
         own(2), returned_span_bytes_},
    };
  }

  bool read_span(Address at, SpanInfo* span) const {
    std::uint64_t words[6];
    if ((at & 7) || !image_.read_exact(at, words, sizeof words)) return false;
    const SpanLayout& sl = l_.span;
    span->address = at;
    span->start = words[sl.start / 8];
    span->length = words[sl.length / 8];
    span->objects = words[sl.objects / 8];
    const std::uint64_t bits = words[sl.bits / 8];
    span->size_class = static_cast<std::uint32_t>((bits >> SpanLayout::kSizeClassShift) & 0xff);
    span->location = static_cast<unsigned>((bits >> SpanLayout::kLocationShift) & 3);
    return true;
  }

  void add_segment(Address start, Address end) {
    if (!arena_.heaps.empty() && arena_.heaps.back().end == start)
      arena_.heaps.back().end = end;
    else
      arena_.heaps.push_back({start, end});
  }

  void push(Address at, std::uint64_t bytes, BlockState state) {
    const Block b = Block::bare(at, bytes, state, 0);
    model_.blocks.push_back(b);
    arena_.totals[static_cast<int>(state)].add(b.chunk_size());
  }

  void add_span(const SpanInfo& span) {
    const Address base = span.start << kPageShift;
    const std::uint64_t bytes = span.length << kPageShift;
    add_segment(base, base + bytes);
    if (span.location != SpanLayout::kInUse) {
      (span.location == SpanLayout::kOnReturnedFreeList ? returned_span_bytes_ : free_span_bytes_) += bytes;
      ++(span.location == SpanLayout::kOnReturnedFreeList ? returned_spans_ : free_spans_);
      push(base, bytes, BlockState::free);
      return;
    }
    if (span.size_class == 0) {  // one large (or sampled) allocation
      push(base, bytes, BlockState::in_use);
      return;
    }
    if (span.size_class >= rt_.classes.size()) {
      warn(fmt::format("span 0x{:x} at 0x{:x} names size class {} of {}; taken as one block", span.address, base,
                       span.size_class, rt_.classes.size()),
           true, "span");
      push(base, bytes, BlockState::in_use);
      return;
    }
    const SizeClass& cls = rt_.classes[span.size_class];
    if (cls.pages != span.length)
      warn(fmt::format("span 0x{:x} of size class {} has {} pages, not the class's {}", span.address,
                       span.size_class, span.length, cls.pages),
           false, "span length");
    const std::uint64_t count = bytes / cls.size;
    std::vector<BlockState> states(count, BlockState::in_use);
    // The span's own free list: the central free list's objects of this span.
    Address obj = span.objects;
    for (std::uint64_t i = 0; obj != 0; ++i) {
      const std::uint64_t offset = obj - base;
      if (obj < base || offset >= count * cls.size || offset % cls.size) {
        warn(fmt::format("span 0x{:x}: its free list leads to 0x{:x}, not one of its objects; the rest of that list "
                         "is shown as in use",
                         span.address, obj),
             true, "span free list");
        break;
      }
      if (i >= count || states[offset / cls.size] == BlockState::free) {
        warn(fmt::format("span 0x{:x}: its free list loops", span.address), true, "span free list");
        break;
      }
      states[offset / cls.size] = BlockState::free;
      const auto next = image_.read_u64(obj);
      if (!next) {
        warn(fmt::format("span 0x{:x}: free object 0x{:x} cannot be read", span.address, obj), true,
             "span free list");
        break;
      }
      obj = *next;
    }
    if (classes_.size() < rt_.classes.size()) classes_.resize(rt_.classes.size());
    SizeClassUse& use = classes_[span.size_class];
    use.object_bytes = cls.size;
    ++use.slabs;
    use.slab_bytes += bytes;
    for (std::uint64_t i = 0; i < count; ++i) {
      const Address at = base + i * cls.size;
      BlockState state = states[i];
      if (state != BlockState::free) {
        if (const auto it = cached_.find(at); it != cached_.end() && it->second == span.size_class) {
          state = BlockState::tcache;
          ++cached_matched_;
        }
      }
      ++(state == BlockState::free ? use.free : state == BlockState::tcache ? use.cached : use.in_use);
      push(at, cls.size, state);
    }
    arena_.overhead_bytes += bytes - count * cls.size;
  }

  const Image& image_;
  const Runtime& rt_;
  const Layout& l_;
  HeapModel model_;
  ArenaInfo arena_;
  std::unordered_map<Address, std::uint32_t> cached_;  // object → size class: thread and transfer caches
  std::size_t cached_matched_ = 0;
  std::uint64_t free_span_bytes_ = 0, returned_span_bytes_ = 0, free_spans_ = 0, returned_spans_ = 0;
  std::vector<SizeClassUse> classes_;  // by size class
  std::unordered_map<std::string, std::size_t> warnings_of_, suppressed_;
};

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& runtime) { return Walker(image, runtime).run(); }

}  // namespace heapscope::tcmalloc
