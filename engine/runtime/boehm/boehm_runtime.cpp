#include "runtime/boehm/boehm_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "runtime/boehm/boehm_layout.h"
#include "runtime/module_data.h"

namespace heapscope::boehm {

namespace {

// GC_get_version() is `mov $version, %eax; ret` with version = major << 16 | minor << 8 | micro.
std::string collector_version(const Image& image, const SymbolIndex& symbols, const Module& module) {
  const std::optional<Address> at = symbols.address_of(module, "GC_get_version");
  if (!at) return {};
  std::array<std::uint8_t, 6> code{};
  if (image.read(*at, code.data(), code.size()) != code.size() || code[0] != 0xb8 || code[5] != 0xc3) return {};
  const std::uint32_t v = code[1] | code[2] << 8 | code[3] << 16 | static_cast<std::uint32_t>(code[4]) << 24;
  return fmt::format("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff);
}

// GC_obj_kinds: its first three entries' free lists are the atomic, normal and uncollectable heads inside
// GC_arrays. The kinds after the built-in ones (gcj's, typed, disclaim) follow until an empty entry.
void find_kinds(const Image& image, const Module& module, const ModuleSymbols& syms, Runtime& rt) {
  const Address atomic = rt.arrays + ArraysLayout::atomic_free_lists;
  const Address normal = rt.arrays + ArraysLayout::normal_free_lists;
  const Address uncollectable = rt.arrays + ArraysLayout::uncollectable_free_lists;
  const auto kinds = scan_writable(
      image, writable_ranges(module, syms), [&](Address, std::uint64_t word) { return word == atomic; },
      [&](Address at) {
        return image.read_u64(at + ObjKindLayout::size).value_or(0) == normal &&
               image.read_u64(at + 2 * ObjKindLayout::size).value_or(0) == uncollectable;
      });
  if (!kinds) {
    rt.kind_free_lists = {atomic, normal, uncollectable, rt.arrays + ArraysLayout::atomic_uncollectable_free_lists};
    rt.kind_reclaim_lists.assign(rt.kind_free_lists.size(), 0);
    for (unsigned k = 0; k < rt.kind_free_lists.size(); ++k) rt.kind_pointer_free.push_back(kind_is_pointer_free(k));
    rt.kind_marked_by_procedure.assign(rt.kind_free_lists.size(), false);
    rt.warnings.push_back(
        "Boehm GC's object kinds (GC_obj_kinds) were not found: only the four built-in kinds' free lists are read, "
        "so free objects of other kinds (gcj, typed) count as in use");
    return;
  }
  for (unsigned k = 0; k < ObjKindLayout::max_kinds; ++k) {
    const Address entry = *kinds + k * ObjKindLayout::size;
    const Address heads = image.read_u64(entry + ObjKindLayout::free_lists).value_or(0);
    if (heads == 0) break;
    rt.kind_free_lists.push_back(heads);
    rt.kind_reclaim_lists.push_back(image.read_u64(entry + ObjKindLayout::reclaim_lists).value_or(0));
    // A length descriptor of 0 not grown by the object's size scans nothing (PTRFREE's, and a custom
    // kind's made the same way); a bitmap, a mark procedure or a per-object descriptor may scan words.
    const std::optional<std::uint64_t> descriptor = image.read_u64(entry + ObjKindLayout::descriptor);
    const std::optional<std::uint32_t> relocate = image.read_u32(entry + ObjKindLayout::relocate_descriptor);
    rt.kind_pointer_free.push_back(descriptor && relocate ? *descriptor == 0 && *relocate == 0
                                                          : kind_is_pointer_free(k));
    rt.kind_marked_by_procedure.push_back(descriptor && (*descriptor & kDescriptorTagMask) == kProcedureTag);
  }
  rt.discovery.push_back({"GC_obj_kinds", *kinds, "scan, checked"});
}

// Each thread's GC_thread_key, the only variable of libgc's TLS, which the library reaches through its
// module id (local-dynamic TLS: a DTPMOD64 slot the dynamic linker fills) and each thread's DTV
// (tcbhead_t.dtv at tp+8, entries {block, to_free} of 16 bytes). Threads the collector does not know (never
// registered) hold null there.
void find_thread_free_lists(const Image& image, const Module& module, const ModuleSymbols& syms, Runtime& rt) {
  constexpr std::uint64_t kMaxModuleId = 1 << 16;
  std::optional<std::uint64_t> module_id;
  for (const TlsRelocation& r : syms.tls_relocations())
    if (r.module_id && r.symbol.empty()) {
      module_id = image.read_u64(module.load_bias + r.got_offset);
      if (module_id) break;
    }
  if (!module_id || *module_id == 0 || *module_id > kMaxModuleId) {
    rt.warnings.push_back(
        "libgc's TLS module id was not found: objects on threads' local free lists count as in use");
    return;
  }
  for (std::uint32_t t = 0; t < image.threads().size(); ++t) {
    const Address tp = image.threads()[t].fs_base();
    const Address dtv = tp ? image.read_u64(tp + 8).value_or(0) : 0;
    const Address block = dtv ? image.read_u64(dtv + 16 * *module_id).value_or(0) : 0;
    // An unallocated dynamic TLS block is all ones (TLS_DTV_UNALLOCATED).
    if (block == 0 || block == ~Address{0}) continue;
    if (const Address lists = image.read_u64(block).value_or(0)) rt.thread_free_lists.emplace_back(t, lists);
  }
  rt.discovery.push_back({"GC_thread_key", module.load_bias, fmt::format("TLS module {}", *module_id)});
}

// What the collector counts as roots and pointers, read from the process: GC_no_dls (no module's data is
// a root unless registered, or pushed by the program's own procedure), GC_all_interior_pointers and the registered displacements, the ranges the
// program registered (GC_static_roots less those GC_register_dynamic_libraries adds for a module's data,
// marked temporary) and the ranges it excluded. What cannot be read keeps the most inclusive rule, with a
// warning: then fewer objects count as garbage, never more.
void read_rules(const Image& image, const SymbolIndex& symbols, const Module& module, Runtime& rt) {
  CollectorRules& rules = rt.rules;
  rules.code = {module.start, module.end};
  const auto int_at = [&](std::string_view symbol) -> std::optional<std::uint32_t> {
    const std::optional<Address> at = symbols.address_of(module, symbol);
    return at ? image.read_u32(*at) : std::nullopt;
  };
  const std::optional<std::uint32_t> no_dls = int_at("GC_no_dls");
  const std::optional<std::uint32_t> interior = int_at("GC_all_interior_pointers");
  // A program that pushes roots of its own (GC_set_push_other_roots: ECL pushes its core structure and its
  // symbols, in its library's data) says nowhere which: every module's data counts then.
  const std::optional<Address> push_at = symbols.address_of(module, "GC_push_other_roots");
  const Address pusher = push_at ? image.read_u64(*push_at).value_or(0) : 0;
  const bool program_pushes_roots = pusher != 0 && (pusher < module.start || pusher >= module.end);
  rules.module_data_roots = !no_dls || *no_dls == 0 || program_pushes_roots;
  rules.interior_pointers = !interior || *interior != 0;
  if (!rules.interior_pointers) {
    std::vector<std::uint8_t> valid(ArraysLayout::valid_offset_count);
    if (image.read(rt.arrays + ArraysLayout::valid_offsets, valid.data(), valid.size()) == valid.size()) {
      for (std::uint16_t d = 0; d < valid.size(); ++d)
        if (d == 0 || valid[d]) rules.valid_offsets.push_back(d);
    } else {
      rules.interior_pointers = true;
      rt.warnings.push_back("Boehm GC's valid displacements are unreadable: every interior pointer counts");
    }
  }
  const auto ranges_at = [&](Address table, std::uint64_t count, std::uint64_t max, std::uint64_t stride,
                             bool registered_only) {
    std::vector<HeapSegment> out;
    for (std::uint64_t i = 0; i < std::min(count, max); ++i) {
      const Address entry = table + i * stride;
      const Address start = image.read_u64(entry).value_or(0), end = image.read_u64(entry + 8).value_or(0);
      if (registered_only && image.read_u32(entry + ArraysLayout::static_root_tmp).value_or(1) != 0) continue;
      if (start < end) out.push_back({start, end});
    }
    std::sort(out.begin(), out.end(), [](const HeapSegment& a, const HeapSegment& b) { return a.start < b.start; });
    return out;
  };
  const std::optional<std::uint32_t> roots = image.read_u32(rt.arrays + ArraysLayout::n_root_sets);
  const std::optional<std::uint64_t> exclusions = image.read_u64(rt.arrays + ArraysLayout::excl_table_entries);
  if (!roots || !exclusions)
    rt.warnings.push_back("Boehm GC's registered and excluded roots are unreadable: only threads and modules' data count");
  rules.registered_roots = ranges_at(rt.arrays + ArraysLayout::static_roots, roots.value_or(0),
                                     ArraysLayout::max_root_sets, ArraysLayout::static_root_bytes, true);
  rules.excluded_roots = ranges_at(rt.arrays + ArraysLayout::excl_table, exclusions.value_or(0),
                                   ArraysLayout::max_exclusions, ArraysLayout::excl_bytes, false);
}

}  // namespace

// Only the executable (which may link the collector in statically, and then need export nothing) and a
// module that exports GC_malloc, its entry point (libgc.so, or a library that links it in with default
// visibility), can hold the collector: the other modules' whole symbol tables are not loaded for the
// question (on swipl's heap, libstdc++'s and libm's were a fifth of a command about one block).
const Module* find_collector(const Image& image, const SymbolIndex& symbols) {
  for (const Module& m : image.modules()) {
    if (!m.is_main_executable && !symbols.exports(m, "GC_malloc")) continue;
    if (symbols.address_of(m, "GC_arrays") && symbols.address_of(m, "GC_malloc")) return &m;
  }
  return nullptr;
}

std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* why_not) {
  const ModuleSymbols* syms = symbols.symbols_for(module);
  const Symbol* arrays = syms ? syms->find("GC_arrays") : nullptr;
  const std::optional<Address> at = symbols.address_of(module, "GC_arrays");
  if (!arrays || !at) {
    *why_not = fmt::format("{} has no GC_arrays symbol", module.name());
    return std::nullopt;
  }
  Runtime rt;
  rt.module = &module;
  rt.arrays = *at;
  rt.version = collector_version(image, symbols, module);
  if (arrays->size != ArraysLayout::size) {
    *why_not = fmt::format(
        "{}'s GC_arrays is {} bytes, not the {} of Boehm GC 8.2 as Debian 12 builds it (release {}): an unknown "
        "build of Boehm GC, whose structures heapscope does not know",
        module.name(), arrays->size, ArraysLayout::size, rt.version.empty() ? "unknown" : rt.version);
    return std::nullopt;
  }
  const std::optional<std::uint64_t> sections = image.read_u64(rt.arrays + ArraysLayout::n_heap_sects);
  if (!sections) {
    *why_not = fmt::format("Boehm GC's GC_arrays at {:#x} is not in the image", rt.arrays);
    return std::nullopt;
  }
  if (*sections == 0) {
    *why_not = "Boehm GC is loaded but has no heap yet (never initialised)";
    return std::nullopt;
  }
  rt.discovery.push_back({"GC_arrays", rt.arrays, "symbol, size checked"});
  find_kinds(image, module, *syms, rt);
  find_thread_free_lists(image, module, *syms, rt);
  read_rules(image, symbols, module, rt);
  return rt;
}

}  // namespace heapscope::boehm
