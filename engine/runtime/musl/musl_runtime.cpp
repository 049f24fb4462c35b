#include "runtime/musl/musl_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <unordered_set>

#include "runtime/module_data.h"

namespace heapscope::musl {

namespace {

constexpr std::uint64_t kAtRandom = 25;
constexpr const char* kContextSymbol = "__malloc_context";
// More meta areas than any process has (each describes up to 101 groups): a list longer than this loops.
constexpr std::size_t kMaxAreas = std::size_t{1} << 22;

const ContextLayout kContext;
const MetaAreaLayout kArea;

bool page_aligned(Address a) { return (a & (kPageBytes - 1)) == 0; }

// Whether a meta area with `secret` starts at `at`: its check word, and a slot count that fits the page.
bool is_area(const Image& image, Address at, std::uint64_t secret) {
  std::uint8_t head[24];
  if (!page_aligned(at) || at == 0 || !image.read_exact(at, head, sizeof head)) return false;
  const std::uint32_t nslots = u32_at(head, kArea.nslots);
  return u64_at(head, kArea.check) == secret && nslots > 0 && nslots <= MetaAreaLayout::kSlots;
}

// Whether the malloc context lies at `at`: initialised, with `secret`, and a list of areas whose head is one.
bool is_context(const Image& image, Address at, std::uint64_t secret) {
  std::uint8_t ctx[ContextLayout{}.size];
  if (!image.read_exact(at, ctx, sizeof ctx)) return false;
  if (u64_at(ctx, kContext.secret) != secret || u32_at(ctx, kContext.init_done) != 1) return false;
  const Address head = u64_at(ctx, kContext.meta_area_head), tail = u64_at(ctx, kContext.meta_area_tail);
  if (u64_at(ctx, kContext.avail_meta_count) > MetaAreaLayout::kSlots) return false;
  if (head == 0) return tail == 0;
  return is_area(image, head, secret) && is_area(image, tail, secret);
}

// Every page of writable memory that starts a meta area with `secret`, in address order.
std::vector<Address> scan_areas(const Image& image, std::uint64_t secret) {
  std::vector<Address> found;
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable) continue;
    for (Address at = (r.start + kPageBytes - 1) & ~(kPageBytes - 1); at + 24 <= r.end && at >= r.start;
         at += kPageBytes) {
      const auto word = image.read_u64(at);
      if (word && *word == secret && is_area(image, at, secret)) found.push_back(at);
      if (found.size() >= kMaxAreas) return found;
    }
  }
  return found;
}

// The writable data of `module`, or of every module when it is null.
WritableRanges data_of(const Image& image, const SymbolIndex& symbols, const Module* module) {
  WritableRanges out;
  for (const Module& m : image.modules()) {
    if (module && &m != module) continue;
    if (const ModuleSymbols* syms = symbols.symbols_for(m)) {
      const WritableRanges r = writable_ranges(m, *syms);
      out.insert(out.end(), r.begin(), r.end());
    }
  }
  return out;
}

// The release musl's C library states in its file (`__libc_version`, "1.2.3": a string of its own, which
// the dynamic linker prints); empty when not found (a static program carries none).
std::string version_of(const SymbolIndex& symbols, const Module* module) {
  const ModuleSymbols* syms = module ? symbols.symbols_for(*module) : nullptr;
  if (!syms) return {};
  static const std::regex kRelease(R"(^1\.\d+\.\d+$)");
  const auto at = syms->find_bytes(std::string_view("\0" "1.", 3));
  if (!at) return {};
  char buf[16] = {};
  const std::size_t n = syms->elf().read_vaddr(*at + 1, buf, sizeof buf - 1);
  const std::string text(buf, strnlen(buf, n));
  return std::regex_match(text, kRelease) ? text : std::string();
}

}  // namespace

std::optional<std::uint64_t> secret_from_auxv(const Image& image) {
  const auto random = image.auxv_value(kAtRandom);
  if (!random || *random == 0) return std::nullopt;
  return image.read_u64(*random + 8);
}

namespace {

bool named_musl(const Module& module) {
  const std::string_view name = module.name();
  return name.starts_with("ld-musl-") || name.starts_with("libc.musl-") ||
         module.path.find("-linux-musl/libc.so") != std::string::npos;
}

}  // namespace

bool is_musl(const Module& module, const SymbolIndex& symbols) {
  if (named_musl(module)) return true;
  if (symbols.address_of(module, kContextSymbol) || symbols.address_of(module, "__simple_malloc")) return true;
  return symbols.address_of(module, "__libc_malloc_impl") && symbols.address_of(module, "__malloc_alloc_meta");
}

bool is_musl_process(const Image& image, const SymbolIndex& symbols) {
  // By name, then the executable's symbols (a static program): no other module's symbol table is loaded.
  for (const Module& m : image.modules())
    if (named_musl(m) || (m.is_main_executable && is_musl(m, symbols))) return true;
  return false;
}

