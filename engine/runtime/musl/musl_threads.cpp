#include "runtime/musl/musl_threads.h"

#include <fmt/format.h>

#include <unordered_set>

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

}  // namespace

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
