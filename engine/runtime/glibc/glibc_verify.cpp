#include "runtime/glibc/glibc_verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "image/memory_cursor.h"
#include "base/phase_timer.h"

namespace heapscope::glibc {

namespace {

// A heap overwritten with garbage could yield a finding per chunk; the first ones say what happened.
constexpr std::size_t kMaxFindings = 500;

std::string hex(Address a) { return fmt::format("0x{:x}", a); }

// glibc's bin_index() for x86-64 chunk sizes: small bins hold one size each (size / 16), large bins
// ranges that widen with size (largebin_index_64).
int bin_index_for(std::uint64_t size) {
  if (size < 1024) return static_cast<int>(size >> 4);
  if ((size >> 6) <= 48) return static_cast<int>(48 + (size >> 6));
  if ((size >> 9) <= 20) return static_cast<int>(91 + (size >> 9));
  if ((size >> 12) <= 10) return static_cast<int>(110 + (size >> 12));
  if ((size >> 15) <= 4) return static_cast<int>(119 + (size >> 15));
  if ((size >> 18) <= 2) return static_cast<int>(124 + (size >> 18));
  return 126;
}

std::string bin_name(int bin) {
  if (bin == 1) return "unsorted bin";
  return fmt::format("{} bin {}", bin < 64 ? "small" : "large", bin);
}

// The kinds of singly linked list glibc keeps: they differ in where links point and what they hold.
struct SinglyLinkedList {
  std::string kind;                // "tcache" or "fastbin": the prefix of its findings' kinds
  std::string name;                // for `where`
  Address head_entry = 0;          // the head pointer as stored (plain, not safe-linked)
  bool links_to_user = false;      // tcache links point at user memory, fastbin links at chunk headers
  std::uint64_t expected_size = 0;
  std::optional<std::uint16_t> arena;  // fastbin chunks belong to their arena; tcache chunks to any
  std::optional<std::uint64_t> count;  // a tcache bin's count
};

class Verifier {
 public:
  Verifier(const Image& image, const Runtime& rt, const HeapModel& model)
      : image_(image), rt_(rt), model_(model), mem_(image) {}

  HeapVerification run() {
    for (std::uint16_t a = 0; a < model_.arenas.size(); ++a) {
      ++out_.checked.arenas;
      out_.checked.heaps += model_.arenas[a].heaps.size();
      check_walk_stops(a);
      if (!model_.arenas[a].is_main) check_heap_chain(a);
      check_top(a);
    }
    check_chunks();
    check_bins();
    for (std::uint16_t a = 0; a < model_.arenas.size(); ++a) check_fastbins(a);
    check_tcaches();
    return std::move(out_);
  }

 private:
  const Image& image_;
  const Runtime& rt_;
  const HeapModel& model_;
  MemoryCursor mem_;
  HeapVerification out_;
  std::vector<std::string> list_names_;               // every free list walked
  std::unordered_map<Address, std::size_t> listed_;  // chunk → the list (index) it was first found on

  void add(HeapFinding f) {
    if (out_.findings.size() < kMaxFindings) out_.findings.push_back(std::move(f));
    else ++out_.findings_dropped;
  }

  const Block* block_at(Address chunk) const {
    const Block* b = model_.block_containing(chunk);
    return b && b->chunk == chunk ? b : nullptr;
  }

  const HeapSegment* segment_of(std::uint16_t arena, Address addr) const {
    for (const HeapSegment& s : model_.arenas[arena].heaps)
      if (addr >= s.start && addr < s.end) return &s;
    return nullptr;
  }

  std::optional<std::uint16_t> arena_holding(Address addr) const {
    for (std::uint16_t a = 0; a < model_.arenas.size(); ++a)
      if (segment_of(a, addr)) return a;
    return std::nullopt;
  }

  // Inside the part of a heap the walk skipped after damage: nothing there can be checked.
  bool beyond_walk_stop(Address addr) const {
    for (std::uint16_t a = 0; a < model_.arenas.size(); ++a)
      for (const WalkStop& stop : model_.arenas[a].walk_stops)
        if (const HeapSegment* s = segment_of(a, stop.chunk); s && addr >= stop.chunk && addr < s->end) return true;
    return false;
  }

  // --- heaps and their headers ---

