#include "runtime/boehm/boehm_heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <unordered_map>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/boehm/boehm_layout.h"

namespace heapscope::boehm {

namespace {

// Bounds of every loop over the collector's own data: beyond them the data is taken as damaged.
constexpr std::size_t kMaxHeapSections = std::size_t{1} << 20;
constexpr std::size_t kMaxBottomIndices = std::size_t{1} << 20;
constexpr std::size_t kMaxListLength = std::size_t{1} << 26;
constexpr std::size_t kMaxFindingsListed = 64;
constexpr Address kHighestUserAddress = Address{1} << 47;

std::string hex(Address a) { return fmt::format("{:#x}", a); }

struct Header {
  Address block = 0;
  std::uint8_t kind = 0, flags = 0;
  std::uint64_t object_bytes = 0;
};

class Walker {
 public:
  Walker(const Image& image, const Runtime& rt, HeapVerification* check) : image_(image), rt_(rt), check_(check) {}

  HeapModel run() {
    model_.allocator = "Boehm GC";
    model_.version = rt_.version;
    model_.state_labels = {"in use", "", "free", "thread-local free lists", "", ""};
    model_.discovery = rt_.discovery;
    model_.warnings = rt_.warnings;
    arena_.address = rt_.arrays;
    arena_.is_main = false;  // beside malloc's arenas, whose main arena is malloc's
    arena_.system_bytes = read(rt_.arrays + ArraysLayout::heap_size);
    {
      PhaseTimer timer("walk: Boehm GC index");
      read_bottom_indices();
      read_sections();
      collect_free_lists();
      collect_reclaim_lists();
    }
    {
      PhaseTimer timer("walk: Boehm GC blocks");
      for (const HeapSegment& section : sections_) walk_section(section);
    }
    report_unmatched_free_objects();
    add_metadata();
    add_figures();
    for (const auto& [bytes, use] : classes_) model_.size_classes.push_back(use);
    model_.free_pages = {
        {"free blocks", "free runs of heap blocks, still mapped: GC_get_free_bytes()", free_runs_, free_bytes_},
        {"unmapped blocks", "free runs whose pages went back to the system (munmap), mapped again on reuse",
         unmapped_runs_, unmapped_bytes_},
        {"unswept garbage", "objects the last collection found unreachable, in blocks its lazy sweep has not reached: "
         "free once the program next allocates their size", unswept_blocks_, unswept_bytes_},
    };
    arena_.heaps = sections_;
    model_.collector = rt_.rules;
    model_.collector->name = "Boehm GC";
    model_.collector->arena = static_cast<std::uint16_t>(model_.arenas.size());
    model_.collector->page_bytes = kBlockBytes;
    model_.collector->anonymous_roots = procedure_marked_;
    model_.arenas.push_back(std::move(arena_));
    if (check_)
      check_->checked_in_own_words.push_back(fmt::format(
          "Boehm GC: {} heap section{} ({} stretch{}), {} block header{}, {} free-list entries, {} on {} thread{}' local "
          "free lists, {} block{} waiting for the sweep",
          counted_.sections, counted_.sections == 1 ? "" : "s", sections_.size(), sections_.size() == 1 ? "" : "es",
          counted_.headers, counted_.headers == 1 ? "" : "s", counted_.free_entries, counted_.local_entries,
          counted_.local_lists, counted_.local_lists == 1 ? "" : "s", queued_.size(), queued_.size() == 1 ? "" : "s"));
    return std::move(model_);
  }

 private:
  std::uint64_t read(Address at) const { return image_.read_u64(at).value_or(0); }

  // A problem in the collector's structures: the model is partial, and `verify` lists it.
  void damage(const char* kind, Address where, std::string expected, std::string found, std::string place,
              std::string affects) {
    model_.complete = false;
    arena_.complete = false;
    if (++damage_count_ <= 8)
      model_.warnings.push_back(fmt::format("Boehm GC {} at {} ({}): expected {}, found {}; {}", kind, hex(where),
                                            place, expected, found, affects));
    if (!check_) return;
    if (check_->findings.size() >= kMaxFindingsListed) {
      ++check_->findings_dropped;
      return;
    }
    check_->findings.push_back({.kind = kind, .chunk = where, .expected = std::move(expected),
                                .found = std::move(found), .arena = rt_.arrays, .where = std::move(place),
                                .affects = std::move(affects)});
  }

