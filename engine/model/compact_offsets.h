// CompactOffsets: a CSR offset array (item i's entries are [offsets[i], offsets[i + 1])) in about 1.06 bytes an
// item instead of 4. The forward and the reverse edges' offsets both take it: they are the two arrays of the
// block count's size every graph holds, and most blocks point to few blocks and have few referrers.
//
// Items go in lines of 64: the line's first offset (4 bytes, in an array of their own, 1/16 of the items'
// size, which caches keep), and each item's end as a byte counted from it. A lookup reads the line's first
// offset and two neighbouring bytes, at addresses a shift and a mask give: no sum, no division (the floods
// and the depth-first search wait on every lookup). A line whose items hold more than 255 entries between
// them (4 an item) keeps its 65 offsets in full instead, its bytes then saying where (a block many others
// point to, or a run of pointer arrays).
//
// Its three arrays are its own, or views of memory kept elsewhere (an index file's mapping: viewing()).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/bounded_scan.h"
#include "base/viewed_array.h"

namespace heapscope {

class CompactOffsets {
 public:
  static constexpr std::uint32_t kPerLine = 64;

  CompactOffsets() = default;
  // From full offsets: items + 1 non-decreasing values, the last one the entry count.
  explicit CompactOffsets(std::span<const std::uint32_t> offsets);

  // Its arrays as they are, to be written out and viewed again (an index file's sections).
  struct Arrays {
    std::size_t items = 0;
    std::span<const std::uint32_t> first;  // a line's first offset, or kWide
    std::span<const std::uint8_t> ends;    // kPerLine per line
    std::span<const std::uint32_t> wide;   // kPerLine + 1 per wide line
  };
  Arrays arrays() const { return {items_, first_.span(), ends_.span(), wide_.span()}; }
  // Over `arrays` kept alive by the caller, when they are what arrays() gives for items whose entries are
  // exactly [0, entries): every offset in order and in bounds, so that no range() reads astray. One pass
  // over a byte an item; nullopt when they are not (a damaged file). With ItemChecks::sizes_only (a file as
  // heapscope wrote it), only the arrays' sizes.
  static std::optional<CompactOffsets> viewing(const Arrays& arrays, std::uint32_t entries,
                                               ItemChecks checks = ItemChecks::every_item);

  // Built item by item, from each item's entry count: the scan's way, which never holds full offsets.
  class Builder;

  std::size_t size() const { return items_; }  // items
  // Item i's entries: [first, last).
  std::pair<std::uint32_t, std::uint32_t> range(std::size_t i) const {
    const std::size_t line = i / kPerLine;
    const auto at = static_cast<std::uint32_t>(i % kPerLine);
    const std::uint32_t first = first_[line];
    if (first == kWide) {
      const std::uint32_t* offsets = wide_offsets(line);
      return {offsets[at], offsets[at + 1]};
    }
    const std::uint8_t* ends = &ends_[line * kPerLine];
    const std::uint32_t before = at == 0 ? 0 : ends[at - 1];
    return {first + before, first + ends[at]};
  }
  // fn(i, first, last) for every item in order: what range(i) gives, without a lookup each.
  template <typename Fn>
  void for_each_range(Fn&& fn) const {
    for (std::size_t line = 0; line < first_.size(); ++line) {
      const std::size_t base = line * kPerLine;
      const auto in_line = static_cast<std::uint32_t>(std::min<std::size_t>(kPerLine, items_ - base));
      if (first_[line] == kWide) {
        const std::uint32_t* offsets = wide_offsets(line);
        for (std::uint32_t at = 0; at < in_line; ++at) fn(base + at, offsets[at], offsets[at + 1]);
        continue;
      }
      const std::uint8_t* ends = &ends_[base];
      const std::uint32_t first = first_[line];
      std::uint32_t begin = first;
      for (std::uint32_t at = 0; at < in_line; ++at) {
        const std::uint32_t end = first + ends[at];
        fn(base + at, begin, end);
        begin = end;
      }
    }
  }
  // The full offsets again (items + 1 values), for writing them out.
  std::vector<std::uint32_t> expand() const;
  std::size_t memory_bytes() const { return first_.owned_bytes() + ends_.owned_bytes() + wide_.owned_bytes(); }

 private:
  // A line's first offset when the line is wide (offsets are below 2^32 - 1: the scan stops a slice before).
  static constexpr std::uint32_t kWide = 0xffffffffu;
  // A wide line's offsets in full (kPerLine + 1 of them): its bytes hold which of wide_'s runs is its.
  const std::uint32_t* wide_offsets(std::size_t line) const {
    std::uint32_t run;
    std::memcpy(&run, &ends_[line * kPerLine], sizeof run);
    return &wide_[std::size_t{run} * (kPerLine + 1)];
  }
  // Whether every line of `arrays` (of the right sizes) starts where the one before ended, holds its
  // offsets in order and in [0, entries], and the last one ends at `entries`.
  static bool lines_in_order(const Arrays& arrays, std::size_t lines, std::uint32_t entries);

  std::size_t items_ = 0;
  ViewedArray<std::uint32_t> first_;  // per line
  ViewedArray<std::uint8_t> ends_;    // kPerLine per line
  ViewedArray<std::uint32_t> wide_;
};

// Built item by item, from each item's entry count: the scan's way, which never holds full offsets.
class CompactOffsets::Builder {
 public:
  // `items`: how many will come (room for their lines); `first_offset`: where the first one's entries start.
  explicit Builder(std::size_t items, std::uint32_t first_offset = 0);
  void add(std::uint32_t entries);  // the next item's entry count
  CompactOffsets finish();          // after the last item

 private:
  void end_line();
  std::size_t items_ = 0;
  std::vector<std::uint32_t> first_;
  std::vector<std::uint8_t> ends_;
  std::vector<std::uint32_t> wide_;
  std::uint32_t line_offsets_[kPerLine + 1] = {};  // the current line's items' offsets, its first item's first
  std::uint32_t in_line_ = 0;                        // items of the current line added so far
};

}  // namespace heapscope