  void check_walk_stops(std::uint16_t a) {
    const ArenaInfo& arena = model_.arenas[a];
    for (const WalkStop& stop : arena.walk_stops) {
      const HeapSegment* seg = segment_of(a, stop.heap);
      const Address end = seg ? seg->end : stop.chunk;
      const auto size_field = mem_.u64(stop.chunk + 8);
      add({.kind = "chunk_header",
           .chunk = stop.chunk,
           .expected = fmt::format("a size that is a multiple of 16, at least {}, ending at or before the heap's "
                                   "end {} (at the top chunk or a fencepost)", kMinChunkSize, hex(end)),
           .found = size_field ? fmt::format("size field {}", hex(*size_field)) : "a header not in the image",
           .last_good = stop.last_good,
           .arena = arena.address,
           .heap = stop.heap,
           .where = "heap",
           .affects = fmt::format("the rest of this heap ({} bytes from the damaged chunk) is not walked: its blocks "
                                  "are missing from blocks, leaks, top, histogram and fragmentation, and the "
                                  "arena's totals and mallinfo are partial", end > stop.chunk ? end - stop.chunk : 0)});
    }
  }

  // A non-main arena's heaps are linked newest to oldest by heap_info.prev, starting at the heap holding
  // top. The walker stops at the first heap_info that does not belong to the arena; name it.
  void check_heap_chain(std::uint16_t a) {
    const ArenaInfo& arena = model_.arenas[a];
    const auto top = image_.read_u64(arena.address + rt_.layout.arena.top);
    if (!top) return;  // check_top reports it
    const std::uint64_t align = rt_.heap_alignment();
    Address heap = *top & ~(align - 1);
    Address last_good_heap = 0;
    std::unordered_set<Address> seen;
    while (heap != 0 && seen.insert(heap).second) {
      const bool walked = std::any_of(arena.heaps.begin(), arena.heaps.end(),
                                      [&](const HeapSegment& s) { return s.start == heap; });
      if (!walked) {
        report_heap_info(arena, heap, last_good_heap);
        return;
      }
      check_heap_info_sizes(arena, heap, last_good_heap);
      if (heap + rt_.layout.heap_info_size == arena.address) return;  // the arena's first heap: chain complete
      last_good_heap = heap;
      heap = image_.read_u64(heap + 8).value_or(0);
    }
    add({.kind = "heap_info",
         .chunk = last_good_heap,
         .expected = fmt::format("heap_info.prev chain ending at the heap that holds the arena ({})",
                                 hex(arena.address - rt_.layout.heap_info_size)),
         .found = heap == 0 ? "a null prev before it" : fmt::format("a loop back to {}", hex(heap)),
         .arena = arena.address,
         .heap = last_good_heap,
         .where = "heap chain",
         .affects = "the arena's older heaps are not walked: their blocks are missing from every analysis"});
  }

  // glibc grows and shrinks heaps in whole pages and never lets mprotect_size (the writable part) fall
  // below size (the part in use).
  void check_heap_info_sizes(const ArenaInfo& arena, Address heap, Address last_good_heap) {
    const auto size = image_.read_u64(heap + 16);
    const auto mprotect_size = image_.read_u64(heap + 24);
    if (!size || !mprotect_size || (*size % 4096 == 0 && *mprotect_size >= *size)) return;
    add({.kind = "heap_info",
         .chunk = heap,
         .expected = "size a multiple of the page size, and mprotect_size at least size",
         .found = fmt::format("size {}, mprotect_size {}", hex(*size), hex(*mprotect_size)),
         .last_good = last_good_heap,
         .arena = arena.address,
         .heap = heap,
         .where = "heap chain",
         .affects = "the heap's extent is uncertain: chunks near its end may be missing or misread"});
  }

  void report_heap_info(const ArenaInfo& arena, Address heap, Address last_good_heap) {
    const auto ar_ptr = image_.read_u64(heap);
    const auto size = image_.read_u64(heap + 16);
    add({.kind = "heap_info",
         .chunk = heap,
         .expected = fmt::format("heap_info with ar_ptr {} and a size of at most {}", hex(arena.address),
                                 hex(rt_.heap_alignment())),
         .found = ar_ptr && size ? fmt::format("ar_ptr {}, size {}", hex(*ar_ptr), hex(*size))
                                 : "a header not in the image",
         .last_good = last_good_heap,
         .arena = arena.address,
         .heap = heap,
         .where = "heap chain",
         .affects = "this heap and the arena's older ones are not walked: their blocks are missing from every "
                    "analysis"});
  }

