#include "runtime/jemalloc/jemalloc_runtime.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <functional>
#include <regex>

#include "elf/elf_file.h"

namespace heapscope::jemalloc {

namespace {

// The private globals' names: jemalloc prefixes its internal symbols with its private namespace, "je_"
// unless the build chose another.
constexpr const char* kArenasSymbol = "je_arenas";
constexpr const char* kEmapSymbol = "je_arena_emap_global";
constexpr const char* kBinInfosSymbol = "je_bin_infos";
constexpr const char* kSizeTableSymbol = "je_sz_index2size_tab";

bool is_readable(const Image& image, Address a) {
  const MemoryRegion* r = image.region_at(a);
  return r && r->readable;
}

// One global to find: at its placement (symbol or known build), then by a scan of the library's writable
// data for words matching `word_matches`; every candidate must pass `check`, and a scan's also
// `scan_check` when there is one (what tells the global from another word that looks like it).
struct Search {
  std::string structure;  // the name summary shows
  const Placed& placed;
  std::function<bool(Address, std::uint64_t)> word_matches;
  std::function<bool(Address)> check;
  std::function<bool(Address)> scan_check;  // may be empty
};

std::optional<Address> find_global(const Image& image, const WritableRanges& writable, const Search& search,
                                   Runtime& rt) {
  if (search.placed.at) {
    if (search.check(*search.placed.at)) {
      rt.discovery.push_back({search.structure, *search.placed.at, search.placed.method + ", checked"});
      return search.placed.at;
    }
    rt.warnings.push_back(fmt::format("jemalloc's {} at its {} place (0x{:x}) does not check out; searched for "
                                      "instead",
                                      search.structure, search.placed.method, *search.placed.at));
  }
  const auto scan_check = [&](Address at) { return search.check(at) && (!search.scan_check || search.scan_check(at)); };
  if (const auto at = scan_writable(image, writable, search.word_matches, scan_check)) {
    rt.discovery.push_back({search.structure, *at, "scan, checked"});
    return at;
  }
  return std::nullopt;
}

// A global's symbol, else its place in the known build.
Placed place(const SymbolIndex& symbols, const Module& module, const char* symbol, const std::optional<KnownBuild>& known,
             std::uint64_t KnownBuild::*field) {
  if (const auto at = symbols.address_of(module, symbol)) return {at, "symbol"};
  if (known) return {module.load_bias + (*known).*field, "known-build"};
  return {};
}

}  // namespace

bool is_jemalloc(const Module& module, const SymbolIndex& symbols) {
  return symbols.address_of(module, "mallctl") || symbols.address_of(module, "je_mallctl") ||
         symbols.address_of(module, kEmapSymbol);
}

std::optional<std::string> detect_release(const ModuleSymbols& symbols) {
  // JEMALLOC_VERSION: "<major>.<minor>.<bugfix>-<commits>-g<hash>", one string of the library. Its known
  // release is looked for first; any other 5.x is named so that the warning can say which it is.
  static const std::regex kVersion(R"(^\d+\.\d+\.\d+-\d+-g[0-9a-f]{40})");
  for (const std::string_view prefix : {"5.3.0-", "5.3.", "5.2.", "5.1.", "5.0.", "4."}) {
    const auto at = symbols.find_bytes(prefix);
    if (!at) continue;
    char buf[80] = {};
    const std::size_t n = symbols.elf().read_vaddr(*at, buf, sizeof buf - 1);
    const std::string text(buf, strnlen(buf, n));
    std::smatch m;
    if (std::regex_search(text, m, kVersion)) return m[0].str();
  }
  return std::nullopt;
}

std::optional<std::vector<std::uint64_t>> read_size_table(const Image& image, Address table) {
  std::vector<std::uint64_t> sizes(kSizeClasses);
  if (!image.read_exact(table, sizes.data(), sizes.size() * 8)) return std::nullopt;
  // Every configuration with a 16-byte quantum starts 8, 16, 32, 48, 64; sizes only grow, in 8-byte steps.
  constexpr std::array<std::uint64_t, 5> kStart{8, 16, 32, 48, 64};
  for (std::size_t i = 0; i < kStart.size(); ++i)
    if (sizes[i] != kStart[i]) return std::nullopt;
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1] || sizes[i] % 8) return std::nullopt;
  return sizes;
}

