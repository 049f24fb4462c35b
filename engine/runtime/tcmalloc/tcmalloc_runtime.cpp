#include "runtime/tcmalloc/tcmalloc_runtime.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <regex>

#include "elf/elf_file.h"
#include "runtime/module_data.h"

namespace heapscope::tcmalloc {

namespace {

bool is_readable(const Image& image, Address a) {
  const MemoryRegion* r = image.region_at(a);
  return r && r->readable;
}

// A list head of Span links: both links set, aligned, and either the head itself or readable memory.
bool plausible_list_head(const Image& image, const Layout& l, Address head) {
  for (std::uint64_t link : {l.span.next, l.span.prev}) {
    const auto p = image.read_u64(head + link);
    if (!p || *p == 0 || (*p & 7)) return false;
    if (*p != head && !is_readable(image, *p)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> detect_release(const ModuleSymbols& symbols) {
  static const std::regex kRelease(R"(^gperftools (\d+\.\d+(\.\d+)?))");
  const auto at = symbols.find_bytes("gperftools ");
  if (!at) return std::nullopt;
  char buf[64] = {};
  const std::size_t n = symbols.elf().read_vaddr(*at, buf, sizeof buf - 1);
  const std::string text(buf, strnlen(buf, n));
  std::smatch m;
  if (std::regex_search(text, m, kRelease)) return m[1].str();
  return std::nullopt;
}

std::optional<std::vector<SizeClass>> read_size_classes(const Image& image, const Layout& layout, Address sizemap) {
  const SizeMapLayout& l = layout.sizemap;
  const auto count = image.read_u64(sizemap + l.num_size_classes);
  if (!count || *count < 2 || *count > kMaxClasses) return std::nullopt;
  std::array<std::int32_t, kMaxClasses> sizes{}, moves{};
  std::array<std::uint64_t, kMaxClasses> pages{};
  if (!image.read_exact(sizemap + l.class_to_size, sizes.data(), sizeof sizes) ||
      !image.read_exact(sizemap + l.class_to_pages, pages.data(), sizeof pages) ||
      !image.read_exact(sizemap + l.num_objects_to_move, moves.data(), sizeof moves))
    return std::nullopt;
  // Class 0 is "no class"; class 1 holds the smallest objects (8 bytes in every configuration); sizes
  // increase in multiples of 8 up to kMaxSize, and each span holds at least one object.
  if (sizes[0] != 0 || sizes[1] != 8) return std::nullopt;
  std::vector<SizeClass> out(*count);
  for (std::size_t c = 1; c < *count; ++c) {
    if (sizes[c] <= sizes[c - 1] || sizes[c] % 8 || static_cast<std::uint64_t>(sizes[c]) > kMaxSmallSize) return std::nullopt;
    if (pages[c] < 1 || pages[c] > kMaxSmallSpanPages || (pages[c] << kPageShift) < static_cast<std::uint64_t>(sizes[c]))
      return std::nullopt;
    if (moves[c] < 1 || moves[c] > 8192) return std::nullopt;
    out[c] = {static_cast<std::uint32_t>(sizes[c]), pages[c], static_cast<std::uint32_t>(moves[c])};
  }
  return out;
}

bool is_central_list(const Image& image, const Layout& layout, Address list, std::size_t size_class) {
  const CentralFreeListLayout& l = layout.central;
  if (image.read_u64(list + l.size_class) != size_class) return false;
  if (!plausible_list_head(image, layout, list + l.empty) || !plausible_list_head(image, layout, list + l.nonempty))
    return false;
  const auto used = image.read_u32(list + l.used_slots);
  return used && *used <= CentralFreeListLayout::kMaxTransferEntries;
}

bool is_central_cache(const Image& image, const Layout& layout, Address central, std::size_t classes) {
  // All but a tenth of the lists must check out: a damaged list is the walk's warning, not a reason to
  // lose the heap; a look-alike matches next to none.
  std::size_t good = 0;
  for (std::size_t c = 0; c < classes; ++c) good += is_central_list(image, layout, central + c * layout.central.stride, c);
  return good >= 2 && good >= classes - classes / 10;
}

bool is_pageheap(const Image& image, const Layout& layout, Address pageheap, const Module& module) {
  const PageHeapLayout& l = layout.pageheap;
  // The page map's allocator is MetaDataAlloc, a function of the library.
  const auto allocator = image.read_u64(pageheap + l.pagemap_allocator);
  if (!allocator || *allocator < module.start || *allocator >= module.end) return false;
  // All but a tenth of the free list heads must check out (the walk does not follow them).
  std::uint64_t good = 0;
  for (std::uint64_t k = 0; k < kMaxSmallSpanPages; ++k) {
    const Address lists = pageheap + l.free_lists + k * l.free_list_stride;
    good += plausible_list_head(image, layout, lists) && plausible_list_head(image, layout, lists + layout.span.size);
  }
  return good >= kMaxSmallSpanPages - kMaxSmallSpanPages / 10;
}

bool place_statics(const Image& image, const Module& module, const WritableRanges& writable, Address lock,
                   const KnownBuild& placement, const std::string& placed, Runtime& rt, std::string* error) {
  const Layout& layout = *rt.layout;
  // Static::sizemap_.
  Address sizemap = lock + placement.sizemap;
  std::optional<std::vector<SizeClass>> classes = read_size_classes(image, layout, sizemap);
  std::string method = placed;
  if (!classes) {
    method = "scan";
    // class_to_size_ starts 0, 8 (int32s): the word 8 << 32 where the array is 8-aligned, else a word whose
    // low half is 8 (class 1) right after class 0's 0.
    const auto found = scan_writable(
        image, writable, [](Address, std::uint64_t w) { return w == (std::uint64_t{8} << 32); },
        [&](Address at) {
          if (at < layout.sizemap.class_to_size) return false;
          const Address candidate = at - layout.sizemap.class_to_size;
          if (auto c = read_size_classes(image, layout, candidate)) {
            classes = std::move(c);
            sizemap = candidate;
            return true;
          }
          return false;
        });
    if (!found)
      scan_writable(
          image, writable, [](Address, std::uint64_t w) { return (w & 0xffffffff) == 8; },
          [&](Address at) {
            const Address candidate = at - 4 - layout.sizemap.class_to_size;
            if (auto c = read_size_classes(image, layout, candidate)) {
              classes = std::move(c);
              sizemap = candidate;
              return true;
            }
            return false;
          });
  }
  if (!classes) {
    *error = fmt::format("cannot find tcmalloc's size map in {} (gperftools {}?)", module.name(),
                         rt.version.empty() ? "release unknown" : rt.version);
    return false;
  }
  rt.sizemap = sizemap;
  rt.classes = std::move(*classes);
  rt.discovery.push_back({"sizemap_", sizemap, method + ", size classes checked"});

  // Static::central_cache_.
  Address central = lock + placement.central_cache;
  method = placed;
  if (!is_central_cache(image, layout, central, rt.classes.size())) {
    method = "scan";
    const auto found = scan_writable(
        image, writable, [](Address, std::uint64_t w) { return w == 1; },
        [&](Address at) {
          const Address candidate = at - layout.central.size_class - layout.central.stride;
          return at >= layout.central.size_class + layout.central.stride &&
                 is_central_cache(image, layout, candidate, rt.classes.size());
        });
    if (!found) {
      *error = fmt::format("cannot find tcmalloc's central free lists in {}", module.name());
      return false;
    }
    central = *found - layout.central.size_class - layout.central.stride;
  }
  rt.central_cache = central;
  rt.discovery.push_back({"central_cache_", central, method + ", each list's size class checked"});

  // Static::pageheap_.
  Address pageheap = lock + placement.pageheap;
  method = placed;
  if (!is_pageheap(image, layout, pageheap, module)) {
    method = "scan";
    const auto found = scan_writable(
        image, writable,
        [&](Address at, std::uint64_t w) {
          return w >= module.start && w < module.end && at >= layout.pageheap.pagemap_allocator;
        },
        [&](Address at) { return is_pageheap(image, layout, at - layout.pageheap.pagemap_allocator, module); });
    if (!found) {
      *error = fmt::format("cannot find tcmalloc's page heap in {}", module.name());
      return false;
    }
    pageheap = *found - layout.pageheap.pagemap_allocator;
  }
  rt.pageheap = pageheap;
  rt.discovery.push_back({"pageheap_", pageheap, method + ", free span lists checked"});

  return true;
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error) {
  Runtime rt;
  rt.module = &module;
  rt.layout = &layout_2_10();
  const ModuleSymbols* syms = symbols.symbols_for(module);
  const auto lock = symbols.address_of(module, kPageheapLockSymbol);
  if (!syms || !lock) {
    *error = fmt::format("{} does not export tcmalloc::Static::pageheap_lock_", module.name());
    return std::nullopt;
  }

  // The release, and whether this very build is one whose placement of the hidden statics is known.
  rt.version = detect_release(*syms).value_or("");
  const std::string& build_id = !module.build_id.empty() ? module.build_id : syms->build_id();
  const std::optional<KnownBuild> known = known_build(build_id);
  if (rt.version.empty())
    rt.warnings.push_back(fmt::format("cannot tell the gperftools release of {}; assuming the {} layout",
                                      module.path, kKnownRelease));
  else if (rt.version != kKnownRelease)
    rt.warnings.push_back(fmt::format("gperftools {} is not the release heapscope knows ({}); its structures are "
                                      "read with that release's layout and accepted only where they check out",
                                      rt.version, kKnownRelease));
  else if (!known)
    rt.warnings.push_back(fmt::format("{} (build-id {}) is not a build heapscope knows; its structures are "
                                      "located with gperftools {}'s layout and checked",
                                      module.name(), build_id.empty() ? "none" : build_id, kKnownRelease));
  const KnownBuild& placement = known ? *known : default_placement();
  const std::string placed = known ? "known-build" : "2.10-placement";

  rt.discovery.push_back({"pageheap_lock_", *lock, "dynamic-symbol"});
  // Static::inited_ says whether the first malloc has run; without the symbol, or when one damaged byte
  // is all that says "not yet", the structures' own checks decide.
  std::optional<bool> inited_flag;
  if (const auto at = symbols.address_of(module, kInitedSymbol)) {
    std::uint8_t byte = 0;
    if (image.read_exact(*at, &byte, 1)) inited_flag = byte != 0;
  }
  std::string place_error;
  if (!place_statics(image, module, writable_ranges(module, *syms), *lock, placement, placed, rt, &place_error)) {
    if (inited_flag == false) {
      // Before the first malloc nothing exists to walk; the model is an empty heap.
      rt.inited = false;
      rt.discovery.resize(1);
      rt.warnings.push_back("tcmalloc is not initialised yet (Static::inited_ is false): the heap is empty");
      return rt;
    }
    *error = place_error;
    return std::nullopt;
  }
  rt.inited = true;
  if (inited_flag == false)
    rt.warnings.push_back("tcmalloc's Static::inited_ is false, yet its size map, central free lists and page heap "
                          "check out: walked as initialised");

  if (const auto heaps = symbols.address_of(module, kThreadHeapsSymbol)) {
    rt.thread_heaps = *heaps;
    rt.discovery.push_back({"thread_heaps_", *heaps, "dynamic-symbol"});
  } else {
    rt.warnings.push_back("cannot find tcmalloc's thread cache list (ThreadCache::thread_heaps_): objects cached "
                          "by threads are shown as in use");
  }
  return rt;
}

}  // namespace heapscope::tcmalloc