  // GC_all_bottom_indices lists every bottom index in ascending key order.
  void read_bottom_indices() {
    Address bi = read(rt_.arrays + ArraysLayout::all_bottom_indices);
    std::uint64_t last_key = 0;
    for (std::size_t n = 0; bi != 0; ++n) {
      if (n == kMaxBottomIndices) {
        damage("bottom_index", bi, "a list ending within 2^20 indices", "a longer list (a loop?)",
               "GC_all_bottom_indices", "blocks past it have no header: they are not walked");
        break;
      }
      std::vector<std::uint64_t> entries(BottomIndexLayout::entries);
      const std::uint64_t key = read(bi + BottomIndexLayout::key);
      if (image_.read(bi, entries.data(), entries.size() * 8) != entries.size() * 8 || (n > 0 && key <= last_key)) {
        damage("bottom_index", bi, "a readable index with a key above the one before", hex(key),
               "GC_all_bottom_indices", "blocks past it have no header: they are not walked");
        break;
      }
      last_key = key;
      bottom_.emplace(key, std::move(entries));
      model_.metadata.push_back({bi, bi + BottomIndexLayout::size});
      bi = read(bi + BottomIndexLayout::asc_link);
    }
  }

  // The header entry of the block at `block`: a header's address, a forwarding count, or 0.
  std::uint64_t header_entry(Address block) const {
    const auto it = bottom_.find(block >> (kLogBlockBytes + BottomIndexLayout::log_entries));
    if (it == bottom_.end()) return 0;
    return it->second[(block >> kLogBlockBytes) & (BottomIndexLayout::entries - 1)];
  }

  void read_sections() {
    const std::uint64_t count = read(rt_.arrays + ArraysLayout::n_heap_sects);
    const Address array = read(rt_.arrays + ArraysLayout::heap_sects);
    if (count > kMaxHeapSections || array == 0) {
      damage("heap_section", rt_.arrays + ArraysLayout::n_heap_sects, "a count of heap sections and their array",
             fmt::format("{} sections at {}", count, hex(array)), "GC_heap_sects", "no block of the heap is walked");
      return;
    }
    std::vector<std::array<std::uint64_t, 2>> raw(count);
    if (image_.read(array, raw.data(), count * 16) != count * 16) {
      damage("heap_section", array, "a readable array of heap sections", "unreadable memory", "GC_heap_sects",
             "no block of the heap is walked");
      return;
    }
    model_.metadata.push_back({array, array + count * 16});
    for (const auto& [start, bytes] : raw) {
      if (start % kBlockBytes != 0 || bytes % kBlockBytes != 0 || bytes == 0 || start + bytes > kHighestUserAddress) {
        damage("heap_section", array, "a section of whole heap blocks", fmt::format("{} bytes at {}", bytes, hex(start)),
               "GC_heap_sects", "that section is not walked");
        continue;
      }
      sections_.push_back({start, start + bytes});
    }
    std::sort(sections_.begin(), sections_.end(), [](auto& a, auto& b) { return a.start < b.start; });
    counted_.sections = sections_.size();
    // Adjacent sections are one stretch of blocks: a run (free or a large object) may span them.
    std::vector<HeapSegment> merged;
    for (const HeapSegment& s : sections_) {
      if (!merged.empty() && merged.back().end == s.start) merged.back().end = s.end;
      else merged.push_back(s);
    }
    sections_ = std::move(merged);
  }

  // Follows one free list; each object it names is recorded with the size its list is for (0: any).
  void follow_list(Address head, std::uint64_t bytes, bool thread_local_list, const std::string& place) {
    Address p = head;
    for (std::size_t n = 0; p != 0; ++n) {
      if (n == kMaxListLength || p % kGranuleBytes != 0 || p >= kHighestUserAddress) {
        damage("free_list_link", p, "a granule-aligned object, the list ending within 2^26 entries",
               n == kMaxListLength ? "a longer list (a loop?)" : "a misaligned or impossible address", place,
               "the rest of the list counts as in use");
        return;
      }
      (thread_local_list ? cached_ : free_)[p] = bytes;
      ++(thread_local_list ? counted_.local_entries : counted_.free_entries);
      const WordRead next = image_.read_u64(p);
      if (!next) {
        damage("free_list_link", p, "a readable free object", "unreadable memory", place,
               "the rest of the list counts as in use");
        return;
      }
      p = *next;
    }
  }

