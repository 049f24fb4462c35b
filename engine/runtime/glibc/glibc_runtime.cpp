#include "runtime/glibc/glibc_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <unordered_set>

namespace heapscope::glibc {

namespace {

bool is_readable(const Image& image, Address a) {
  const MemoryRegion* r = image.region_at(a);
  return r && r->readable;
}

// An arena looks right when its top chunk lies in readable memory and every regular bin's forward link
// is either the bin itself (empty) or a readable chunk.
bool plausible_arena(const Image& image, const Layout& l, Address arena) {
  const auto top = image.read_u64(arena + l.arena.top);
  const auto next = image.read_u64(arena + l.arena.next);
  if (!top || !next || *top == 0 || (*top & 15) || !is_readable(image, *top) || !is_readable(image, *next))
    return false;
  for (int bin = 1; bin < l.arena.bin_count; ++bin) {
    const Address self = l.bin_at(arena, bin);
    const auto fd = image.read_u64(self + 16);
    if (!fd) return false;
    if (*fd != self && (!is_readable(image, *fd) || (*fd & 15))) return false;
  }
  return true;
}

Address runtime_address(const Module& m, Address file_vaddr) { return m.load_bias + file_vaddr; }

std::optional<Address> main_arena_by_symbol(const Module& libc, const ModuleSymbols* syms) {
  if (!syms) return std::nullopt;
  const Symbol* s = syms->find("main_arena");
  if (!s || s->kind != SymbolKind::object) return std::nullopt;
  return runtime_address(libc, s->value);
}

// main_arena.next is statically initialised to &main_arena, so libc carries a relative relocation whose
// target lies exactly offsetof(next) past its own addend.
std::optional<Address> main_arena_by_relocation(const Image& image, const Layout& l, const Module& libc,
                                                const ModuleSymbols* syms) {
  if (!syms) return std::nullopt;
  for (const RelativeRelocation& r : syms->relative_relocations()) {
    if (r.offset < r.addend || r.offset - r.addend != l.arena.next) continue;
    const Address candidate = runtime_address(libc, r.addend);
    if (plausible_arena(image, l, candidate)) return candidate;
  }
  return std::nullopt;
}

// Without libc's file: a non-main arena's first heap starts with heap_info whose ar_ptr points just past
// itself; the arena ring from there reaches the arena that lives inside libc, main_arena.
std::optional<Address> main_arena_by_heap_scan(const Image& image, const Layout& l, const Module& libc,
                                               std::vector<std::string>* warnings) {
  for (const MemoryRegion& r : image.regions()) {
    if (!r.writable || !r.bytes_present || !r.backing_path.empty()) continue;
    const Address first = (r.start + kDefaultHeapMaxSize - 1) & ~(kDefaultHeapMaxSize - 1);
    for (Address h = first; h + l.heap_info_size + l.arena.size <= r.end; h += kDefaultHeapMaxSize) {
      const auto ar_ptr = image.read_u64(h);
      if (!ar_ptr || *ar_ptr != h + l.heap_info_size || !plausible_arena(image, l, *ar_ptr)) continue;
      for (Address a : arena_ring(image, l, *ar_ptr, warnings))
        if (a >= libc.start && a < libc.end) return a;
    }
  }
  return std::nullopt;
}

std::optional<MallocParams> read_params(const Image& image, const Layout& l, Address mp) {
  const Address sbrk_at = mp + l.par.sbrk_base;
  auto i32 = [&](std::int64_t off) -> std::optional<std::int32_t> {
    auto v = image.read_u32(sbrk_at + off);
    if (!v) return std::nullopt;
    return static_cast<std::int32_t>(*v);
  };
  const auto sbrk = image.read_u64(sbrk_at);
  const auto n_mmaps = i32(l.par.n_mmaps_from_sbrk);
  const auto mmapped = image.read_u64(sbrk_at + l.par.mmapped_mem_from_sbrk);
  if (!sbrk || !n_mmaps || !mmapped) return std::nullopt;
  MallocParams p;
  p.address = mp;
  p.sbrk_base = *sbrk;
  p.n_mmaps = *n_mmaps;
  p.mmapped_mem = *mmapped;
  if (l.par.hp_pagesize) p.hp_pagesize = image.read_u64(mp + *l.par.hp_pagesize).value_or(0);
  p.trim_threshold = image.read_u64(mp + l.par.trim_threshold).value_or(0);
  p.top_pad = image.read_u64(mp + l.par.top_pad).value_or(0);
  return p;
}

// tcache_bins is derived from tcache_max_bytes (csize2tidx(request2size(max)) + 1): a relation that
// random data rarely satisfies, together with sane counters around sbrk_base.
bool plausible_params_at(const Image& image, const Layout& l, Address sbrk_at, Address main_top) {
  auto word = [&](std::int64_t off) { return image.read_u64(sbrk_at + off); };
  const auto sbrk = word(0), bins = word(l.par.tcache_bins_from_sbrk),
             max_bytes = word(l.par.tcache_max_bytes_from_sbrk), count = word(l.par.tcache_count_from_sbrk),
             mmapped = word(l.par.mmapped_mem_from_sbrk), max_mmapped = word(l.par.max_mmapped_mem_from_sbrk);
  const auto n_mmaps = image.read_u32(sbrk_at + l.par.n_mmaps_from_sbrk);
  const auto max_n_mmaps = image.read_u32(sbrk_at + l.par.max_n_mmaps_from_sbrk);
  if (!sbrk || !bins || !max_bytes || !count || !mmapped || !max_mmapped || !n_mmaps || !max_n_mmaps)
    return false;
  if (*bins < 1 || *bins > static_cast<std::uint64_t>(l.tcache_bin_count) || *count > 65535) return false;
  const std::uint64_t request = *max_bytes + 8 + 15 < 32 ? 32 : (*max_bytes + 8 + 15) & ~std::uint64_t{15};
  if ((request - 32 + 15) / 16 + 1 != *bins) return false;
  if (static_cast<std::int32_t>(*n_mmaps) < 0 || *max_n_mmaps < *n_mmaps || *mmapped > *max_mmapped) return false;
  if (main_top == 0) return *sbrk == 0;  // main_arena never grew: nothing was sbrk'ed yet
  const MemoryRegion* heap = image.region_at(*sbrk);
  return heap && main_top >= *sbrk && heap->contains(main_top);
}

std::optional<Address> mp_by_scan(const Image& image, const Layout& l, const Module& libc, Address main_top) {
  std::vector<Address> hits;
  for (const MemoryRegion& r : image.regions()) {
    if (!r.writable || r.end <= libc.start || r.start >= libc.end) continue;
    for (Address a = r.start; a + 32 <= r.end; a += 8)
      if (plausible_params_at(image, l, a, main_top)) hits.push_back(a - l.par.sbrk_base);
  }
  if (hits.size() != 1) return std::nullopt;
  return hits.front();
}

bool plausible_tcache_pointer(const Image& image, const Layout& l, std::uint64_t p) {
  if (p == 0) return true;
  if (p & 15) return false;
  const auto size = image.read_u64(p - 8);
  return size && (*size & ~kFlagMask) == l.tcache_chunk_size();
}

std::optional<std::int64_t> read_tp_offset(const Image& image, const Module& libc, const TlsRelocation& r) {
  const auto v = image.read_u64(libc.load_bias + r.got_offset);
  if (!v) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

// A tp offset is the tcache slot when every thread's word there is null or a tcache_perthread_struct.
bool tcache_offset_fits(const Image& image, const Layout& l, std::int64_t tp_offset) {
  bool any = false;
  for (const ThreadState& t : image.threads()) {
    if (t.fs_base() == 0) continue;
    const auto p = image.read_u64(t.fs_base() + static_cast<std::uint64_t>(tp_offset));
    if (!p || !plausible_tcache_pointer(image, l, *p)) return false;
    any = any || *p != 0;
  }
  return any;
}

void locate_tcache(const Image& image, const ModuleSymbols* syms, Runtime& rt) {
  if (!syms) return;
  const Symbol* sym = syms->find("tcache");
  if (sym && sym->kind == SymbolKind::tls) {
    for (const TlsRelocation& r : syms->tls_relocations()) {
      if (r.module_id || r.addend != sym->value || !(r.symbol.empty() || r.symbol == "tcache")) continue;
      if (auto off = read_tp_offset(image, *rt.libc, r)) {
        rt.tcache_tp_offset = off;
        rt.discovery.push_back({"tcache", rt.libc->load_bias + r.got_offset, "debug-symbol"});
        return;
      }
    }
  }
  std::vector<std::pair<std::int64_t, Address>> fits;
  for (const TlsRelocation& r : syms->tls_relocations()) {
    if (!r.symbol.empty() || r.module_id) continue;
    auto off = read_tp_offset(image, *rt.libc, r);
    if (off && tcache_offset_fits(image, rt.layout, *off)) fits.emplace_back(*off, rt.libc->load_bias + r.got_offset);
  }
  if (fits.size() == 1) {
    rt.tcache_tp_offset = fits.front().first;
    rt.discovery.push_back({"tcache", fits.front().second, "tls-got"});
  }
}

}  // namespace

std::vector<Address> arena_ring(const Image& image, const Layout& layout, Address first,
                                std::vector<std::string>* warnings, std::size_t limit, bool* closed) {
  if (closed) *closed = false;
  std::vector<Address> ring;
  std::unordered_set<Address> seen;
  Address a = first;
  while (ring.size() < limit) {
    if (!seen.insert(a).second) {
      if (closed) *closed = a == first;
      if (a != first && warnings)
        warnings->push_back(fmt::format("arena ring loops back to 0x{:x} instead of its start 0x{:x}", a, first));
      return ring;
    }
    ring.push_back(a);
    const auto next = image.read_u64(a + layout.arena.next);
    if (!next) {
      if (warnings) warnings->push_back(fmt::format("arena 0x{:x}: its next pointer cannot be read", a));
      return ring;
    }
    a = *next;
  }
  if (warnings) warnings->push_back(fmt::format("arena ring from 0x{:x} has more than {} arenas; stopped", first, limit));
  return ring;
}

std::optional<int> detect_glibc_minor(const Module& module, const ModuleSymbols* symbols) {
  static const std::regex kRelease(R"(release version 2\.(\d+))");
  static const std::regex kFileName(R"(libc-2\.(\d+)\.so)");
  std::smatch m;
  if (symbols) {
    if (auto at = symbols->find_bytes("GNU C Library")) {
      char buf[200] = {};
      const std::size_t n = symbols->elf().read_vaddr(*at, buf, sizeof buf - 1);
      const std::string banner(buf, strnlen(buf, n));
      if (std::regex_search(banner, m, kRelease)) return std::stoi(m[1]);
    }
  }
  const std::string base(module.name());
  if (std::regex_search(base, m, kFileName)) return std::stoi(m[1]);
  return std::nullopt;
}

const Module* libc_of(const Image& image) {
  for (const Module& m : image.modules()) {
    const std::string_view base = m.name();
    if (base.rfind("libc.so", 0) == 0 || base.rfind("libc-2.", 0) == 0) return &m;
  }
  return image.main_executable();  // a static executable carries its own malloc
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, std::string* error) {
  Runtime rt;
  rt.libc = libc_of(image);
  if (!rt.libc) {
    if (error) *error = "no libc module found in the image: is this a glibc program?";
    return std::nullopt;
  }
  const ModuleSymbols* syms = symbols.symbols_for(*rt.libc);

  const auto minor = detect_glibc_minor(*rt.libc, syms);
  rt.layout = layout_for(minor.value_or(0));
  if (!minor)
    rt.warnings.push_back(fmt::format("cannot tell the glibc release of {}; assuming the 2.{} layout",
                                      rt.libc->path, kNewestKnownMinor));
  else if (*minor < kOldestKnownMinor || *minor > kNewestKnownMinor)
    rt.warnings.push_back(fmt::format("glibc 2.{} is outside the releases heapscope knows (2.{}-2.{}); "
                                      "results may be wrong",
                                      *minor, kOldestKnownMinor, kNewestKnownMinor));

  if (auto a = main_arena_by_symbol(*rt.libc, syms)) {
    rt.main_arena = *a;
    rt.discovery.push_back({"main_arena", *a, "debug-symbol"});
  } else if (auto r = main_arena_by_relocation(image, rt.layout, *rt.libc, syms)) {
    rt.main_arena = *r;
    rt.discovery.push_back({"main_arena", *r, "relocation"});
  } else if (auto s = main_arena_by_heap_scan(image, rt.layout, *rt.libc, &rt.warnings)) {
    rt.main_arena = *s;
    rt.discovery.push_back({"main_arena", *s, "arena-ring"});
  } else {
    if (error) *error = fmt::format("cannot find glibc's main_arena in {} (no debug symbols, no matching "
                                    "relocation, no arena heap found)", rt.libc->path);
    return std::nullopt;
  }

  // main_arena's top before its first sbrk is its own first bin, not a heap address.
  Address main_top = image.read_u64(rt.main_arena + rt.layout.arena.top).value_or(0);
  if (main_top == rt.layout.initial_top(rt.main_arena)) main_top = 0;
  std::optional<Address> mp;
  std::string mp_method = "debug-symbol";
  if (const Symbol* s = syms ? syms->find("mp_") : nullptr; s && s->kind == SymbolKind::object) {
    mp = runtime_address(*rt.libc, s->value);
  } else {
    mp = mp_by_scan(image, rt.layout, *rt.libc, main_top);
    mp_method = "scan";
  }
  if (mp) rt.params = read_params(image, rt.layout, *mp);
  if (rt.params)
    rt.discovery.push_back({"mp_", *mp, mp_method});
  else
    rt.warnings.push_back("cannot find glibc's mp_: the sbrk heap start is taken from its mapping and the "
                          "mmapped-chunk count is not checked");

  locate_tcache(image, syms, rt);
  if (!rt.tcache_tp_offset)
    rt.warnings.push_back("cannot find the threads' tcache pointers: blocks cached in tcache are shown as in use");
  return rt;
}

}  // namespace heapscope::glibc
