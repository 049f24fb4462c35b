#include "runtime/musl/musl_threads.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_set>
#include <vector>

#include "runtime/musl/musl_layout.h"

namespace heapscope::musl {

namespace {

constexpr std::size_t kMaxThreads = 1 << 20;
const ThreadLayout kThread;

// Whether the thread whose pointer is `tp` has a musl descriptor there: its self pointer, and its tid where
// musl keeps it (glibc keeps the pointer guard there).
bool is_descriptor(const Image& image, Address tp, std::uint32_t tid) {
  const auto self = image.read_u64(tp + kThread.self);
  const auto kept = image.read_u32(tp + kThread.tid);
  return tp && self && *self == tp && kept && *kept == tid;
}

// The first descriptor of thread `tid` in [start, end): a word that points at itself with the tid where musl
// keeps it; regions over this size are not searched (a thread's stack mapping and a library's data are smaller).
constexpr std::uint64_t kMaxSearch = std::uint64_t{64} << 20;
std::optional<Address> descriptor_in(const Image& image, Address start, Address end, std::uint32_t tid) {
  if (end <= start || end - start > kMaxSearch) return std::nullopt;
  std::vector<std::uint64_t> words((end - start) / 8);
  const std::size_t got = image.read(start, words.data(), words.size() * 8) / 8;
  const std::size_t tid_word = kThread.tid / 8;
  for (std::size_t i = 0; i + tid_word < got; ++i) {
    const Address at = start + 8 * i;
    if (words[i] == at && static_cast<std::uint32_t>(words[i + tid_word]) == tid) return at;
  }
  return std::nullopt;
}

}  // namespace

std::map<std::uint32_t, Address> find_thread_pointers(const Image& image) {
  std::map<std::uint32_t, Address> out;
  std::vector<const MemoryRegion*> data;  // the executable's and the C library's writable data
  for (const MemoryRegion& r : image.regions())
    if (r.readable && r.writable && !r.backing_path.empty()) data.push_back(&r);
  for (const ThreadState& t : image.threads()) {
    if (out.contains(t.tid)) continue;
    std::optional<Address> found;
    if (const MemoryRegion* stack = image.region_at(t.sp()))
      found = descriptor_in(image, stack->start, stack->end, t.tid);
    for (std::size_t i = 0; !found && i < data.size(); ++i)
      found = descriptor_in(image, data[i]->start, data[i]->end, t.tid);
    if (!found) continue;
    // Along the list from it: every live thread's descriptor, each checked by its self pointer.
    Address at = *found;
    std::size_t n = 0;
    do {
      const auto self = image.read_u64(at + kThread.self);
      const auto tid = image.read_u32(at + kThread.tid);
      if (!self || *self != at || !tid || ++n > kMaxThreads) break;
      out.emplace(*tid, at);
      at = image.read_u64(at + kThread.next).value_or(0);
    } while (at && at != *found);
  }
  // Only the image's threads, and only when they are all there: a stray self-pointing word is no list.
  std::map<std::uint32_t, Address> mine;
  for (const ThreadState& t : image.threads())
    if (const auto it = out.find(t.tid); it != out.end()) mine.emplace(*it);
  return mine;
}

LibcThreads find_threads(const Image& image) {
  LibcThreads out;
  const auto& threads = image.threads();
  Address first = 0;
  for (const ThreadState& t : threads) {
    if (t.fs_base() == 0) continue;
    if (!is_descriptor(image, t.fs_base(), t.tid)) return out;  // not musl's (or not readable): no list
    if (!first) first = t.fs_base();
  }
  if (!first) return out;
  out.library = LibcThreads::Library::musl;
  out.descriptor_size = kThread.size;
  std::unordered_set<Address> seen;
  Address at = first, prev = 0;
  do {
    const auto self = image.read_u64(at + kThread.self);
    const auto back = image.read_u64(at + kThread.prev);
    if (!self || *self != at || !back || (prev && *back != prev) || !seen.insert(at).second ||
        seen.size() > kMaxThreads) {
      out.warnings.push_back(fmt::format("musl's thread list is damaged at 0x{:x}: the threads after it are not listed",
                                         at));
      break;
    }
    LibcThread t;
    t.descriptor = at;
    t.tid = image.read_u32(at + kThread.tid).value_or(0);
    t.list = LibcThread::List::used;
    // A pthread_create'd thread's stack, TLS area and key values are one mapping (map_base, map_size), the TLS
    // area from its stack's top; the main thread's descriptor is in the C library's data (no mapping of its
    // own recorded), and a thread on a stack the program gave has none either: its region then.
    const auto base = image.read_u64(at + kThread.map_base), size = image.read_u64(at + kThread.map_size);
    const auto stack = image.read_u64(at + kThread.stack);
    if (base && size && *base && *base < at && at < *base + *size) {
      t.stack_start = *base;
      t.stack_end = *base + *size;
    } else if (const MemoryRegion* r = image.region_at(at)) {
      t.stack_start = r->start;
      t.stack_end = r->end;
    }
    if (stack && *stack > t.stack_start && *stack <= at) t.tls_start = *stack;
    out.threads.push_back(t);
    prev = at;
    at = image.read_u64(at + kThread.next).value_or(0);
  } while (at && at != first);
  return out;
}

}  // namespace heapscope::musl
