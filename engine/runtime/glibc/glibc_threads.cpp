#include "runtime/glibc/glibc_threads.h"

#include <fmt/format.h>

#include <optional>
#include <utility>
#include <unordered_set>

namespace heapscope {

namespace {

constexpr std::size_t kMaxThreads = 1 << 20;
constexpr std::uint32_t kMaxFieldOffset = 1 << 16;  // glibc's structures are far smaller

std::optional<std::uint64_t> read_u64(const MemoryReader& read, Address at) {
  std::uint64_t v = 0;
  return read(at, &v, sizeof v) == sizeof v ? std::optional(v) : std::nullopt;
}

// The `_thread_db_*` descriptor at `at`: three uint32, {size in bits, count, offset}.
std::optional<ThreadDbDescriptor> descriptor_at(const MemoryReader& read, std::optional<Address> at) {
  std::uint32_t d[3];
  if (!at || read(*at, d, sizeof d) != sizeof d) return std::nullopt;
  return ThreadDbDescriptor{d[0], d[1], d[2]};
}

// A `_thread_db_*` descriptor's offset, when its field has the size glibc gives it (a list_t, a pid_t).
std::optional<std::uint64_t> field_offset(const MemoryReader& read, const LibcSymbolLookup& lookup,
                                          std::string_view name, std::uint32_t bits) {
  const auto d = descriptor_at(read, lookup("libc.so", name));
  if (!d || d->size_bits != bits || d->offset >= kMaxFieldOffset) return std::nullopt;
  return d->offset;
}

struct Layout {
  Address rtld_global = 0;
  std::uint64_t used = 0, user = 0, cache = 0;  // list heads inside _rtld_global
  std::uint64_t list = 0, tid = 0, size = 0;    // inside struct pthread
  std::optional<std::uint64_t> start_routine;   // likewise, when glibc describes it
};

std::optional<Layout> find_layout(const MemoryReader& read, const LibcSymbolLookup& lookup,
                                  std::vector<std::string>& warnings) {
  const auto rtld = lookup("ld-linux", "_rtld_global");
  const auto used = field_offset(read, lookup, "_thread_db_rtld_global__dl_stack_used", 128);
  const auto user = field_offset(read, lookup, "_thread_db_rtld_global__dl_stack_user", 128);
  const auto list = field_offset(read, lookup, "_thread_db_pthread_list", 128);
  const auto tid = field_offset(read, lookup, "_thread_db_pthread_tid", 32);
  const auto size_at = lookup("libc.so", "_thread_db_sizeof_pthread");
  std::uint32_t size = 0;
  if (!rtld || !used || !user || !list || !tid || !size_at || read(*size_at, &size, sizeof size) != sizeof size) {
    warnings.push_back("glibc's thread list cannot be located (no _rtld_global or _thread_db_* symbols): stacks "
                       "of exited threads are scanned as live memory");
    return std::nullopt;
  }
  Layout l;
  l.rtld_global = *rtld;
  l.used = *used;
  l.user = *user;
  l.cache = *user + 16;  // _dl_stack_cache follows _dl_stack_user (ldsodefs.h, glibc 2.34 and later)
  l.list = *list;
  l.tid = *tid;
  l.size = size;
  l.start_routine = field_offset(read, lookup, "_thread_db_pthread_start_routine", 64);
  return l;
}

// Follows a circular list_t from its head; null when it is damaged (a link that cannot be read, a back
// link that does not match, or more nodes than any process has threads).
std::optional<std::vector<Address>> list_nodes(const MemoryReader& read, Address head) {
  std::vector<Address> nodes;
  std::unordered_set<Address> seen;
  Address prev = head;
  auto next = read_u64(read, head);
  while (next && *next != head) {
    const auto back = read_u64(read, *next + 8);
    if (!back || *back != prev || !seen.insert(*next).second || nodes.size() >= kMaxThreads) return std::nullopt;
    nodes.push_back(*next);
    prev = *next;
    next = read_u64(read, *next);
  }
  if (!next) return std::nullopt;
  return nodes;
}

}  // namespace

std::optional<ThreadDbDescriptor> thread_db_descriptor(const Image& image, const SymbolIndex& symbols,
                                                       const Module& libc, std::string_view name) {
  return descriptor_at(memory_reader_for(image), symbols.address_of(libc, name));
}

std::optional<std::uint32_t> thread_db_sizeof(const Image& image, const SymbolIndex& symbols, const Module& libc,
                                              std::string_view name) {
  const auto at = symbols.address_of(libc, name);
  return at ? image.read_u32(*at) : std::nullopt;
}

LibcThreads find_glibc_threads(const MemoryReader& read, const LibcSymbolLookup& lookup) {
  LibcThreads out;
  out.library = LibcThreads::Library::glibc;
  const auto layout = find_layout(read, lookup, out.warnings);
  if (!layout) return out;
  out.descriptor_size = layout->size;
  const std::pair<std::uint64_t, LibcThread::List> lists[] = {
      {layout->used, LibcThread::List::used},
      {layout->user, LibcThread::List::user},
      {layout->cache, LibcThread::List::cache},
  };
  for (const auto& [offset, kind] : lists) {
    const auto nodes = list_nodes(read, layout->rtld_global + offset);
    if (!nodes) {
      out.warnings.push_back(fmt::format("glibc's thread list at 0x{:x} is damaged; its threads are not listed",
                                         layout->rtld_global + offset));
      continue;
    }
    for (Address node : *nodes) {
      LibcThread t;
      t.descriptor = node - layout->list;
      std::uint32_t tid = 0;
      if (read(t.descriptor + layout->tid, &tid, sizeof tid) == sizeof tid) t.tid = tid;
      if (layout->start_routine) t.start_routine = read_u64(read, t.descriptor + *layout->start_routine).value_or(0);
      t.list = kind;
      out.threads.push_back(t);
    }
  }
  return out;
}

LibcThreads find_glibc_threads(const Image& image, const SymbolIndex& symbols) {
  const Module* libc = symbols.find_module("libc.so");
  const Module* ld = symbols.find_module("ld-linux");
  if (!libc || !ld) return {};  // static executable or not glibc: no thread list to read
  const LibcSymbolLookup lookup = [&](std::string_view module, std::string_view name) {
    return symbols.address_of(module == "libc.so" ? *libc : *ld, name);
  };
  LibcThreads out = find_glibc_threads(memory_reader_for(image), lookup);
  for (LibcThread& t : out.threads)
    if (const MemoryRegion* r = image.region_at(t.descriptor)) {
      t.stack_start = r->start;
      t.stack_end = r->end;
    }
  return out;
}

}  // namespace heapscope