  void collect_free_lists() {
    for (std::size_t k = 0; k < rt_.kind_free_lists.size(); ++k) {
      std::array<std::uint64_t, kFreeListCount> heads{};
      if (image_.read(rt_.kind_free_lists[k], heads.data(), sizeof heads) != sizeof heads) {
        damage("free_list_link", rt_.kind_free_lists[k], "readable free list heads", "unreadable memory",
               fmt::format("free lists of kind {}", k), "that kind's free objects count as in use");
        continue;
      }
      for (unsigned g = 1; g < kFreeListCount; ++g)
        if (heads[g] != 0)
          follow_list(heads[g], g * kGranuleBytes, false,
                      fmt::format("free list of {}-byte {} objects", g * kGranuleBytes, kind_name(k)));
    }
    for (const auto& [thread, lists] : rt_.thread_free_lists) {
      std::array<std::uint64_t, ThreadFreeListsLayout::heads> heads{};
      if (image_.read(lists, heads.data(), sizeof heads) != sizeof heads) continue;  // an exiting thread's
      ++counted_.local_lists;
      for (unsigned i = 0; i < heads.size(); ++i) {
        // A small value counts allocations, not a list; the gcj lists' guard is all ones.
        if (heads[i] < kBlockBytes || heads[i] >= kHighestUserAddress) continue;
        const unsigned granules = i % ThreadFreeListsLayout::per_kind;
        follow_list(heads[i], granules * kGranuleBytes, true,
                    fmt::format("local free list of {}-granule objects of thread {}", granules, thread + 1));
      }
    }
  }

  // The blocks each kind's reclaim lists hold (chained through their headers' hb_next): blocks the last
  // collection left for a lazy sweep, so their mark bytes are still that collection's.
  void collect_reclaim_lists() {
    for (std::size_t k = 0; k < rt_.kind_reclaim_lists.size(); ++k) {
      if (rt_.kind_reclaim_lists[k] == 0) continue;
      std::array<std::uint64_t, kFreeListCount> heads{};
      if (image_.read(rt_.kind_reclaim_lists[k], heads.data(), sizeof heads) != sizeof heads) continue;
      for (unsigned g = 1; g < kFreeListCount; ++g) {
        Address block = heads[g];
        for (std::size_t n = 0; block != 0; ++n) {
          const std::uint64_t entry = header_entry(block);
          if (n == kMaxListLength || entry <= BottomIndexLayout::max_jump) {
            damage("reclaim_list", block, "a heap block with a header, the list ending",
                   n == kMaxListLength ? "a longer list (a loop?)" : "no header",
                   fmt::format("reclaim list of {}-byte {} objects", g * kGranuleBytes, kind_name(k)),
                   "the rest of the list's garbage counts as in use");
            break;
          }
          queued_.emplace(block, entry);
          block = read(entry + HeaderLayout::next);
        }
      }
    }
  }

  static std::string kind_name(std::size_t k) {
    return k < std::size(kKindNames) ? kKindNames[k] : fmt::format("kind {}", k);
  }

  std::optional<Header> read_header(Address block) {
    const std::uint64_t entry = header_entry(block);
    if (entry <= BottomIndexLayout::max_jump) {
      damage("block_header", block, "a header for each heap block",
             entry == 0 ? std::string("none") : fmt::format("a block {} blocks into a large object", entry),
             "heap section " + hex(current_section_), "the rest of the section is not walked");
      return std::nullopt;
    }
    std::array<std::uint8_t, HeaderLayout::object_bytes + 8> raw{};
    if (image_.read(entry, raw.data(), raw.size()) != raw.size()) {
      damage("block_header", block, "a readable header", "unreadable memory at " + hex(entry),
             "heap section " + hex(current_section_), "the rest of the section is not walked");
      return std::nullopt;
    }
    Header h;
    std::memcpy(&h.block, raw.data() + HeaderLayout::block, 8);
    h.kind = raw[HeaderLayout::kind];
    h.flags = raw[HeaderLayout::flags];
    std::memcpy(&h.object_bytes, raw.data() + HeaderLayout::object_bytes, 8);
    if (!(h.flags & HeaderLayout::free_block) && h.block != block) {  // free runs' headers leave it unset
      damage("block_header", block, "a header naming its block", "one naming " + hex(h.block),
             "heap section " + hex(current_section_), "the rest of the section is not walked");
      return std::nullopt;
    }
    headers_.push_back({entry, entry + HeaderLayout::size});
    return h;
  }