  // The top chunk lies in one of its arena's heaps, is preceded by an in-use chunk and ends where that
  // heap ends (a heap_info heap's size; for main_arena, within the mapping that holds it).
  void check_top(std::uint16_t a) {
    const ArenaInfo& arena = model_.arenas[a];
    const auto top = image_.read_u64(arena.address + rt_.layout.arena.top);
    if (!top || *top == rt_.layout.initial_top(arena.address)) return;  // unreadable: walker warned; unused
    const HeapSegment* seg = segment_of(a, *top);
    const auto size_field = mem_.u64(*top + 8);
    if (!seg || !size_field) {
      if (!seg && !model_.arenas[a].complete) return;  // a heap the walk could not reach; reported above
      add(top_finding(arena, *top, "a chunk inside one of the arena's walked heaps",
                      seg ? "a header not in the image" : "an address outside them", 0));
      return;
    }
    if (beyond_walk_stop(*top)) return;
    const std::uint64_t size = *size_field & ~kFlagMask;
    const MemoryRegion* region = image_.region_at(*top);
    const Address region_end = region ? region->end : seg->end;
    if (size < kMinChunkSize || (size & 15) || *top + size != seg->end || *top + size > region_end)
      add(top_finding(arena, *top, fmt::format("a size reaching the heap's end {}", hex(std::min(seg->end, region_end))),
                      fmt::format("size field {}", hex(*size_field)), seg->start));
    else if (!(*size_field & kPrevInUse))
      add(top_finding(arena, *top, "PREV_INUSE set (free chunks before top merge into it)", "PREV_INUSE clear",
                      seg->start));
  }

  static HeapFinding top_finding(const ArenaInfo& arena, Address top, std::string expected, std::string found,
                                 Address heap) {
    return {.kind = "top", .chunk = top, .expected = std::move(expected), .found = std::move(found),
            .arena = arena.address, .heap = heap, .where = "top",
            .affects = "the arena's free bytes at its top are uncertain: summary totals, mallinfo and fragmentation"};
  }

  // --- chunk headers against their neighbours ---

  // Walks the model's blocks in address order; neighbours are blocks of one arena that touch.
  void check_chunks() {
    const Block* prev = nullptr;
    for (const Block& b : model_.blocks) {
      if (b.arena == Block::kNoArena) continue;
      ++out_.checked.chunks;
      if (prev && prev->arena == b.arena && prev->chunk + prev->chunk_size() == b.chunk) check_neighbours(*prev, b);
      prev = &b;
    }
  }

  void check_neighbours(const Block& prev, const Block& b) {
    if (prev.state != BlockState::free) return;  // only a chunk in a bin writes its size as the next prev_size
    const ArenaInfo& arena = model_.arenas[b.arena];
    const HeapSegment* seg = segment_of(b.arena, b.chunk);
    const auto prev_size = mem_.u64(b.chunk);
    if (prev_size && *prev_size != prev.chunk_size())
      add({.kind = "prev_size", .chunk = b.chunk, .expected = fmt::format("prev_size {} (the size of the free chunk "
                                                                          "before it)", hex(prev.chunk_size())),
           .found = fmt::format("prev_size {}", hex(*prev_size)), .last_good = prev.chunk, .arena = arena.address,
           .heap = seg ? seg->start : 0, .where = "heap",
           .affects = "nothing in heapscope (it walks sizes forward); glibc aborts when it next merges these chunks"});
    if (b.state == BlockState::free)
      add({.kind = "unmerged_free", .chunk = b.chunk, .expected = "a free chunk merged with the free chunk before it",
           .found = fmt::format("two free chunks in a row ({} and {})", hex(prev.chunk), hex(b.chunk)),
           .last_good = prev.chunk, .arena = arena.address, .heap = seg ? seg->start : 0, .where = "heap",
           .affects = "free and in-use states of these chunks are uncertain (a PREV_INUSE bit may have been "
                      "overwritten)"});
  }

  // --- the regular bins: circular doubly linked lists through each bin's pseudo-chunk in the arena ---