std::optional<std::vector<BinInfo>> read_bin_infos(const Image& image, const Layout& layout, Address infos,
                                                   const std::vector<std::uint64_t>& sizes) {
  const BinInfoLayout& l = layout.bin_info;
  std::vector<std::uint8_t> bytes(kSmallClasses * l.stride);
  if (!image.read_exact(infos, bytes.data(), bytes.size())) return std::nullopt;
  auto u64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  auto u32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  std::vector<BinInfo> out(kSmallClasses);
  for (std::size_t i = 0; i < kSmallClasses; ++i) {
    const std::size_t at = i * l.stride;
    BinInfo b;
    b.region_size = u64(at + l.reg_size);
    b.slab_size = u64(at + l.slab_size);
    b.regions = u32(at + l.nregs);
    b.shards = u32(at + l.n_shards);
    // A slab is whole pages holding as many regions of its class's size as fit, at most 512 of them; the
    // region bitmap has one bit per region.
    if (b.region_size != sizes[i] || b.slab_size == 0 || b.slab_size % kPageBytes || b.regions == 0 ||
        b.regions > 64 * kSlabBitmapWords || b.regions != b.slab_size / b.region_size || b.shards == 0 ||
        b.shards > 64 || u64(at + l.nbits) != b.regions)
      return std::nullopt;
    out[i] = b;
  }
  return out;
}

bool is_arena(const Image& image, const Layout& layout, Address arena, std::uint32_t index) {
  if (arena == 0 || arena % 8) return false;
  if (image.read_u32(arena + layout.arena.ind) != index) return false;
  const auto base = image.read_u64(arena + layout.arena.base);
  if (!base || *base == 0 || *base % 8) return false;
  if (image.read_u32(*base + layout.base.ehooks_ind) != index) return false;
  const auto hooks = image.read_u64(*base + layout.base.ehooks);
  return hooks && *hooks != 0 && is_readable(image, *hooks);
}

bool is_emap(const Image& image, const Layout& layout, Address emap, Address base) {
  if (image.read_u64(emap + layout.rtree.base) != base) return false;
  constexpr std::size_t kRootLength = std::size_t{1} << RtreeLayout::kRootBits;
  std::vector<std::uint64_t> root(kRootLength);
  if (!image.read_exact(emap + layout.rtree.root, root.data(), root.size() * 8)) return false;
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < root.size(); ++i) {
    if (!root[i]) continue;
    if (root[i] % 8) return false;
    if (!first) first = i;
  }
  if (!first) return false;
  // The first leaf's first entry: its extent covers that entry's page.
  constexpr std::size_t kLeafLength = std::size_t{1} << RtreeLayout::kLeafBits;
  constexpr std::size_t kChunk = 4096;
  std::vector<std::uint64_t> entries(kChunk);
  for (std::size_t j = 0; j < kLeafLength; j += kChunk) {
    if (!image.read_exact(root[*first] + 8 * j, entries.data(), entries.size() * 8)) return false;
    for (std::size_t k = 0; k < kChunk; ++k) {
      if (!entries[k]) continue;
      const LeafEntry entry = decode_leaf(entries[k]);
      std::uint64_t words[3];
      if (!entry.edata || !image.read_exact(entry.edata, words, sizeof words)) return false;
      const Extent extent = decode_extent(words[0], words[1], words[2]);
      const std::uint64_t page = ((std::uint64_t{*first} << RtreeLayout::kLeafBits) | (j + k)) << kPageShift;
      return extent.size != 0 && extent.base() <= page && page < extent.end();
    }
  }
  return false;
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* error) {
  Runtime rt;
  rt.module = &module;
  rt.layout = &layout_5_3();
  const ModuleSymbols* syms = symbols.symbols_for(module);
  if (!syms) {
    *error = fmt::format("cannot read the symbols of {}", module.name());
    return std::nullopt;
  }

  // The release, and whether this very build is one whose placement of the hidden globals is known.
  rt.version = detect_release(*syms).value_or("");
  const std::string& build_id = !module.build_id.empty() ? module.build_id : syms->build_id();
  const std::optional<KnownBuild> known = known_build(build_id);
  if (rt.version.empty())
    rt.warnings.push_back(fmt::format("cannot tell the jemalloc release of {}; its structures are read with "
                                      "{}'s layout and accepted only where they check out",
                                      module.path, kKnownRelease));
  else if (rt.version.rfind(std::string(kKnownRelease) + "-", 0) != 0)
    rt.warnings.push_back(fmt::format("jemalloc {} is not the release heapscope knows ({}); its structures are "
                                      "read with that release's layout and accepted only where they check out",
                                      rt.version, kKnownRelease));
  const Placements placements{place(symbols, module, kSizeTableSymbol, known, &KnownBuild::size_table),
                              place(symbols, module, kBinInfosSymbol, known, &KnownBuild::bin_infos),
                              place(symbols, module, kArenasSymbol, known, &KnownBuild::arenas),
                              place(symbols, module, kEmapSymbol, known, &KnownBuild::emap)};
  if (!find_globals(image, module, writable_ranges(module, *syms), placements, rt, error)) return std::nullopt;
  rt.opt_prof = place(symbols, module, "je_opt_prof", known, &KnownBuild::opt_prof).at.value_or(0);
  rt.lg_prof_sample = place(symbols, module, "je_lg_prof_sample", known, &KnownBuild::lg_prof_sample).at.value_or(0);
  return rt;
}

