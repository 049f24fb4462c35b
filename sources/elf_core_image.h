// ElfCoreImage: an Image over an x86-64 Linux ELF core file (written by the kernel or by gdb's gcore).
//
// Memory comes from the core's PT_LOAD segments, read in place from the mmapped file. Cores leave out
// read-only file-backed memory (the kernel writes p_filesz < p_memsz; gdb writes no segment at all and
// lists the mapping only in NT_FILE): those bytes are read from the module's file on disk, but only when
// its build-id matches the one the process had. Modules come from NT_FILE and from the dynamic linker's
// link_map list; threads, auxv and the process name from the other notes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "elf/elf_file.h"
#include "image/collected_image.h"
#include "image/link_map.h"

namespace heapscope {

struct CoreOpenOptions {
  std::string executable;  // --exe: file to use for the main executable instead of its recorded path
  // Prefix substitutions applied to module paths before opening them (first match wins), e.g.
  // {"/usr/lib", "/sysroot/usr/lib"} to read a core from another machine against a copy of its files.
  std::vector<std::pair<std::string, std::string>> path_map;
  // --sysroot: module files by their recorded paths under this directory (a copy of the machine the core
  // came from); empty: the paths as they are.
  std::string sysroot;
  // A module whose file is missing or another build is fetched by build-id from debuginfod (when
  // DEBUGINFOD_URLS names servers).
  bool use_debuginfod = true;
};

// A file's modification time in nanoseconds since the Unix epoch; nullopt when it cannot be read. A core's
// is when it was written, so cores taken over time sort by it.
std::optional<std::int64_t> file_mtime_ns(const std::string& path);

class ElfCoreImage : public CollectedImage {
 public:
  // Null with a one-sentence *error when the file is missing, not an ELF core, not x86-64, or has no
  // note segment. A truncated core opens (truncated() == true, a warning, missing bytes absent), even one
  // cut before all its notes (gdb writes them last): then it has no threads, and its modules are found
  // from the executable's ELF header in its memory.
  static std::unique_ptr<ElfCoreImage> open(const std::string& core_path, const CoreOpenOptions& opts,
                                            std::string* error);
  ~ElfCoreImage() override;

  std::string description() const override;
  std::string damage() const override;

  std::size_t read(Address addr, void* out, std::size_t len) const override;
  // Zero-copy when [addr, addr+len) lies in one stretch of bytes taken from one mmapped file: a single
  // PT_LOAD's bytes in the core, or one mapping's bytes in a verified module file. Empty otherwise.
  std::span<const std::byte> view(Address addr, std::size_t len) const override;

  int pid() const override { return pid_; }
  std::int64_t capture_time_ns() const override;  // the core file's modification time
  const std::string& process_name() const { return process_name_; }  // pr_fname: 16 bytes at most
  // The arguments joined by spaces: as the core's memory holds them (command_line_in_memory), else
  // NT_PRPSINFO's pr_psargs (their first 80 bytes); empty when unknown.
  const std::string& command_line() const { return command_line_; }
  const std::string& path() const { return core_path_; }
  // The file is shorter than its headers promise (disk full, ulimit -c, interrupted copy): memory
  // segments, notes or the section header table cut off.
  bool truncated() const { return missing_bytes_ + missing_metadata_bytes_ > 0; }
  // Bytes the truncated file lacks.
  std::uint64_t missing_bytes() const { return missing_bytes_ + missing_metadata_bytes_; }
  // The dynamic linker's list as found in the core (empty for static executables or when unreadable).
  const std::vector<LinkMapEntry>& link_map() const { return link_map_; }

 private:
  class Builder;  // assembles the image while opening (defined in the .cpp)

  // Where the bytes of one stretch of the address space come from.
  struct Piece {
    enum class Source { core, module_file, zeros, absent };
    Address start = 0;
    Address end = 0;
    Source source = Source::absent;
    const std::byte* data = nullptr;  // core or module file bytes for `start` (core, module_file)
    bool fillable = false;            // absent because the core omitted it, so a module file may supply it
    std::size_t origin = 0;           // index into origins_: the PT_LOAD or mapping it belongs to
  };
  // A PT_LOAD segment, or a file mapping the core has no segment for.
  struct Origin {
    Address start = 0;
    bool readable = true, writable = false, executable = false;
    std::string backing_path;
    std::uint64_t file_offset = 0;  // of `start` in backing_path
    bool permissions_known = true;  // false for a mapping only NT_FILE lists (it records no permissions)
  };

  ElfCoreImage() = default;
  const Piece* piece_at(Address addr) const;
  std::uint64_t promised_size() const;  // the file's size by its headers: the end of its last part

  std::string core_path_;
  std::unique_ptr<ElfFile> core_;
  std::vector<std::unique_ptr<ElfFile>> module_files_;
  std::vector<Piece> pieces_;  // sorted by start, non-overlapping
  std::vector<Origin> origins_;
  std::vector<LinkMapEntry> link_map_;
  int pid_ = 0;
  std::string process_name_;
  std::string command_line_;
  std::uint64_t missing_bytes_ = 0;       // of memory segments
  std::uint64_t missing_metadata_bytes_ = 0;  // of the notes and the section header table
  bool notes_lost_ = false;  // the file ends before any of its notes (gdb writes them last)
  bool notes_cut_ = false;   // the file ends inside its notes
};

}  // namespace heapscope
