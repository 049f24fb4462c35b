#include "runtime/cpython/cpython_roots.h"

#include <algorithm>

#include "base/progress.h"
#include "runtime/module_data.h"

namespace heapscope::cpython {

namespace {

constexpr std::uint64_t kTypeCacheEntries = 4096;  // MCACHE_SIZE_EXP 12, every release since 3.8
constexpr std::uint64_t kEntryBytes = 24;          // unsigned int version (padded), name, value
constexpr Address kTpName = 24;

// Whether `at` holds a str object (its type's name is "str"): a type cache entry's name is an interned str.
bool is_str(const Image& image, Address at) {
  const auto type = image.read_u64(at + 8);
  const auto name = type ? image.read_u64(*type + kTpName) : std::nullopt;
  return name && image.read_c_string(*name, 8) == "str";
}

// The type cache: a run of 4096 entries whose versions fit 32 bits and whose names are null or str objects,
// a quarter of them at least named (a run of zeros is none). Each entry's value word, as a range.
void add_type_cache(const Image& image, const WritableRanges& data, std::vector<HeapSegment>& out) {
  for (const auto& [start, end] : data) {
    if (end - start < kTypeCacheEntries * kEntryBytes) continue;
    std::vector<std::uint64_t> words((end - start) / 8);
    if (image.read(start, words.data(), words.size() * 8) != words.size() * 8) continue;
    for (std::size_t phase = 0; phase < kEntryBytes / 8; ++phase) {
      std::size_t run = 0, named = 0;
      for (std::size_t i = phase; i + 2 < words.size(); i += kEntryBytes / 8) {
        const bool valid = words[i] >> 32 == 0 && (words[i + 1] == 0 || is_str(image, words[i + 1]));
        if (!valid) {
          run = named = 0;
          continue;
        }
        ++run;
        named += words[i + 1] != 0;
        // The run's named entries' values, once it is long and named enough (zeros before the cache
        // count as entries: their values are null, none is taken).
        const bool last = i + 5 >= words.size() || !(words[i + 3] >> 32 == 0 &&
                                                    (words[i + 4] == 0 || is_str(image, words[i + 4])));
        if (last && run >= kTypeCacheEntries && named >= kTypeCacheEntries / 4) {
          for (std::size_t e = i + 3 - run * 3; e <= i; e += 3)
            if (words[e + 1] != 0) out.push_back({start + (e + 2) * 8, start + (e + 3) * 8});
          return;
        }
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