bool find_globals(const Image& image, const Module& module, const WritableRanges& writable,
                  const Placements& placements, Runtime& rt, std::string* error) {
  const Layout& layout = *rt.layout;
  // Before the first allocation nothing is set up: the size table is still zeros and arena 0 absent.
  const Placed& table_place = placements.size_table;
  const Placed& arenas_place = placements.arenas;
  if (table_place.at && arenas_place.at && image.read_u64(*table_place.at) == 0 &&
      image.read_u64(*arenas_place.at) == 0) {
    rt.warnings.push_back("jemalloc is not initialised yet (no size classes, no arena 0): the heap is empty");
    rt.discovery.push_back({"arenas", *arenas_place.at, arenas_place.method + ", empty"});
    rt.initialized = false;
    return true;
  }

  // The size classes.
  std::optional<std::vector<std::uint64_t>> sizes;
  const Search size_search{"sz_index2size_tab", placements.size_table, [](Address, std::uint64_t w) { return w == 8; },
                           [&](Address at) { return (sizes = read_size_table(image, at)).has_value(); }, nullptr};
  if (!find_global(image, writable, size_search, rt)) {
    *error = fmt::format("cannot find jemalloc's size class table in {} (jemalloc {}?)", module.name(),
                         rt.version.empty() ? "release unknown" : rt.version);
    return false;
  }
  rt.sizes = std::move(*sizes);

  // The slabs' geometry per small class.
  std::optional<std::vector<BinInfo>> bins;
  const Search bin_search{"bin_infos", placements.bin_infos, [](Address, std::uint64_t w) { return w == 8; },
                          [&](Address at) { return (bins = read_bin_infos(image, layout, at, rt.sizes)).has_value(); },
                          nullptr};
  if (!find_global(image, writable, bin_search, rt)) {
    *error = fmt::format("cannot find jemalloc's bin geometry (bin_infos) in {}", module.name());
    return false;
  }
  rt.bins = std::move(*bins);

  // The arenas: arena 0 always exists once jemalloc is initialised. A scan also wants the slots after it
  // empty or arenas of their index, which tells je_arenas from another word pointing at arena 0 (a damaged
  // slot at a placement is the walk's warning, not a reason to lose the heap).
  const Search arena_search{
      "arenas", placements.arenas,
      [&](Address, std::uint64_t w) { return w != 0 && w % 8 == 0 && (w < module.start || w >= module.end); },
      [&](Address at) {
        const auto first = image.read_u64(at);
        return first && is_arena(image, layout, *first, 0);
      },
      [&](Address at) {
        std::array<std::uint64_t, 8> slots{};
        if (!image.read_exact(at, slots.data(), sizeof slots)) return false;
        for (std::uint32_t i = 1; i < slots.size(); ++i)
          if (slots[i] && !is_arena(image, layout, slots[i], i)) return false;
        return true;
      }};
  const auto arenas = find_global(image, writable, arena_search, rt);
  if (!arenas) {
    *error = fmt::format("cannot find jemalloc's arenas (arena 0) in {}", module.name());
    return false;
  }
  rt.arenas = *arenas;
  const Address arena0 = image.read_u64(rt.arenas).value_or(0);
  const Address base0 = image.read_u64(arena0 + layout.arena.base).value_or(0);  // checked by is_arena

  // The extent map: its radix tree draws its nodes from arena 0's metadata allocator.
  const Search emap_search{"arena_emap_global", placements.emap, [&](Address, std::uint64_t w) { return w == base0; },
                           [&](Address at) { return is_emap(image, layout, at, base0); }, nullptr};
  const auto emap = find_global(image, writable, emap_search, rt);
  if (!emap) {
    *error = fmt::format("cannot find jemalloc's extent map (arena_emap_global) in {}", module.name());
    return false;
  }
  rt.emap = *emap;
  rt.initialized = true;
  return true;
}

}  // namespace heapscope::jemalloc
