#include "runtime/cpython/cpython_tracemalloc.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "base/phase_timer.h"
#include "base/progress.h"
#include "runtime/cpython/cpython_layout.h"

namespace heapscope::cpython {

namespace {

constexpr Address kTableHash = 32;                        // _Py_hashtable_t.hash_func
constexpr Address kEntryKey = 16, kEntryValue = 24;       // after {next, key_hash}
constexpr Address kTracebackFrames = 12, kFrameBytes = 12;  // packed frames after {hash, nframe, total_nframe}
constexpr std::uint64_t kMostFrames = 65535;               // nframe is 16 bits
constexpr std::uint64_t kLongestFile = 4096;
constexpr std::size_t kEntriesChecked = 8;

constexpr std::string_view kHowTo =
    "run the program with PYTHONTRACEMALLOC=1 (or python3 -X tracemalloc, or tracemalloc.start() in it): "
    "tracemalloc then keeps the file and line that allocated each block, which heapscope reads from the core "
    "(PYTHONTRACEMALLOC=25 keeps 25 frames of each traceback)";

struct HashTable {
  Address at = 0;
  std::uint64_t entries = 0, buckets = 0;
  Address bucket_array = 0;
  Address hash_function = 0;
};

class TraceReader {
 public:
  TraceReader(const Image& image, int minor) : image_(image), minor_(minor) {}

  // The table at `at`, if it is a _Py_hashtable_t whose hash and compare functions are `module`'s.
  std::optional<HashTable> table_at(Address at, const Module& module) const {
    std::uint64_t head[6] = {};
    if (at % 8 || !image_.read_exact(at, head, sizeof head)) return std::nullopt;
    const Address hash_function = head[kTableHash / 8], compare_function = head[kTableHash / 8 + 1];
    if (image_.module_at(hash_function) != &module || image_.module_at(compare_function) != &module) return std::nullopt;
    const std::uint64_t entries = head[0], buckets = head[1];
    if (buckets < 16 || buckets > (std::uint64_t{1} << 40) || (buckets & (buckets - 1)) || entries > 8 * buckets ||
        !head[2] || head[2] % 8)
      return std::nullopt;
    return HashTable{at, entries, buckets, head[2], hash_function};
  }

  // Each entry's address, key and value, in bucket order; false when one is unreadable or there are more than the
  // table counts (a chain leading astray).
  template <class Visit>
  bool for_each_entry(const HashTable& t, Visit visit, std::size_t most = ~std::size_t{0}) const {
    std::vector<std::uint64_t> heads(t.buckets);
    if (!image_.read_exact(t.bucket_array, heads.data(), heads.size() * 8)) return false;
    std::uint64_t seen = 0;
    for (std::uint64_t bucket = 0; bucket < t.buckets; ++bucket) {
      if ((bucket & 0xffff) == 0) progress_check();
      for (Address entry = heads[bucket]; entry; ++seen) {
        if (seen == most) return true;
        if (seen == t.entries) return false;  // more entries than the table counts
        std::uint64_t e[4] = {};
        if (entry % 8 || !image_.read_exact(entry, e, sizeof e)) return false;
        visit(entry, e[kEntryKey / 8], e[kEntryValue / 8]);
        entry = e[0];
      }
    }
    return true;
  }

  // The traceback a trace (a value of the table: {size, traceback}) points to, and the size.
  std::optional<std::pair<std::uint64_t, Address>> trace(Address value) const {
    std::uint64_t t[2] = {};
    if (!value || value % 8 || !image_.read_exact(value, t, sizeof t) || !t[1] || t[1] % 8) return std::nullopt;
    return std::pair{t[0], Address{t[1]}};
  }

  // The frames of the traceback at `at`, innermost first; nothing when it is no traceback.
  std::optional<std::vector<SourceFrame>> traceback(Address at) {
    std::uint64_t head[2] = {};
    if (!image_.read_exact(at, head, 12)) return std::nullopt;
    const std::uint64_t frames = head[1] & 0xffff;
    if (frames == 0 || frames > kMostFrames) return std::nullopt;
    std::vector<std::uint8_t> bytes(frames * kFrameBytes);
    if (!image_.read_exact(at + kTracebackFrames, bytes.data(), bytes.size())) return std::nullopt;
    std::vector<SourceFrame> out;
    for (std::uint64_t i = 0; i < frames; ++i) {
      Address file = 0;
      std::uint32_t line = 0;
      std::memcpy(&file, bytes.data() + i * kFrameBytes, 8);
      std::memcpy(&line, bytes.data() + i * kFrameBytes + 8, 4);
      const std::optional<std::string> name = file_name(file);
      if (!name) return std::nullopt;
      out.push_back({"", name->empty() ? "\"\"" : *name, line});  // code compiled with "" as its file name
    }
    return out;
  }

 private:
  std::optional<std::string> file_name(Address str) {
    auto it = files_.find(str);
    if (it == files_.end()) it = files_.emplace(str, ascii_text(image_, str, minor_, kLongestFile)).first;
    return it->second;
  }

