// Uncompressed copies of compressed debug files (Debian's -dbg and -dbgsym packages compress their DWARF:
// dwarf/debug_image.h inflates it), kept under the user's cache directory. libdw reads a copy as it reads
// any uncompressed debug file: mapped from the file, in pages the kernel may drop and read again, where an
// image inflated in memory is the process's own until it ends (10 MB for libc6-dbg's libc; a large
// program's debug file inflates to gigabytes, beside a core of as many). The inflating itself (14 ms for
// libc) is then done once per debug file, not once per command.
//
// A copy is named after its compressed file's identity (device, inode, size, modification time: a new
// package version is a new file), and is used only when whole: it ends in a trailer that repeats that
// identity and holds a CRC-32 of all before it, checked on every open. It appears by a rename, never
// half-written; a copy that fails a check is ignored and written again. The directory keeps the most
// recently written kMaxCopies copies and kMaxBytes.
#pragma once

#include <cstdint>
#include <string>

#include "dwarf/debug_image.h"

namespace heapscope {

class DebugFileCache {
 public:
  static constexpr std::size_t kMaxCopies = 16;
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{4} << 30;

  // Copies live in `dir` (made when first needed); empty: no copies, images stay in memory.
  explicit DebugFileCache(std::string dir) : dir_(std::move(dir)) {}

  // A read-only descriptor of the whole copy of the debug file open at `fd`; -1 when there is none.
  int open_copy(int fd) const;
  // Writes `image` (the inflated image of the debug file open at `fd`) as its copy and gives a read-only
  // descriptor of it; -1 when it cannot be written (the image is then read from memory).
  int save_copy(int fd, const DebugImage& image) const;

  // The process's cache: set by the frontend (the CLI: docs/usage.md, "Debug file cache"); none by default.
  static const DebugFileCache& process();
  static void set_process_dir(std::string dir);

 private:
  std::string dir_;
};

}  // namespace heapscope
