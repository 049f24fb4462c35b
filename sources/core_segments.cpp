#include "sources/core_segments.h"

#include <elf.h>

#include <algorithm>

namespace heapscope {

std::vector<CoreSegment> core_segments(const ElfFile& core, std::size_t* ignored) {
  std::vector<GElf_Phdr> loads;
  std::size_t impossible = 0;
  for (const GElf_Phdr& ph : core.program_headers()) {
    if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
    if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr) {
      ++impossible;
      continue;
    }
    loads.push_back(ph);
  }
  std::sort(loads.begin(), loads.end(), [](const GElf_Phdr& a, const GElf_Phdr& b) { return a.p_vaddr < b.p_vaddr; });
  std::vector<CoreSegment> out;
  for (const GElf_Phdr& ph : loads) {
    if (!out.empty() && ph.p_vaddr < out.back().end) {
      ++impossible;
      continue;
    }
    const std::uint64_t filesz = std::min(ph.p_filesz, ph.p_memsz);
    out.push_back({ph.p_vaddr, ph.p_vaddr + filesz, ph.p_vaddr + ph.p_memsz, core.file_range(ph.p_offset, filesz),
                   ph.p_flags});
  }
  if (ignored) *ignored = impossible;
  return out;
}

}  // namespace heapscope