  const Image& image_;
  const int minor_;
  std::map<Address, std::optional<std::string>> files_;  // tracemalloc interns its file names
};

// The interpreter's hash tables its data points to, each once, in the order first met.
std::vector<HashTable> hash_tables(const Image& image, const TracemallocPlace& place, const TraceReader& reader) {
  std::vector<HashTable> out;
  std::set<Address> met;
  for (const auto& [start, end] : place.data) {
    std::vector<std::uint64_t> words((end - start) / 8);
    if (image.read(start, words.data(), words.size() * 8) != words.size() * 8) continue;
    for (const std::uint64_t word : words)
      if (word && !met.contains(word))
        if (const std::optional<HashTable> t = reader.table_at(word, *place.module)) {
          met.insert(word);
          out.push_back(*t);
        }
  }
  return out;
}

// The traces' table among `tables`: the first that hashes pointers whose first entries are traces (or,
// none having entries, an empty one: tracemalloc is not tracing).
std::optional<HashTable> find_traces(const std::vector<HashTable>& tables, Address hash_ptr_function, TraceReader& reader) {
  std::optional<HashTable> empty;
  for (const HashTable& t : tables) {
    if (t.hash_function != hash_ptr_function) continue;
    if (t.entries == 0) {
      empty = empty ? empty : t;
      continue;
    }
    bool traces = true;
    const bool read = reader.for_each_entry(t, [&](Address, std::uint64_t key, std::uint64_t value) {
      const auto tr = reader.trace(value);
      traces = traces && key && tr && reader.traceback(tr->second);
    }, kEntriesChecked);
    if (read && traces) return t;
  }
  return empty;
}

}  // namespace

TracemallocPlace tracemalloc_place(const SymbolIndex& symbols, const Module& module, WritableRanges data, int minor) {
  // The config's `tracing` (after its `initialized`): offsets read from 3.12's and 3.13's headers.
  constexpr Address kTracingInConfig = 4, kTracingInRuntime312 = 2772, kTracingInRuntime313 = 10084;
  Address tracing = 0;
  if (minor <= 11) {
    if (const auto config = symbols.address_of(module, "_Py_tracemalloc_config")) tracing = *config + kTracingInConfig;
  } else if (minor <= 13) {
    if (const auto runtime = symbols.address_of(module, "_PyRuntime"))
      tracing = *runtime + (minor == 12 ? kTracingInRuntime312 : kTracingInRuntime313);
  }
  return {&module, std::move(data), symbols.address_of(module, "_Py_hashtable_hash_ptr").value_or(0), tracing, minor};
}

std::optional<TracemallocBlocks> tracemalloc_blocks(const Image& image, const TracemallocPlace& place) {
  if (!place.hash_ptr_function || !place.module) return std::nullopt;
  TraceReader reader(image, place.minor);
  const std::vector<HashTable> tables = hash_tables(image, place, reader);
  const std::optional<HashTable> table = find_traces(tables, place.hash_ptr_function, reader);
  if (!table) return std::nullopt;
  TracemallocBlocks out;
  out.table = table->at;
  out.buckets = table->bucket_array;
  std::set<Address> tracebacks;
  reader.for_each_entry(*table, [&](Address entry, std::uint64_t, std::uint64_t value) {
    out.entries.push_back(entry);
    if (const auto tr = reader.trace(value)) {
      out.traces.push_back(value);
      tracebacks.insert(tr->second);
    }
  });
  out.tracebacks.assign(tracebacks.begin(), tracebacks.end());
  for (const HashTable& t : tables) {
    if (t.at == table->at) continue;
    out.other_tables.push_back(t.at);
    reader.for_each_entry(t, [&](Address entry, std::uint64_t, std::uint64_t) { out.other_entries.push_back(entry); });
  }
  return out;
}

AllocationSamples tracemalloc_samples(const Image& image, const TracemallocPlace& place) {
  AllocationSamples out;
  out.supported = true;
  out.source = "tracemalloc";
  out.how_to_enable = kHowTo;
  out.mean_interval = 1;  // every allocation while it traces
  if (!place.hash_ptr_function || !place.module) {
    out.supported = false;
    return out;
  }
  PhaseTimer timer("tracemalloc's traces");
  std::optional<bool> tracing;
  if (place.tracing_flag)
    if (const auto flag = image.read_u32(place.tracing_flag)) tracing = *flag != 0;
  if (tracing == false) {  // its table keeps what it traced before tracemalloc.stop() cleared it: nothing
    out.enabled = false;
    return out;
  }
  TraceReader reader(image, place.minor);
  const std::optional<HashTable> table = find_traces(hash_tables(image, place, reader), place.hash_ptr_function, reader);
  if (!table) {
    if (tracing) out.warnings.push_back("tracemalloc traces, but its table of traces was not found in the interpreter's data");
    out.enabled = tracing;
    return out;
  }
  out.enabled = table->entries > 0;
  std::map<Address, std::uint32_t> stack_of;  // traceback → index into source_stacks (tracemalloc interns them)
  std::uint64_t unreadable = 0;
  progress_total(table->entries);
  const bool whole = reader.for_each_entry(*table, [&](Address, std::uint64_t key, std::uint64_t value) {
    progress_step(1);
    const auto tr = reader.trace(value);
    auto it = tr ? stack_of.find(tr->second) : stack_of.end();
    if (tr && it == stack_of.end()) {
      if (std::optional<std::vector<SourceFrame>> frames = reader.traceback(tr->second)) {
        it = stack_of.emplace(tr->second, static_cast<std::uint32_t>(out.source_stacks.size())).first;
        out.source_stacks.push_back(std::move(*frames));
      }
    }
    if (it == stack_of.end()) {
      ++unreadable;
      return;
    }
    out.samples.push_back({key, tr->first, 0, it->second});
  });
  std::sort(out.samples.begin(), out.samples.end(),
            [](const AllocationSample& a, const AllocationSample& b) { return a.block < b.block; });
  if (!whole)
    out.warnings.push_back(fmt::format("tracemalloc's table of traces at {:#x} is read in part: a chain of its "
                                       "entries leads astray ({} of {} traces read)",
                                       table->at, out.samples.size(), table->entries));
  if (unreadable)
    out.warnings.push_back(fmt::format("{} of tracemalloc's traces have no readable traceback; left out", unreadable));
  return out;
}

}  // namespace heapscope::cpython