  // An object of `kind`: pointer-free where the collector never scans its kind, uncollectable where it
  // never frees it; an allocated one of a kind marked through a procedure is noted
  // (CollectorRules::anonymous_roots).
  Block object_block(Address at, std::uint64_t size, BlockState state, unsigned kind) {
    Block b = Block::bare(at, size, state, 0);
    b.pointer_free = kind < rt_.kind_pointer_free.size() ? rt_.kind_pointer_free[kind] : kind_is_pointer_free(kind);
    b.uncollectable = kind_is_uncollectable(kind);
    procedure_marked_ = procedure_marked_ || (is_allocated(state) && kind < rt_.kind_marked_by_procedure.size() &&
                                              rt_.kind_marked_by_procedure[kind]);
    return b;
  }

  void add(const Block& b) {
    model_.blocks.push_back(b);
    arena_.totals[static_cast<int>(b.state)].add(b.chunk_size());
  }

  void walk_section(const HeapSegment& section) {
    current_section_ = section.start;
    Address at = section.start;
    while (at < section.end) {
      if (((at >> kLogBlockBytes) & 0xfff) == 0) progress_check();
      const std::optional<Header> h = read_header(at);
      if (!h) return;
      ++counted_.headers;
      const std::uint64_t left = section.end - at;
      if (h->flags & HeaderLayout::free_block) {
        if (h->object_bytes == 0 || h->object_bytes % kBlockBytes != 0 || h->object_bytes > left) {
          damage("block_header", at, "a free run of whole blocks inside its section",
                 fmt::format("{} bytes", h->object_bytes), "heap section " + hex(section.start),
                 "the rest of the section is not walked");
          return;
        }
        const bool unmapped = h->flags & HeaderLayout::was_unmapped;
        (unmapped ? unmapped_runs_ : free_runs_) += 1;
        (unmapped ? unmapped_bytes_ : free_bytes_) += h->object_bytes;
        add(Block::bare(at, h->object_bytes, BlockState::free, 0));
        at += h->object_bytes;
        continue;
      }
      const std::uint64_t size = h->object_bytes;
      if (size == 0 || size % kGranuleBytes != 0 || size > Block::kMaxBareBytes ||
          (size + kBlockBytes - 1) / kBlockBytes * kBlockBytes > left) {
        damage("block_header", at, "objects of whole granules inside the section", fmt::format("{} bytes", size),
               "heap section " + hex(section.start), "the rest of the section is not walked");
        return;
      }
      if (size > kMaxSmallObjectBytes) {  // a large object alone in its run of blocks
        const std::uint64_t run = (size + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
        add(object_block(at, size, BlockState::in_use, h->kind));
        arena_.overhead_bytes += run - size;
        at += run;
        continue;
      }
      SizeClassUse& use = classes_[size];
      use.object_bytes = size;
      ++use.slabs;
      use.slab_bytes += kBlockBytes;
      const std::uint64_t objects = kBlockBytes / size;
      // A block waiting for the sweep: its unmarked objects are garbage the last collection found, which
      // the sweep puts on the free list when the program next allocates their size.
      std::array<std::uint8_t, kBlockBytes / kGranuleBytes> marks{};
      const auto queued = queued_.find(at);
      const bool unswept = queued != queued_.end() &&
                           image_.read(queued->second + HeaderLayout::marks, marks.data(), marks.size()) == marks.size();
      unswept_blocks_ += unswept;
      for (std::uint64_t i = 0; i < objects; ++i) {
        const Address object = at + i * size;
        BlockState state = BlockState::in_use;
        if (unswept && marks[i * size / kGranuleBytes] == 0) {
          state = BlockState::free;
          ++use.free;
          unswept_bytes_ += size;
        } else if (const auto it = free_.find(object); it != free_.end()) {
          state = BlockState::free;
          matched(it->second, size, object);
          ++use.free;
        } else if (const auto c = cached_.find(object); c != cached_.end()) {
          state = BlockState::tcache;
          matched(c->second, size, object);
          ++use.cached;
        } else {
          ++use.in_use;
        }
        add(object_block(object, size, state, h->kind));
      }
      arena_.overhead_bytes += kBlockBytes - objects * size;
      at += kBlockBytes;
    }
  }

  void matched(std::uint64_t list_bytes, std::uint64_t block_bytes, Address object) {
    ++matched_;
    if (list_bytes != 0 && list_bytes != block_bytes)
      damage("free_list_object", object, fmt::format("a {}-byte object, as its free list holds", list_bytes),
             fmt::format("an object of a block of {}-byte objects", block_bytes), "free lists",
             "it counts as free at its block's size");
  }

  void report_unmatched_free_objects() {
    if (sections_.empty()) return;  // nothing was walked to match them against: the sections' damage says so
    const std::size_t listed = free_.size() + cached_.size();
    if (matched_ < listed)
      damage("free_list_object", 0, "free list entries that are objects of small-object blocks",
             fmt::format("{} of {} entries are not", listed - matched_, listed), "free lists",
             "they are left out");
  }

  // The collector's bookkeeping outside the heap: never roots (headers, indices and mark stacks name heap
  // blocks and objects without keeping them alive).
  void add_metadata() {
    std::vector<HeapSegment>& m = model_.metadata;
    m.insert(m.end(), headers_.begin(), headers_.end());
    Address hdr = read(rt_.arrays + ArraysLayout::hdr_free_list);  // headers kept for reuse, stale
    for (std::size_t n = 0; hdr != 0 && n < kMaxListLength; ++n) {
      m.push_back({hdr, hdr + HeaderLayout::size});
      const WordRead next = image_.read_u64(hdr + HeaderLayout::next);
      if (!next) break;
      hdr = *next;
    }
    const Address mark_stack = read(rt_.arrays + ArraysLayout::mark_stack);
    const Address mark_stack_limit = read(rt_.arrays + ArraysLayout::mark_stack_limit);
    if (mark_stack != 0 && mark_stack < mark_stack_limit) m.push_back({mark_stack, mark_stack_limit});
    constexpr std::uint64_t kLocalMarkStackBytes = 4096 * 16;
    if (const Address local = read(rt_.arrays + ArraysLayout::main_local_mark_stack))
      m.push_back({local, local + kLocalMarkStackBytes});
    for (const Address reclaim : rt_.kind_reclaim_lists)
      if (reclaim != 0) m.push_back({reclaim, reclaim + kFreeListCount * 8});
    // GC_arrays itself but the words that hold the collector's own roots (its finalization tables).
    Address from = rt_.arrays;
    for (const auto& [offset, bytes] : kArraysRootWords) {
      if (rt_.arrays + offset > from) m.push_back({from, rt_.arrays + offset});
      from = rt_.arrays + offset + bytes;
    }
    m.push_back({from, rt_.arrays + ArraysLayout::size});
    std::sort(m.begin(), m.end(), [](auto& a, auto& b) { return a.start < b.start; });
    std::vector<HeapSegment> merged;
    for (const HeapSegment& s : m) {
      if (!merged.empty() && s.start <= merged.back().end) merged.back().end = std::max(merged.back().end, s.end);
      else merged.push_back(s);
    }
    m = std::move(merged);
  }

  void add_figures() {
    std::uint64_t section_bytes = 0;
    for (const HeapSegment& s : sections_) section_bytes += s.end - s.start;
    const std::uint64_t large_free = read(rt_.arrays + ArraysLayout::large_free_bytes);
    const std::uint64_t unmapped = read(rt_.arrays + ArraysLayout::unmapped_bytes);
    model_.figures = {
        {"GC_get_heap_size()", "the heap's bytes: its sections, every block free or not", arena_.system_bytes,
         section_bytes},
        {"GC_get_free_bytes()", "free runs of blocks still mapped (GC_large_free_bytes less unmapped bytes)",
         large_free - unmapped, free_bytes_},
        {"GC_get_unmapped_bytes()", "free runs whose pages went back to the system", unmapped, unmapped_bytes_},
    };
  }

  const Image& image_;
  const Runtime& rt_;
  HeapVerification* check_;
  HeapModel model_;
  ArenaInfo arena_;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> bottom_;
  std::vector<HeapSegment> sections_;
  std::vector<HeapSegment> headers_;
  std::unordered_map<Address, std::uint64_t> free_, cached_;  // object → its list's object size (0: any)
  std::size_t matched_ = 0;
  std::map<std::uint64_t, SizeClassUse> classes_;
  std::uint64_t free_runs_ = 0, free_bytes_ = 0, unmapped_runs_ = 0, unmapped_bytes_ = 0;
  std::size_t damage_count_ = 0;
  std::unordered_map<Address, Address> queued_;  // blocks on reclaim lists → their headers
  std::uint64_t unswept_blocks_ = 0, unswept_bytes_ = 0;
  struct {
    std::uint64_t sections = 0, headers = 0, free_entries = 0, local_entries = 0, local_lists = 0;
  } counted_;
  Address current_section_ = 0;
  bool procedure_marked_ = false;
};

}  // namespace

HeapModel walk_heap(const Image& image, const Runtime& rt) { return Walker(image, rt, nullptr).run(); }

HeapVerification verify_heap(const Image& image, const Runtime& rt) {
  HeapVerification out;
  Walker(image, rt, &out).run();
  return out;
}

}  // namespace heapscope::boehm