  // Then every chunk the walk calls free (its successor's PREV_INUSE is clear) must have been on a bin.
  void check_bins() {
    std::vector<bool> intact(model_.arenas.size(), true);
    std::unordered_set<Address> on_bins;
    for (std::uint16_t a = 0; a < model_.arenas.size(); ++a)
      for (int bin = 1; bin < rt_.layout.arena.bin_count; ++bin) intact[a] = check_bin(a, bin, on_bins) && intact[a];
    for (const Block& b : model_.blocks) {
      // In an arena with a broken bin, a chunk missing from the bins is already explained by that finding.
      if (b.arena == Block::kNoArena || b.state != BlockState::free || !intact[b.arena] || on_bins.count(b.chunk))
        continue;
      const HeapSegment* seg = segment_of(b.arena, b.chunk);
      add({.kind = "prev_inuse", .chunk = b.chunk,
           .expected = "a chunk whose next chunk has PREV_INUSE clear is on one of the arena's bins",
           .found = fmt::format("on no bin (next chunk {} has PREV_INUSE clear)", hex(b.chunk + b.chunk_size())),
           .arena = model_.arenas[b.arena].address, .heap = seg ? seg->start : 0, .where = "heap",
           .affects = "this chunk is counted as free; if it is in use, leaks and top miss it"});
    }
  }

  // Returns false when the list could not be followed to its end.
  bool check_bin(std::uint16_t a, int bin, std::unordered_set<Address>& on_bins) {
    const ArenaInfo& arena = model_.arenas[a];
    const Address head = rt_.layout.bin_at(arena.address, bin);
    const std::string where = bin_name(bin) + " of arena " + hex(arena.address);
    const std::size_t list_id = new_list(where);
    auto finding = [&](std::string kind, Address chunk, std::string expected, std::string found, Address last_good,
                       std::string affects) {
      const HeapSegment* seg = segment_of(a, chunk);
      add({.kind = std::move(kind), .chunk = chunk, .expected = std::move(expected), .found = std::move(found),
           .last_good = last_good, .arena = arena.address, .heap = seg ? seg->start : 0, .where = where,
           .affects = std::move(affects)});
    };
    const std::string unknown_rest = "the free state of the rest of this bin's chunks is unknown: they may be "
                                     "counted as in use (false leaks) or be missing from free totals";
    Address prev = head;
    Address before_prev = 0;  // the last good chunk when prev's fd is bad
    auto next = image_.read_u64(head + 16);
    std::unordered_set<Address> seen;
    while (next && *next != head) {
      const Address p = *next;
      const Address holder = prev == head ? 0 : prev;
      if (seen.count(p)) {
        finding("list_loop", holder, fmt::format("a list leading back to the bin head {}", hex(head)),
                fmt::format("a loop back to {}", hex(p)), before_prev, unknown_rest);
        return false;
      }
      const Block* b = (p & 15) ? nullptr : block_at(p);
      if (!b || b->arena != a) {
        if (beyond_walk_stop(p)) return false;  // into the unwalked rest of a damaged heap: already reported
        finding("bin_link", holder, fmt::format("fd pointing at a chunk of arena {} or back at the bin head",
                                                hex(arena.address)),
                fmt::format("fd {}", hex(p)), before_prev, unknown_rest);
        return false;
      }
      seen.insert(p);
      on_bins.insert(p);
      ++out_.checked.bin_entries;
      const auto bk = image_.read_u64(p + 24);
      if (bk && *bk != prev)
        finding("bin_link", p, fmt::format("bk {} (the chunk before it on the list: fd->bk == chunk)", hex(prev)),
                fmt::format("bk {}", hex(*bk)), holder, "glibc aborts when it next takes a chunk off this bin");
      if (bin != 1 && bin_index_for(b->chunk_size()) != bin)
        finding("bin_size", p, fmt::format("a size that belongs in {}", bin_name(bin)),
                fmt::format("size {} (belongs in {})", hex(b->chunk_size()), bin_name(bin_index_for(b->chunk_size()))),
                holder, "glibc may hand this chunk out for requests it does not fit");
      if (b->state != BlockState::free)
        finding("prev_inuse", p, fmt::format("PREV_INUSE clear in the next chunk {}", hex(p + b->chunk_size())),
                "PREV_INUSE set: the heap says this chunk is in use", holder,
                "this chunk is counted as in use: it may show up as a false leak");
      note_listed(p, list_id, a);
      before_prev = holder;
      prev = p;
      next = image_.read_u64(p + 16);
    }
    if (!next) {
      finding("bin_link", prev == head ? 0 : prev, "a readable fd", "an fd not in the image", before_prev, unknown_rest);
      return false;
    }
    return true;
  }

