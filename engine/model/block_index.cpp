#include "model/block_index.h"

#include <algorithm>
#include <stdexcept>

#include "base/bounded_scan.h"
#include "base/workers.h"

namespace heapscope {

namespace {

bool user_bytes_contain(const Block& b, Address addr) {
  return is_allocated(b.state) && addr >= b.address() && addr < b.address() + b.usable_size();
}

}  // namespace

namespace {
std::atomic<std::uint64_t> indexes_built{0};
}  // namespace

std::uint64_t BlockIndex::built() { return indexes_built.load(); }

BlockIndex::BlockIndex(const HeapModel& heap) : blocks_(&heap.blocks) {
  ++indexes_built;
  std::vector<BlockId> table(find_spans(heap));
  for (const Span& s : spans_)
    if (s.paged) fill_page_table(s, table);
  page_first_ = U32Array(std::move(table));
}

BlockIndex::BlockIndex(const HeapModel& heap, U32Array saved_page_table, ItemChecks checks) : blocks_(&heap.blocks) {
  ++indexes_built;
  if (find_spans(heap) != saved_page_table.size())
    throw std::invalid_argument("the block index's page table is another heap's");
  page_first_ = std::move(saved_page_table);
  check_page_table(checks);
}

std::size_t BlockIndex::find_spans(const HeapModel& heap) {
  const auto& blocks = heap.blocks;
  // Spans: arena heap segments hold runs of blocks; the blocks outside them (mmapped) are spans of their own.
  std::size_t pages = 0;
  std::size_t i = 0;
  auto lone_blocks_until = [&](std::size_t end) {
    for (; i < end; ++i) {
      Span s;
      s.start = blocks[i].chunk;
      s.end = blocks[i].chunk + blocks[i].chunk_size() + 8;
      s.first = static_cast<BlockId>(i);
      s.last = static_cast<BlockId>(i + 1);
      spans_.push_back(s);
    }
  };
  for (const SegmentBlocks& run : heap.blocks_by_segment()) {
    lone_blocks_until(run.first);
    Span s;
    s.start = run.segment.start;
    s.end = run.segment.end + 8;  // the last block's usable bytes reach into the next header's prev_size
    s.first = static_cast<BlockId>(run.first);
    s.last = static_cast<BlockId>(run.last);
    s.page_table = static_cast<std::uint32_t>(pages);
    s.paged = true;
    pages += pages_of(s);
    spans_.push_back(s);
    i = run.last;
  }
  lone_blocks_until(blocks.size());
  if (!spans_.empty()) {
    low_ = spans_.front().start;
    high_ = 0;
    for (const Span& s : spans_) high_ = std::max(high_, s.end);
  }
  return pages;
}

BlockId BlockIndex::cover_of(const Span& s, Address at) const {
  const auto& blocks = *blocks_;
  const auto after = std::partition_point(blocks.begin() + s.first, blocks.begin() + s.last,
                                          [&](const Block& b) { return b.chunk <= at; });
  return after == blocks.begin() + s.first ? s.first : static_cast<BlockId>(after - blocks.begin() - 1);
}

// Each page of the span gets the block covering its start, on all cores for a large span (a heap of
// millions of blocks): each worker's first page is found by binary search, the rest by stepping forward.
void BlockIndex::fill_page_table(const Span& s, std::vector<BlockId>& table) const {
  const auto& blocks = *blocks_;
  const std::size_t pages = pages_of(s);
  const unsigned n = worker_count(pages, std::size_t{1} << 16);
  run_workers(n, [&](unsigned w) {
    const auto [first_page, last_page] = slice_of(pages, n, w);
    BlockId cover = cover_of(s, s.start + (first_page << kPageShift));
    for (std::size_t p = first_page; p < last_page; ++p) {
      const Address page_start = s.start + (p << kPageShift);
      while (cover + 1 < s.last && blocks[cover + 1].chunk <= page_start) ++cover;
      table[s.page_table + p] = cover;
    }
  });
}

// A saved table's every entry stays inside its span (what a damaged one could do otherwise is lead a
// lookup past the blocks), and a sample of 256 pages, evenly spread, holds what fill_page_table gives: the
// file's checksum already says it is the one written; this, that it was written for these blocks.
void BlockIndex::check_page_table(ItemChecks checks) const {
  constexpr std::size_t kCheckedPages = 256;
  const std::span<const std::uint32_t> table = page_first_.span();
  const std::size_t step = std::max<std::size_t>(1, table.size() / kCheckedPages);
  for (const Span& s : spans_) {
    if (!s.paged) continue;
    const std::span<const std::uint32_t> own = table.subspan(s.page_table, pages_of(s));
    if (checks == ItemChecks::every_item && !all_below(own, s.last))
      throw std::invalid_argument("the block index's page table leads past its blocks");
    for (std::size_t q = (s.page_table + step - 1) / step * step; q < s.page_table + own.size(); q += step)
      if (table[q] != cover_of(s, s.start + ((q - s.page_table) << kPageShift)))
        throw std::invalid_argument("the block index's page table is not these blocks'");
  }
}

const BlockIndex::Span* BlockIndex::span_for(Address addr) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), addr, [](Address a, const Span& s) { return a < s.start; });
  if (it == spans_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

BlockId BlockIndex::find_in(const Span& s, Address addr) const {
  const auto& blocks = *blocks_;
  BlockId i = s.first;
  if (s.last - s.first > 1) {
    i = page_first_[page_of(s, addr)];
    while (i + 1 < s.last && blocks[i + 1].chunk <= addr) ++i;
  }
  if (user_bytes_contain(blocks[i], addr)) return i;
  // The first 8 bytes of a chunk header are the previous chunk's last usable word.
  if (i > s.first && user_bytes_contain(blocks[i - 1], addr)) return i - 1;
  return kNoBlock;
}

std::size_t BlockIndex::memory_bytes() const {
  return spans_.capacity() * sizeof(Span) + page_first_.owned_bytes();
}

}  // namespace heapscope
