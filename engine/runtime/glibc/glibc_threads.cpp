#include "runtime/glibc/glibc_threads.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_set>

namespace heapscope {

namespace {

constexpr std::size_t kMaxThreads = 1 << 20;

std::optional<std::uint64_t> descriptor_offset(const Image& image, const SymbolIndex& symbols, const Module& libc,
                                               std::string_view name) {
  const auto d = thread_db_descriptor(image, symbols, libc, name);
  return d ? std::optional<std::uint64_t>(d->offset) : std::nullopt;
}

struct Layout {
  Address rtld_global = 0;
  std::uint64_t used = 0, user = 0, cache = 0;  // list heads inside _rtld_global
  std::uint64_t list = 0, tid = 0, size = 0;    // inside struct pthread
};

std::optional<Layout> find_layout(const Image& image, const SymbolIndex& symbols, std::vector<std::string>& warnings) {
  const Module* libc = symbols.find_module("libc.so");
  const Module* ld = symbols.find_module("ld-linux");
  if (!libc || !ld) return std::nullopt;  // static executable or not glibc: no thread list to read
  Layout l;
  const auto rtld = symbols.address_of(*ld, "_rtld_global");
  const auto used = descriptor_offset(image, symbols, *libc, "_thread_db_rtld_global__dl_stack_used");
  const auto user = descriptor_offset(image, symbols, *libc, "_thread_db_rtld_global__dl_stack_user");
  const auto list = descriptor_offset(image, symbols, *libc, "_thread_db_pthread_list");
  const auto tid = descriptor_offset(image, symbols, *libc, "_thread_db_pthread_tid");
  const auto size = thread_db_sizeof(image, symbols, *libc, "_thread_db_sizeof_pthread");
  if (!rtld || !used || !user || !list || !tid || !size) {
    warnings.push_back("glibc's thread list cannot be located (no _rtld_global or _thread_db_* symbols): stacks "
                       "of exited threads are scanned as live memory");
    return std::nullopt;
  }
  l.rtld_global = *rtld;
  l.used = *used;
  l.user = *user;
  l.cache = *user + 16;  // _dl_stack_cache follows _dl_stack_user (ldsodefs.h, glibc 2.34 and later)
  l.list = *list;
  l.tid = *tid;
  l.size = *size;
  return l;
}

// Follows a circular list_t from its head; null when it is damaged (a link that cannot be read, a back
// link that does not match, or more nodes than any process has threads).
std::optional<std::vector<Address>> list_nodes(const Image& image, Address head) {
  std::vector<Address> nodes;
  std::unordered_set<Address> seen;
  Address prev = head;
  auto next = image.read_u64(head);
  while (next && *next != head) {
    const auto back = image.read_u64(*next + 8);
    if (!back || *back != prev || !seen.insert(*next).second || nodes.size() >= kMaxThreads) return std::nullopt;
    nodes.push_back(*next);
    prev = *next;
    next = image.read_u64(*next);
  }
  if (!next) return std::nullopt;
  return nodes;
}

}  // namespace

std::optional<ThreadDbDescriptor> thread_db_descriptor(const Image& image, const SymbolIndex& symbols,
                                                       const Module& libc, std::string_view name) {
  const auto at = symbols.address_of(libc, name);
  std::uint32_t d[3];
  if (!at || !image.read_exact(*at, d, sizeof d)) return std::nullopt;
  return ThreadDbDescriptor{d[0], d[1], d[2]};
}

std::optional<std::uint32_t> thread_db_sizeof(const Image& image, const SymbolIndex& symbols, const Module& libc,
                                              std::string_view name) {
  const auto at = symbols.address_of(libc, name);
  return at ? image.read_u32(*at) : std::nullopt;
}

LibcThreads find_glibc_threads(const Image& image, const SymbolIndex& symbols) {
  LibcThreads out;
  const auto layout = find_layout(image, symbols, out.warnings);
  if (!layout) return out;
  out.descriptor_size = layout->size;
  const std::pair<std::uint64_t, LibcThread::List> lists[] = {
      {layout->used, LibcThread::List::used},
      {layout->user, LibcThread::List::user},
      {layout->cache, LibcThread::List::cache},
  };
  for (const auto& [offset, kind] : lists) {
    const auto nodes = list_nodes(image, layout->rtld_global + offset);
    if (!nodes) {
      out.warnings.push_back(fmt::format("glibc's thread list at 0x{:x} is damaged; its threads are not listed",
                                         layout->rtld_global + offset));
      continue;
    }
    for (Address node : *nodes) {
      LibcThread t;
      t.descriptor = node - layout->list;
      t.tid = image.read_u32(t.descriptor + layout->tid).value_or(0);
      t.list = kind;
      if (const MemoryRegion* r = image.region_at(t.descriptor)) {
        t.stack_start = r->start;
        t.stack_end = r->end;
      }
      out.threads.push_back(t);
    }
  }
  return out;
}

}  // namespace heapscope
