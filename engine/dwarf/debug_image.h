// The debug sections of a file whose DWARF is zlib-compressed (SHF_COMPRESSED: Debian's -dbg and -dbgsym
// packages), inflated by libdeflate into one ELF image in memory that libdw opens with elf_memory. libdw
// would inflate them itself when it opens the file, with zlib: libc6-dbg's 10 MB took 37 ms that way and
// take 14 ms here, and that load lies on the path of `top`'s names and of a debugger's first command.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

namespace heapscope {

struct DebugImage {
  std::unique_ptr<std::byte[]> bytes;
  std::size_t size = 0;
};

// The image of the file open at `fd`: its .debug_* sections (inflated where compressed) under an ELF
// header like the file's, and nothing else. Nullopt when there is nothing to inflate, or when the file is
// anything this does not cover (not 64-bit little-endian, relocatable, another compression, DWARF in a
// supplementary file named by .gnu_debugaltlink, a section that does not inflate to its stated size):
// libdw then opens the file itself, as it would have.
std::optional<DebugImage> inflated_debug_image(int fd);

}  // namespace heapscope
