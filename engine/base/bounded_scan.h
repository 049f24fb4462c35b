// Whole-array passes over a saved index's per-block arrays (millions of items, read once per new process):
// whether every item is below a bound, and where the items above one are. Written with SSE2, x86-64's
// baseline, 16 bytes at a time: at -O2 GCC vectorizes none of these loops, and SSE2 has no unsigned
// maximum of 16- or 32-bit items to reduce with, so a plain loop was a tenth of a one-block command.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace heapscope {

// How much of a saved index's arrays is checked before they are used: every item (a file that may hold
// anything its checksum was made to fit), or their sizes alone (a file as heapscope's writer left it:
// IndexFile::as_written). The checks of every item read the whole of each array: most of a command about
// one block's time.
enum class ItemChecks : std::uint8_t { every_item, sizes_only };

namespace bounded_scan_detail {

// The items of `items` that whole 16-byte vectors do not cover, one at a time.
template <typename T>
bool tail_below(std::span<const T> items, std::size_t from, std::uint64_t bound) {
  for (std::size_t i = from; i < items.size(); ++i)
    if (items[i] >= bound) return false;
  return true;
}

inline __m128i load(const void* at) { return _mm_loadu_si128(static_cast<const __m128i*>(at)); }

}  // namespace bounded_scan_detail

// Whether every item is below `bound`.
inline bool all_below(std::span<const std::uint8_t> items, std::uint64_t bound) {
  using namespace bounded_scan_detail;
  if (bound > 0xff) return true;
  if (bound == 0) return items.empty();
  const __m128i most = _mm_set1_epi8(static_cast<char>(bound - 1));
  __m128i over = _mm_setzero_si128();  // an item's excess over bound - 1, saturated: nonzero when it is not below
  std::size_t i = 0;
  for (; i + 16 <= items.size(); i += 16) over = _mm_or_si128(over, _mm_subs_epu8(load(&items[i]), most));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(over, _mm_setzero_si128())) == 0xffff && tail_below(items, i, bound);
}

inline bool all_below(std::span<const std::uint16_t> items, std::uint64_t bound) {
  using namespace bounded_scan_detail;
  if (bound > 0xffff) return true;
  if (bound == 0) return items.empty();
  const __m128i most = _mm_set1_epi16(static_cast<short>(bound - 1));
  __m128i over = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= items.size(); i += 8) over = _mm_or_si128(over, _mm_subs_epu16(load(&items[i]), most));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(over, _mm_setzero_si128())) == 0xffff && tail_below(items, i, bound);
}

namespace bounded_scan_detail {

// Whether every 32-bit item's bits in `mask` are below `bound` (1 ≤ bound ≤ mask), or, with kExcepted, the
// item is `excepted`.
template <bool kExcepted>
bool all_below_u32(std::span<const std::uint32_t> items, std::uint64_t bound, std::uint32_t mask,
                   std::uint32_t excepted) {
  // Unsigned order as signed order, with each sign bit flipped: SSE2 compares signed 32-bit items only.
  const __m128i flip = _mm_set1_epi32(static_cast<int>(0x80000000u));
  const __m128i most = _mm_xor_si128(_mm_set1_epi32(static_cast<int>(bound - 1)), flip);
  const __m128i bits = _mm_set1_epi32(static_cast<int>(mask));
  const __m128i exception = _mm_set1_epi32(static_cast<int>(excepted));
  __m128i over = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 4 <= items.size(); i += 4) {
    const __m128i item = load(&items[i]);
    __m128i above = _mm_cmpgt_epi32(_mm_xor_si128(_mm_and_si128(item, bits), flip), most);
    if constexpr (kExcepted) above = _mm_andnot_si128(_mm_cmpeq_epi32(item, exception), above);
    over = _mm_or_si128(over, above);
  }
  if (_mm_movemask_epi8(over) != 0) return false;
  for (; i < items.size(); ++i)
    if ((items[i] & mask) >= bound && !(kExcepted && items[i] == excepted)) return false;
  return true;
}

}  // namespace bounded_scan_detail

// Of 32-bit items, their bits in `mask` (a graph edge's target without its interior bit).
inline bool all_below(std::span<const std::uint32_t> items, std::uint64_t bound, std::uint32_t mask = ~0u) {
  if (bound > mask) return true;
  if (bound == 0) return items.empty();
  return bounded_scan_detail::all_below_u32<false>(items, bound, mask, 0);
}

// Whether every item is below `bound` or is `excepted` (a dominator array's "no node").
inline bool all_below_or(std::span<const std::uint32_t> items, std::uint64_t bound, std::uint32_t excepted) {
  if (bound > 0xffffffffu) return true;
  if (bound == 0) return std::all_of(items.begin(), items.end(), [&](std::uint32_t i) { return i == excepted; });
  return bounded_scan_detail::all_below_u32<true>(items, bound, ~0u, excepted);
}

// Whether each item is at most the next.
inline bool ascending(std::span<const std::uint8_t> items) {
  using namespace bounded_scan_detail;
  std::size_t i = 0;
  for (; i + 17 <= items.size(); i += 16) {
    const __m128i here = load(&items[i]), next = load(&items[i + 1]);
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(here, next), next)) != 0xffff) return false;
  }
  for (; i + 1 < items.size(); ++i)
    if (items[i] > items[i + 1]) return false;
  return true;
}

// Calls visit(i) for each i in [first, last) whose item is above `floor`, in order, 16 items at a time (most
// words of a heap's verdicts hold no leak).
template <typename Visit>
void each_above(std::span<const std::uint8_t> items, std::size_t first, std::size_t last, std::uint8_t floor,
                Visit&& visit) {
  using namespace bounded_scan_detail;
  const __m128i at_most = _mm_set1_epi8(static_cast<char>(floor));
  std::size_t i = first;
  for (; i + 16 <= last; i += 16) {
    const __m128i not_above = _mm_cmpeq_epi8(_mm_subs_epu8(load(&items[i]), at_most), _mm_setzero_si128());
    for (unsigned mask = ~static_cast<unsigned>(_mm_movemask_epi8(not_above)) & 0xffff; mask; mask &= mask - 1)
      visit(i + static_cast<std::size_t>(__builtin_ctz(mask)));
  }
  for (; i < last; ++i)
    if (items[i] > floor) visit(i);
}

}  // namespace heapscope
