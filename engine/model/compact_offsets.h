// CompactOffsets: a CSR offset array (item i's entries are [offsets[i], offsets[i + 1])) in about 1.14 bytes an
// item instead of 4. The reverse edges' offsets are the one array of the block count's size `top` holds for
// no output of its own (the semidominators and the paths read them), and most blocks have few referrers.
//
// Items go in lines of 56, one cache line each, as one offset lookup touched one before: the line's first
// offset (4 bytes), where its wide offsets are (4 bytes), and each item's entry count (a byte). An item's
// start is the line's first offset plus the counts before it in the line. A line where an item has more
// than 255 entries keeps its 57 offsets in full instead (a block many others point to: few lines).
#pragma once

#include <cstdint>
#include <span>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <utility>
#include <vector>

namespace heapscope {

class CompactOffsets {
 public:
  static constexpr std::uint32_t kPerLine = 56;

  CompactOffsets() = default;
  // From full offsets: items + 1 non-decreasing values, the last one the entry count.
  explicit CompactOffsets(std::span<const std::uint32_t> offsets);

  std::size_t size() const { return items_; }  // items
  // Item i's entries: [first, last).
  std::pair<std::uint32_t, std::uint32_t> range(std::size_t i) const {
    const Line& line = lines_[i / kPerLine];
    const auto at = static_cast<std::uint32_t>(i % kPerLine);
    if (line.wide != kNarrow) {
      const std::uint32_t* offsets = &wide_[std::size_t{line.wide} * (kPerLine + 1)];
      return {offsets[at], offsets[at + 1]};
    }
    const std::uint32_t first = line.first + counts_before(line, at);
    return {first, first + line.count[at]};
  }
  // The full offsets again (items + 1 values), for writing them out.
  std::vector<std::uint32_t> expand() const;
  std::size_t memory_bytes() const { return lines_.capacity() * sizeof(Line) + wide_.capacity() * 4; }

 private:
  static constexpr std::uint32_t kNarrow = 0xffffffffu;
  struct alignas(64) Line {
    std::uint32_t first = 0;      // the offset of the line's first item
    std::uint32_t wide = kNarrow;  // or which of wide_'s runs of kPerLine + 1 offsets is this line's
    std::uint8_t count[kPerLine] = {};
  };
  static_assert(sizeof(Line) == 64);

  static std::uint32_t counts_before(const Line& line, std::uint32_t at);

  std::size_t items_ = 0;
  std::vector<Line> lines_;
  std::vector<std::uint32_t> wide_;
};

// The counts of the line's items before `at`: the sum of the line's bytes 8 .. 8 + at.
inline std::uint32_t CompactOffsets::counts_before(const Line& line, std::uint32_t at) {
#if defined(__SSE2__)
  // The line as four 16-byte pieces: the bytes outside the range masked out, psadbw sums each half-piece.
  const auto* pieces = reinterpret_cast<const __m128i*>(&line);
  const __m128i past_end = _mm_set1_epi8(static_cast<char>(8 + at)), before_counts = _mm_set1_epi8(7);
  __m128i index = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m128i sum = _mm_setzero_si128();
  for (int piece = 0; piece < 4; ++piece) {
    const __m128i in_range = _mm_and_si128(_mm_cmplt_epi8(index, past_end), _mm_cmpgt_epi8(index, before_counts));
    sum = _mm_add_epi64(sum, _mm_sad_epu8(_mm_and_si128(_mm_load_si128(pieces + piece), in_range), _mm_setzero_si128()));
    index = _mm_add_epi8(index, _mm_set1_epi8(16));
  }
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(sum)) + static_cast<std::uint32_t>(_mm_extract_epi16(sum, 4));
#else
  std::uint32_t sum = 0;
  for (std::uint32_t i = 0; i < at; ++i) sum += line.count[i];
  return sum;
#endif
}

}  // namespace heapscope
