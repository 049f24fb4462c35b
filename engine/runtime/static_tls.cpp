#include "runtime/static_tls.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace heapscope {

// The executable's block comes first, right below the thread pointer; a shared library's offset is
// read back from the initial-exec GOT slots the dynamic linker filled in for its own TLS variables
// (slot = addend - tls_offset).
std::vector<StaticTlsBlock> static_tls_blocks(const Image& image, const SymbolIndex& symbols) {
  std::vector<StaticTlsBlock> out;
  for (const Module& m : image.modules()) {
    const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : symbols.symbols_for(m);
    if (!syms) continue;
    for (const GElf_Phdr& ph : syms->elf().program_headers()) {
      if (ph.p_type != PT_TLS) continue;
      std::optional<std::int64_t> tls_offset;
      if (m.is_main_executable) {
        const std::uint64_t align = ph.p_align ? ph.p_align : 1;
        tls_offset = static_cast<std::int64_t>((ph.p_memsz + align - 1) / align * align);
      } else {
        for (const TlsRelocation& r : syms->tls_relocations()) {
          if (!r.symbol.empty() || r.module_id) continue;
          if (const auto slot = image.read_u64(m.load_bias + r.got_offset)) {
            tls_offset = static_cast<std::int64_t>(r.addend) - static_cast<std::int64_t>(*slot);
            break;
          }
        }
      }
      if (tls_offset) out.push_back({&m, -*tls_offset, ph.p_memsz});
    }
  }
  return out;
}

const Symbol* tls_symbol_covering(const SymbolIndex& symbols, const StaticTlsBlock& block, std::uint64_t offset) {
  const ModuleSymbols* syms = symbols.symbols_for(*block.module);
  if (!syms) return nullptr;
  for (const Symbol& s : syms->symbols())
    if (s.kind == SymbolKind::tls && offset >= s.value && offset < s.value + std::max<std::uint64_t>(s.size, 1))
      return &s;
  return nullptr;
}

std::string static_tls_variable(const Image& image, const SymbolIndex& symbols, Address tp, Address word) {
  const std::int64_t rel = static_cast<std::int64_t>(word - tp);
  for (const StaticTlsBlock& b : static_tls_blocks(image, symbols)) {
    if (rel < b.start || rel >= b.start + static_cast<std::int64_t>(b.size)) continue;
    const std::uint64_t offset = static_cast<std::uint64_t>(rel - b.start);
    const std::string where(b.module->name());
    if (const Symbol* s = tls_symbol_covering(symbols, b, offset)) {
      const std::string name = demangle(s->name);
      return offset == s->value ? fmt::format("{} in {}", name, where)
                                : fmt::format("{}+0x{:x} in {}", name, offset - s->value, where);
    }
    return fmt::format("TLS block of {} +0x{:x}", where, offset);
  }
  return {};
}

Address static_tls_start(const Image& image, Address tp, Address mapping_start) {
  constexpr std::uint64_t kMaxModules = 1 << 16;
  Address lowest = tp;
  const auto dtv = image.read_u64(tp + 8);
  const auto length = dtv && *dtv ? image.read_u64(*dtv - 16) : std::nullopt;
  if (!length || *length > kMaxModules) return lowest;
  for (std::uint64_t modid = 1; modid <= *length; ++modid) {
    const auto val = image.read_u64(*dtv + 16 * modid);
    const auto to_free = image.read_u64(*dtv + 16 * modid + 8);
    if (val && to_free && *to_free == 0 && *val >= mapping_start && *val < lowest) lowest = *val & ~Address{7};
  }
  return lowest;
}

}  // namespace heapscope