  std::size_t new_list(const std::string& name) {
    list_names_.push_back(name);
    return list_names_.size() - 1;
  }

  // A chunk on two free lists was freed twice (or its links were overwritten to point at another list's).
  void note_listed(Address chunk, std::size_t list, std::optional<std::uint16_t> arena) {
    auto [it, first_time] = listed_.emplace(chunk, list);
    if (first_time) return;
    const std::uint16_t a = arena ? *arena : arena_holding(chunk).value_or(0);
    const HeapSegment* seg = segment_of(a, chunk);
    add({.kind = "double_free", .chunk = chunk, .expected = "each free chunk on one free list once",
         .found = fmt::format("also on {}", list_names_[it->second]),
         .arena = model_.arenas.empty() ? 0 : model_.arenas[a].address, .heap = seg ? seg->start : 0,
         .where = list_names_[list],
         .affects = "the chunk is counted once, as free; glibc will return it from two mallocs"});
  }

  // --- fastbins and tcache bins: singly linked, safe-linked since glibc 2.32, null-terminated ---

  void check_fastbins(std::uint16_t a) {
    const ArenaInfo& arena = model_.arenas[a];
    for (int bin = 0; bin < rt_.layout.arena.fastbin_count; ++bin) {
      const auto head = image_.read_u64(arena.address + rt_.layout.arena.fastbins + bin * 8);
      if (!head) continue;
      SinglyLinkedList list{.kind = "fastbin",
                            .name = fmt::format("fastbin {} ({}-byte chunks) of arena {}", bin, (bin + 2) * 16,
                                                hex(arena.address)),
                            .head_entry = *head,
                            .links_to_user = false,
                            .expected_size = static_cast<std::uint64_t>(bin + 2) * 16,
                            .arena = a,
                            .count = std::nullopt};
      out_.checked.fastbin_entries += walk_list(list);
    }
  }

  void check_tcaches() {
    if (!rt_.tcache_tp_offset) {
      out_.notes.push_back("thread caches (tcache) not checked: the tcache TLS slot was not found");
      return;
    }
    for (const ThreadState& t : image_.threads()) {
      if (t.fs_base() == 0) continue;
      const auto tcache = image_.read_u64(t.fs_base() + static_cast<std::uint64_t>(*rt_.tcache_tp_offset));
      if (!tcache || *tcache == 0) continue;
      ++out_.checked.tcaches;
      if (check_tcache_struct(*tcache, t.tid)) check_tcache_bins(*tcache, t.tid);
    }
  }

  // The tcache_perthread_struct is itself the user memory of an in-use chunk of a known size.
  bool check_tcache_struct(Address tcache, std::uint32_t tid) {
    const Block* b = block_at(tcache - 16);
    if (b && b->chunk_size() == rt_.layout.tcache_chunk_size()) return true;
    if (!b && beyond_walk_stop(tcache)) return false;
    add({.kind = "tcache_struct", .chunk = tcache - 16,
         .expected = fmt::format("the thread's tcache in a heap chunk of {} bytes", rt_.layout.tcache_chunk_size()),
         .found = b ? fmt::format("a chunk of {} bytes", b->chunk_size()) : "no chunk of a walked heap there",
         .where = fmt::format("tcache of thread {}", tid),
         .affects = "this thread's cached chunks are not checked and count as in use"});
    return false;
  }

  void check_tcache_bins(Address tcache, std::uint32_t tid) {
    const std::size_t count_width = rt_.layout.tcache_counts_u16 ? 2 : 1;
    for (int bin = 0; bin < rt_.layout.tcache_bin_count; ++bin) {
      std::uint16_t count = 0;
      const auto head = image_.read_u64(tcache + rt_.layout.tcache_entries_offset() + bin * 8);
      if (image_.read(tcache + bin * count_width, &count, count_width) != count_width || !head) return;
      if (count == 0 && *head == 0) continue;
      SinglyLinkedList list{.kind = "tcache",
                            .name = fmt::format("tcache bin {} ({}-byte chunks) of thread {}", bin, 32 + bin * 16, tid),
                            .head_entry = *head,
                            .links_to_user = true,
                            .expected_size = kMinChunkSize + static_cast<std::uint64_t>(bin) * 16,
                            .arena = std::nullopt,
                            .count = count};
      out_.checked.tcache_entries += walk_list(list);
    }
  }

