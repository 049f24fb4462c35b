// CoreFileMemory: the bytes a core file's PT_LOAD segments hold, read in place from the file mapped into
// memory. For a core LLDB has loaded these are the bytes LLDB's own core reader serves; reading them here
// spares a round trip through the LLDB thread for every page (at 5M blocks LLDB's first `heap leaks`
// took 4 s where GDB's, whose core the engine opens itself, took 0.3 s).
//
// LLDB 16 has no SB call that names the file a core process was loaded from (SBProcess::GetCoreFile came
// in LLDB 17), but LLDB maps the core it loads: the candidates are the ELF cores among this process's own
// mappings, and the image uses one only once it holds the bytes LLDB reads (lldb_image.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"

namespace heapscope::lldb_plugin {

class CoreFileMemory {
 public:
  // Null unless `path` is an ELF core file.
  static std::unique_ptr<CoreFileMemory> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const ElfFile& file() const { return *file_; }
  // The bytes the file holds from `addr` to the end of its segment's bytes in the file; empty where it
  // holds none: outside every segment, or in what the core left out of one (p_filesz < p_memsz, or a
  // file cut short).
  std::span<const std::byte> bytes_at(Address addr) const;
  // Copies what the file holds from `addr` on, across adjacent segments, up to the first byte it lacks;
  // returns how many bytes it copied.
  std::size_t read(Address addr, void* out, std::size_t len) const;

 private:
  struct Segment {
    Address start = 0, end = 0;  // the bytes present in the file: [start, end)
    const std::byte* data = nullptr;
  };
  std::unique_ptr<ElfFile> file_;
  std::vector<Segment> segments_;  // by start, not overlapping (sources/core_segments.h)
};

// The paths of the ELF core files mapped into this process (LLDB maps the cores it loads), each once, in
// the order /proc/self/maps lists them.
std::vector<std::string> mapped_core_files();

}  // namespace heapscope::lldb_plugin
