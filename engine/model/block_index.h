// BlockIndex: any address → the allocated block whose user bytes contain it, in O(1) expected time.
// Every word of every block and root range goes through here during the pointer scan, so it is built
// for speed: a range check rejects non-heap values, a short binary search finds the heap segment, a
// per-page table gives the block covering the page, and a short forward step finds the block.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "base/bounded_scan.h"
#include "heap/heap_model.h"
#include "model/u32_array.h"

namespace heapscope {

using BlockId = std::uint32_t;
inline constexpr BlockId kNoBlock = 0xffffffff;

class BlockIndex {
 public:
  explicit BlockIndex(const HeapModel& heap);
  // The same index with its page table as page_table() gave it (an index file's, viewed in place): a new
  // process spares the pass over every block that fills it. Throws std::invalid_argument when the table
  // is not one of this heap's spans or leads past them (every entry is looked at, unless `checks` says
  // the sizes alone), or a sample of its pages is not what the blocks give.
  BlockIndex(const HeapModel& heap, U32Array saved_page_table, ItemChecks checks = ItemChecks::every_item);
  // How many indexes this process has built: a session builds one and shares it (tests check).
  static std::uint64_t built();

  // The allocated (in_use or mmapped) block whose user bytes [address, address + usable_size) contain
  // addr; kNoBlock otherwise. Free blocks are never targets: a pointer into freed memory anchors nothing.
  BlockId find(Address addr) const {
    if (addr < low_ || addr >= high_) return kNoBlock;
    const Span* s = span_for(addr);
    return s ? find_in(*s, addr) : kNoBlock;
  }

  // The allocated block whose user bytes start exactly at addr (what malloc returned for it); kNoBlock
  // otherwise: a pointer a type's layout or a container's shape says leads to a whole object.
  BlockId starting_at(Address addr) const {
    const BlockId b = find(addr);
    return b != kNoBlock && (*blocks_)[b].address() == addr ? b : kNoBlock;
  }

  // Hints for finds to come, each step taken for several addresses before any of their finds: the page
  // table's entry for `addr` (prefetch_page), then, once that is at hand, the block it names
  // (prefetch_block). A find waits for one miss after another; several finds hinted so wait together.
  void prefetch_page(Address addr) const {
    if (const Span* s = paged_span_for(addr)) __builtin_prefetch(page_first_.data() + page_of(*s, addr));
  }
  void prefetch_block(Address addr) const {
    if (const Span* s = paged_span_for(addr)) __builtin_prefetch(&(*blocks_)[page_first_.data()[page_of(*s, addr)]]);
  }

  const BlockArray& blocks() const { return *blocks_; }
  std::span<const std::uint32_t> page_table() const { return page_first_.span(); }
  std::size_t memory_bytes() const;

 private:
  struct Span {  // a heap segment, or one mmapped block
    Address start = 0, end = 0;
    BlockId first = 0, last = 0;      // blocks [first, last) lie in the span
    std::uint32_t page_table = 0;     // offset into page_first_ (unused for single-block spans)
    bool paged = false;               // a heap segment's, with a page table (else one mmapped block's)
  };
  static constexpr unsigned kPageShift = 8;  // 256-byte granules: a few blocks each, so the forward step is short

  static std::size_t page_of(const Span& s, Address addr) { return s.page_table + ((addr - s.start) >> kPageShift); }
  static std::size_t pages_of(const Span& s) { return ((s.end - s.start) >> kPageShift) + 1; }  // its page table's entries
  // Finds the spans, and where each heap segment's page table starts: returns the table's size.
  std::size_t find_spans(const HeapModel& heap);
  void fill_page_table(const Span& s, std::vector<BlockId>& table) const;
  BlockId cover_of(const Span& s, Address at) const;  // the last block of the span starting at or before `at`
  void check_page_table(ItemChecks checks) const;
  const Span* span_for(Address addr) const;
  // The heap segment's span holding `addr`, when it has a page table; null otherwise.
  const Span* paged_span_for(Address addr) const {
    if (addr < low_ || addr >= high_) return nullptr;
    const Span* s = span_for(addr);
    return s && s->paged ? s : nullptr;
  }
  BlockId find_in(const Span& s, Address addr) const;

  const BlockArray* blocks_;
  std::vector<Span> spans_;
  U32Array page_first_;  // per page of each heap segment's span: the block covering its start
  Address low_ = 0, high_ = 0;
};

}  // namespace heapscope