  // Follows one list; returns how many entries were checked. A repeated chunk ends the walk (glibc's
  // lists are null-terminated, so a repeat is a loop), which bounds it by the number of blocks.
  std::uint64_t walk_list(const SinglyLinkedList& list) {
    const std::string unknown_rest = "the chunks after this entry are not found on the list: they count as in use "
                                     "and can show up as false leaks; free totals are low";
    const std::size_t list_id = new_list(list.name);
    auto finding = [&](std::string kind, Address chunk, std::string expected, std::string found, Address last_good,
                       std::string affects) {
      const std::optional<std::uint16_t> a = list.arena ? list.arena : arena_holding(chunk);
      const HeapSegment* seg = a ? segment_of(*a, chunk) : nullptr;
      add({.kind = std::move(kind), .chunk = chunk, .expected = std::move(expected), .found = std::move(found),
           .last_good = last_good, .arena = a ? model_.arenas[*a].address : 0, .heap = seg ? seg->start : 0,
           .where = list.name, .affects = std::move(affects)});
    };
    std::unordered_set<Address> seen;
    Address holder = 0;         // the chunk whose link is being followed (0: the list head)
    Address before_holder = 0;  // the entry before it: the last good one when the holder's link is bad
    std::uint64_t entry = list.head_entry;
    std::optional<std::uint64_t> stored_link;  // the holder's link as stored, when safe-linking encoded it
    while (entry != 0) {
      const Address chunk = list.links_to_user ? entry - 16 : entry;
      if (seen.count(chunk)) {
        finding("double_free", chunk, "each chunk once on the list (it is null-terminated)",
                fmt::format("{} again after {} {}: the list loops", hex(chunk), seen.size(),
                            seen.size() == 1 ? "entry" : "entries"), holder,
                "the chunk is counted once, as cached; glibc will return it from two mallocs, and the list never "
                "ends");
        return seen.size();
      }
      const Block* b = (entry & 15) ? nullptr : block_at(chunk);
      const bool in_place = b && (!list.arena || b->arena == *list.arena);
      if (!in_place) {
        if (!(entry & 15) && beyond_walk_stop(chunk)) return seen.size();  // unwalked: reported as chunk_header
        finding(list.kind + "_link", holder,
                fmt::format("{} pointing at a 16-byte aligned chunk of {}, or null", holder ? "a next link" : "a head",
                            list.arena ? "arena " + hex(model_.arenas[*list.arena].address) : "a walked heap"),
                fmt::format("{} {}{}", list.links_to_user ? "entry" : "chunk", hex(entry),
                            stored_link ? fmt::format(" (stored as {}, decoded with safe-linking)", hex(*stored_link))
                                        : std::string()),
                before_holder, unknown_rest);
        return seen.size();
      }
      seen.insert(chunk);
      if (b->chunk_size() != list.expected_size)
        finding(list.kind + "_size", chunk, fmt::format("a chunk of {} bytes", list.expected_size),
                fmt::format("a chunk of {} bytes", b->chunk_size()), holder,
                "glibc may hand this chunk out for requests it does not fit");
      note_listed(chunk, list_id, list.arena);
      const Address slot = chunk + 16;
      const auto stored = image_.read_u64(slot);
      if (!stored) {
        finding(list.kind + "_link", chunk, "a readable next link", "a link not in the image", holder, unknown_rest);
        return seen.size();
      }
      before_holder = holder;
      holder = chunk;
      entry = reveal_pointer(rt_.layout, slot, *stored);
      if (rt_.layout.safe_linking) stored_link = *stored;
    }
    if (list.count && *list.count != seen.size())
      finding("tcache_count", 0, fmt::format("{} entries (the bin's count)", *list.count),
              fmt::format("{} entries before the list ends", seen.size()), holder,
              "the thread's cached bytes differ from what it will hand out");
    return seen.size();
  }
};

}  // namespace

HeapVerification verify_heap(const Image& image, const Runtime& runtime, const HeapModel& model) {
  PhaseTimer timer("verify");
  return Verifier(image, runtime, model).run();
}

}  // namespace heapscope::glibc
