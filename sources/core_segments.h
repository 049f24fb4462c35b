// A core file's memory segments (PT_LOAD), as every reader of a core takes them: in address order, each
// with the bytes the file holds for it. A segment that overlaps an earlier one or wraps around the address
// space (a damaged core) is left out and counted.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"

namespace heapscope {

struct CoreSegment {
  Address start = 0;
  Address file_end = 0;  // start + the bytes the file should hold (p_filesz, at most p_memsz)
  Address end = 0;       // start + p_memsz: past file_end the writer left the bytes out
  std::span<const std::byte> present;  // what the file holds of [start, file_end): less when it is cut short
  std::uint32_t flags = 0;             // PF_R, PF_W, PF_X
};

// `ignored`, when given, receives how many segments were left out.
std::vector<CoreSegment> core_segments(const ElfFile& core, std::size_t* ignored = nullptr);

}  // namespace heapscope
