#include "runtime/module_data.h"

#include <elf.h>

namespace heapscope {

WritableRanges writable_ranges(const Module& module, const ModuleSymbols& symbols) {
  WritableRanges out;
  for (const GElf_Phdr& ph : symbols.elf().program_headers())
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W))
      out.emplace_back((module.load_bias + ph.p_vaddr) & ~Address{7}, module.load_bias + ph.p_vaddr + ph.p_memsz);
  return out;
}

std::optional<Address> scan_writable(const Image& image, const WritableRanges& ranges,
                                     const std::function<bool(Address, std::uint64_t)>& word_matches,
                                     const std::function<bool(Address)>& try_at) {
  for (const auto& [start, end] : ranges) {
    std::vector<std::uint64_t> words((end - start) / 8);
    const std::size_t got = image.read(start, words.data(), words.size() * 8) / 8;
    for (std::size_t i = 0; i < got; ++i) {
      const Address at = start + 8 * i;
      if (word_matches(at, words[i]) && try_at(at)) return at;
    }
  }
  return std::nullopt;
}

}  // namespace heapscope
