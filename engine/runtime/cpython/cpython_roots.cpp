#include "runtime/cpython/cpython_roots.h"

#include <algorithm>
#include <set>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/cpython/cpython_layout.h"

namespace heapscope::cpython {

namespace {

constexpr std::uint64_t kTypeCacheEntries = 4096;  // MCACHE_SIZE_EXP 12, every release since 3.8
constexpr std::uint64_t kEntryBytes = 24;          // unsigned int version (padded), name, value
constexpr std::size_t kEntryWords = kEntryBytes / 8;

// The type cache: a run of 4096 entries whose versions fit 32 bits and whose names are null or str objects,
// a quarter of them at least named (a run of zeros is none). Each entry's value word, as a range.
void add_type_cache(const Image& image, const WritableRanges& data, std::vector<HeapSegment>& out) {
  for (const auto& [start, end] : data) {
    if (end - start < kTypeCacheEntries * kEntryBytes) continue;
    std::vector<std::uint64_t> words((end - start) / 8);
    if (image.read(start, words.data(), words.size() * 8) != words.size() * 8) continue;
    for (std::size_t phase = 0; phase < kEntryWords; ++phase) {
      std::size_t first = phase, named = 0;  // the run of entries [first, i)
      for (std::size_t i = phase;; i += kEntryWords) {
        const bool entry = i + kEntryWords <= words.size() && words[i] >> 32 == 0 &&
                           (words[i + 1] == 0 || cpython::has_type_named(image, words[i + 1], "str"));
        if (entry) {
          named += words[i + 1] != 0;
          continue;
        }
        // The run's named entries' values, once it is long and named enough (zeros before the cache
        // count as entries: their values are null, none is taken).
        if ((i - first) / kEntryWords >= kTypeCacheEntries && named >= kTypeCacheEntries / 4) {
          for (std::size_t e = first; e < i; e += kEntryWords)
            if (words[e + 1] != 0) out.push_back({start + (e + 2) * 8, start + (e + 3) * 8});
          return;
        }
        if (i + kEntryWords > words.size()) break;
        first = i + kEntryWords;
        named = 0;
      }
    }
  }
}

// The interpreter's free lists of lists, dicts and dicts' keys (3.11+, in its state): { items[80] ... int
// numfree }, the slots past the count spent: they point to objects handed out again, or freed. A list
// whose counted entries are not freed objects of its kind (no references left) is not taken.
void add_spent_free_lists(const Image& image, const std::vector<DataStack>& stacks, int minor,
                          std::vector<HeapSegment>& out) {
  const std::optional<StateLayout> layout = state_layout(minor);
  if (!layout) return;
  constexpr std::size_t kSlots = 80;
  std::set<Address> interpreters;
  for (const DataStack& s : stacks)
    if (const auto interp = image.read_u64(s.fields - layout->state_data_stack + layout->state_interp))
      interpreters.insert(*interp);
  for (const Address interp : interpreters) {
    for (const FreeListLayout& list : layout->free_lists) {
      std::uint64_t items[kSlots] = {};
      const auto count = image.read_u32(interp + list.count);
      if (!count || *count > kSlots || !image.read_exact(interp + list.items, items, sizeof items)) continue;
      const std::uint32_t n = *count;
      const bool freed = std::all_of(items, items + n, [&](std::uint64_t item) {
        return item && image.read_u64(item).value_or(1) == 0 && (list.type.empty() || has_type_named(image, item, list.type));
      });
      std::size_t end = n;
      while (end < kSlots && items[end] != 0) ++end;
      if (freed && end > n) out.push_back({interp + list.items + n * 8, interp + list.items + end * 8});
    }
  }
}

// Where a data stack chunk may start: an anonymous mapping's first page, beginning {previous, size} with
// a size of whole pages within the mapping (_PY_DATA_STACK_CHUNK_SIZE is 16 KiB; larger ones for deep calls).
bool may_start_chunk(const Image& image, const MemoryRegion& r) {
  std::uint64_t head[3] = {};
  if (!image.read_exact(r.start, head, sizeof head)) return false;
  const auto [previous, size, top] = head;
  return size >= 16384 && size % 4096 == 0 && size <= r.end - r.start && top <= size / 8 &&
         (previous == 0 || previous % 4096 == 0);
}

}  // namespace

std::vector<DataStack> find_data_stacks(const Image& image, const WritableRanges& data) {
  std::vector<DataStack> out;
  std::vector<Address> chunks;
  std::vector<std::pair<Address, Address>> searched(data.begin(), data.end());
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable || !r.backing_path.empty() || !r.bytes_present) continue;
    if (may_start_chunk(image, r)) chunks.push_back(r.start);
    searched.emplace_back(r.start, r.end);
  }
  if (chunks.empty()) return out;
  std::sort(chunks.begin(), chunks.end());
  constexpr std::size_t kWindow = std::size_t{1} << 20;
  std::vector<std::uint64_t> words(kWindow / 8 + 2);
  for (const auto& [start, end] : searched) {
    for (Address at = start; at < end && out.size() < chunks.size(); at += kWindow) {
      progress_check();
      const std::size_t n = std::min<std::uint64_t>(kWindow + 16, end - at) / 8;
      if (image.read(at, words.data(), n * 8) != n * 8) continue;
      for (std::size_t i = 0; i + 2 < n; ++i) {
        if (!std::binary_search(chunks.begin(), chunks.end(), words[i])) continue;
        const Address chunk = words[i], top = words[i + 1], limit = words[i + 2];
        const auto size = image.read_u64(chunk + 8);
        if (!size || chunk + *size != limit || top < chunk + 24 || top > limit || top % 8) continue;
        out.push_back({at + i * 8, chunk, top, limit});
      }
    }
  }
  return out;
}

std::vector<HeapSegment> non_reference_ranges(const Image& image, const WritableRanges& data,
                                              const std::vector<DataStack>& stacks, int minor) {
  PhaseTimer timer("walk: CPython's non-references");
  std::vector<HeapSegment> out;
  add_type_cache(image, data, out);
  add_spent_free_lists(image, stacks, minor, out);
  // A data stack's slots from its top to its chunk's end are spent.
  for (const DataStack& s : stacks)
    if (s.top < s.limit) out.push_back({s.top, s.limit});
  return out;
}

}  // namespace heapscope::cpython
