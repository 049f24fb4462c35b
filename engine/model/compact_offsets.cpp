#include "model/compact_offsets.h"

#include <algorithm>
#include <cstring>

#include "base/bounded_scan.h"

namespace heapscope {

CompactOffsets::CompactOffsets(std::span<const std::uint32_t> offsets) {
  Builder builder(offsets.empty() ? 0 : offsets.size() - 1, offsets.empty() ? 0 : offsets.front());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) builder.add(offsets[i + 1] - offsets[i]);
  *this = builder.finish();
}

CompactOffsets::Builder::Builder(std::size_t items, std::uint32_t first_offset) {
  const std::size_t lines = (items + kPerLine - 1) / kPerLine;
  first_.reserve(lines);
  ends_.reserve(lines * kPerLine);
  line_offsets_[0] = first_offset;
}

void CompactOffsets::Builder::add(std::uint32_t entries) {
  line_offsets_[in_line_ + 1] = line_offsets_[in_line_] + entries;
  ++items_;
  if (++in_line_ == kPerLine) end_line();
}

// The current line as its first offset and a byte per item, or its offsets in full where its items hold more
// entries than a byte counts (a partial last line repeats its end offset, as range() reads one past its
// last item).
void CompactOffsets::Builder::end_line() {
  const std::uint32_t first = line_offsets_[0];
  const std::size_t at = ends_.size();
  ends_.resize(at + kPerLine, 0);
  std::uint8_t* ends = &ends_[at];
  if (line_offsets_[in_line_] - first <= 0xff && first != kWide) {
    first_.push_back(first);
    for (std::uint32_t i = 0; i < in_line_; ++i) ends[i] = static_cast<std::uint8_t>(line_offsets_[i + 1] - first);
  } else {
    first_.push_back(kWide);
    const auto run = static_cast<std::uint32_t>(wide_.size() / (kPerLine + 1));
    std::memcpy(ends, &run, sizeof run);
    for (std::uint32_t k = 0; k <= kPerLine; ++k) wide_.push_back(line_offsets_[std::min(k, in_line_)]);
  }
  line_offsets_[0] = line_offsets_[in_line_];
  in_line_ = 0;
}

CompactOffsets CompactOffsets::Builder::finish() {
  if (in_line_ > 0) end_line();
  CompactOffsets out;
  out.items_ = items_;
  out.first_ = ViewedArray<std::uint32_t>(std::move(first_));
  out.ends_ = ViewedArray<std::uint8_t>(std::move(ends_));
  out.wide_ = ViewedArray<std::uint32_t>(std::move(wide_));
  return out;
}

bool CompactOffsets::lines_in_order(const Arrays& arrays, std::size_t lines, std::uint32_t entries) {
  const std::size_t runs = arrays.wide.size() / (kPerLine + 1);
  std::uint32_t end = 0;  // where the line before ended: the next one starts there
  for (std::size_t line = 0; line < lines; ++line) {
    const auto in_line = static_cast<std::uint32_t>(std::min<std::size_t>(kPerLine, arrays.items - line * kPerLine));
    const std::uint8_t* ends = &arrays.ends[line * kPerLine];
    if (arrays.first[line] == kWide) {
      std::uint32_t run;
      std::memcpy(&run, ends, sizeof run);
      if (run >= runs) return false;
      const std::uint32_t* offsets = &arrays.wide[std::size_t{run} * (kPerLine + 1)];
      if (offsets[0] != end || !std::is_sorted(offsets, offsets + in_line + 1) || offsets[in_line] > entries)
        return false;
      end = offsets[in_line];
      continue;
    }
    if (arrays.first[line] != end || !ascending({ends, in_line})) return false;
    const std::uint64_t line_end = std::uint64_t{arrays.first[line]} + ends[in_line - 1];
    if (line_end > entries) return false;
    end = static_cast<std::uint32_t>(line_end);
  }
  return end == entries;
}

std::optional<CompactOffsets> CompactOffsets::viewing(const Arrays& arrays, std::uint32_t entries, ItemChecks checks) {
  const std::size_t lines = (arrays.items + kPerLine - 1) / kPerLine;
  if (arrays.first.size() != lines || arrays.ends.size() != lines * kPerLine || arrays.wide.size() % (kPerLine + 1) != 0)
    return std::nullopt;
  if (checks == ItemChecks::every_item && !lines_in_order(arrays, lines, entries)) return std::nullopt;
  CompactOffsets c;
  c.items_ = arrays.items;
  c.first_ = ViewedArray<std::uint32_t>::viewing(arrays.first);
  c.ends_ = ViewedArray<std::uint8_t>::viewing(arrays.ends);
  c.wide_ = ViewedArray<std::uint32_t>::viewing(arrays.wide);
  return c;
}

std::vector<std::uint32_t> CompactOffsets::expand() const {
  std::vector<std::uint32_t> out(items_ + 1, 0);
  for_each_range([&](std::size_t i, std::uint32_t first, std::uint32_t last) {
    out[i] = first;
    out[i + 1] = last;
  });
  return out;
}

}  // namespace heapscope
