#include "runtime/cpython/cpython_roots.h"

#include <algorithm>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/cpython/cpython_layout.h"
#include "runtime/module_data.h"

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

// Where a data stack chunk may start: an anonymous mapping's first page, beginning {previous, size} with
// a size of whole pages within the mapping (_PY_DATA_STACK_CHUNK_SIZE is 16 KiB; larger ones for deep calls).
bool may_start_chunk(const Image& image, const MemoryRegion& r) {
  std::uint64_t head[3] = {};
  if (!image.read_exact(r.start, head, sizeof head)) return false;
  const auto [previous, size, top] = head;
  return size >= 16384 && size % 4096 == 0 && size <= r.end - r.start && top <= size / 8 &&
         (previous == 0 || previous % 4096 == 0);
}

// Each thread's data stack (3.11+): its state, malloc'ed (PyMem_RawCalloc) or in the interpreter's data,
// holds datastack_chunk, datastack_top and datastack_limit side by side; the chunk's slots from the top to
// its end are spent. The states are looked for in anonymous memory and the interpreter's data, one word
// at a time, until every chunk's is found.
void add_spent_data_stacks(const Image& image, const WritableRanges& data, std::vector<HeapSegment>& out) {
  std::vector<Address> chunks;
  std::vector<std::pair<Address, Address>> searched(data.begin(), data.end());
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable || !r.backing_path.empty() || !r.bytes_present) continue;
    if (may_start_chunk(image, r)) chunks.push_back(r.start);
    searched.emplace_back(r.start, r.end);
  }
  if (chunks.empty()) return;
  std::sort(chunks.begin(), chunks.end());
  std::size_t found = 0;
  constexpr std::size_t kWindow = std::size_t{1} << 20;
  std::vector<std::uint64_t> words(kWindow / 8 + 2);
  for (const auto& [start, end] : searched) {
    for (Address at = start; at < end && found < chunks.size(); at += kWindow) {
      progress_check();
      const std::size_t n = std::min<std::uint64_t>(kWindow + 16, end - at) / 8;
      if (image.read(at, words.data(), n * 8) != n * 8) continue;
      for (std::size_t i = 0; i + 2 < n; ++i) {
        if (!std::binary_search(chunks.begin(), chunks.end(), words[i])) continue;
        const Address chunk = words[i], top = words[i + 1], limit = words[i + 2];
        const auto size = image.read_u64(chunk + 8);
        if (!size || chunk + *size != limit || top < chunk + 24 || top > limit || top % 8) continue;
        if (top < limit) out.push_back({top, limit});
        ++found;
      }
    }
  }
}

}  // namespace

std::vector<HeapSegment> non_reference_ranges(const Image& image, const SymbolIndex& symbols, const Module& module) {
  PhaseTimer timer("walk: CPython's non-references");
  std::vector<HeapSegment> out;
  const ModuleSymbols* syms = symbols.symbols_for(module);
  if (!syms) return out;
  const WritableRanges data = writable_ranges(module, *syms);
  add_type_cache(image, data, out);
  add_spent_data_stacks(image, data, out);
  std::sort(out.begin(), out.end(), [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
  return out;
}

}  // namespace heapscope::cpython