bool uses_simple_malloc(const Module& module, const SymbolIndex& symbols) {
  return symbols.address_of(module, "__simple_malloc") && !symbols.address_of(module, kContextSymbol) &&
         !symbols.address_of(module, "__malloc_alloc_meta");
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module* module,
                                      std::string* error) {
  Runtime rt;
  rt.module = module;
  rt.version = version_of(symbols, module);
  const std::optional<std::uint64_t> random_secret = secret_from_auxv(image);

  // The context: by symbol, else by the secret in the library's data.
  if (const auto at = module ? symbols.address_of(*module, kContextSymbol) : std::nullopt) {
    std::uint8_t ctx[ContextLayout{}.size];
    if (!image.read_exact(*at, ctx, sizeof ctx)) {
      *error = fmt::format("musl's malloc context (__malloc_context at 0x{:x}) is not in the image", *at);
      return std::nullopt;
    }
    if (u32_at(ctx, kContext.init_done) == 0) {
      rt.discovery.push_back({"__malloc_context", *at, "symbol (not initialised: nothing allocated yet)"});
      rt.warnings.push_back("musl's malloc has not allocated anything yet (its context is not initialised): the "
                            "heap is empty");
      return rt;
    }
    rt.context = *at;
    rt.secret = u64_at(ctx, kContext.secret);
    rt.discovery.push_back({"__malloc_context", *at, "symbol"});
    if (random_secret && *random_secret != rt.secret)
      rt.warnings.push_back(fmt::format("musl's malloc context holds a secret (0x{:x}) other than the one the "
                                        "process's AT_RANDOM bytes give (0x{:x}): its meta areas are checked "
                                        "against the context's",
                                        rt.secret, *random_secret));
  } else if (random_secret) {
    rt.secret = *random_secret;
    const auto found = scan_writable(
        image, data_of(image, symbols, module), [&](Address, std::uint64_t w) { return w == rt.secret; },
        [&](Address a) { return is_context(image, a, rt.secret); });
    if (found) {
      rt.context = *found;
      rt.discovery.push_back({"__malloc_context", *found, "scan of writable data for the secret (AT_RANDOM), checked"});
    }
  } else {
    *error = "musl's malloc context has no symbol here and the image has no AT_RANDOM bytes to find its secret by";
    return std::nullopt;
  }

  // The meta areas: the context's list, each checked by the secret; the scan for the secret when the list
  // is damaged or the context was not found.
  bool scan = rt.context == 0;
  if (rt.context) {
    std::unordered_set<Address> seen;
    const auto head = image.read_u64(rt.context + kContext.meta_area_head);
    const auto tail = image.read_u64(rt.context + kContext.meta_area_tail);
    Address at = head.value_or(0);
    while (at) {
      if (!is_area(image, at, rt.secret) || !seen.insert(at).second || rt.areas.size() >= kMaxAreas) {
        rt.warnings.push_back(fmt::format("musl's list of meta areas is damaged at 0x{:x} (not a meta area with this "
                                          "process's secret, or a loop): the other areas are looked for by the secret",
                                          at));
        // What the link points at may be an area whose check word is damaged: no scan finds it, so its groups
        // are missing whatever the scan finds (a loop loses nothing the scan cannot find).
        rt.areas_missing = !seen.contains(at);
        scan = true;
        break;
      }
      rt.areas.push_back(at);
      at = image.read_u64(at + kArea.next).value_or(0);
    }
    if (!scan && tail && (rt.areas.empty() ? *tail != 0 : rt.areas.back() != *tail)) {
      rt.warnings.push_back(fmt::format("musl's list of meta areas does not end at the context's last area "
                                        "(0x{:x}): the other areas are looked for by the secret",
                                        *tail));
      scan = true;
    }
    if (!scan)
      rt.discovery.push_back({"meta areas", rt.areas.empty() ? 0 : rt.areas.front(),
                              fmt::format("the context's list, secret-checked ({} areas)", rt.areas.size())});
  }
  if (scan) {
    const std::vector<Address> found = scan_areas(image, rt.secret);
    std::unordered_set<Address> listed(rt.areas.begin(), rt.areas.end());
    for (Address a : found)
      if (!listed.contains(a)) rt.areas.push_back(a);
    if (rt.areas.empty()) {
      *error = module ? fmt::format("no meta area of musl's malloc is in the image (no page of writable memory starts "
                                    "with the secret musl drew from AT_RANDOM), though {} is musl",
                                    module->path)
                      : "no meta area of musl's malloc (a page starting with the secret musl draws from AT_RANDOM)";
      return std::nullopt;
    }
    if (rt.areas_missing && found.empty()) rt.warnings.push_back("no meta area was found by the secret either");
    rt.discovery.push_back({"meta areas", rt.areas.front(),
                            fmt::format("scan of writable pages for the secret (AT_RANDOM), {} areas", rt.areas.size())});
  }
  if (!rt.context)
    rt.warnings.push_back("musl's malloc context was not found (no symbol, and no word of the library's data holds its "
                          "secret and heads its meta areas): summary cannot set its counters beside the walk's");
  return rt;
}

}  // namespace heapscope::musl
