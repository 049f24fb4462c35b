// Module discovery shared by the image sources that know a process's file mappings — an ELF core's
// NT_FILE note, a live process's /proc/PID/maps: mappings are grouped by file, ELF objects recognised by
// the headers they left in memory, files on disk checked against the build-id the process had, load
// biases taken from the dynamic linker's link_map (with a fallback from the headers), and the vdso added.
//
// The sources differ only in where memory comes from and in what a verified file is good for (a core
// fills in the read-only bytes it omitted from it), so those come in as inputs, not as subclasses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"
#include "image/link_map.h"

namespace heapscope {

// One file mapping of the process.
struct FileMapping {
  Address start = 0;
  Address end = 0;
  std::uint64_t file_offset = 0;  // in bytes
  std::string path;
};

struct ModuleLayoutInputs {
  MemoryReader read;                     // the process's memory
  std::vector<FileMapping> mappings;     // sorted by start, non-overlapping
  std::vector<AuxvEntry> auxv;           // AT_ENTRY, AT_SYSINFO_EHDR, AT_PHDR... of the process
  // The address range of the vdso's mapping, when the source knows one (the vdso is no file mapping).
  std::optional<std::pair<Address, Address>> vdso_extent;
  std::string executable;  // file to use for the main executable instead of its recorded path
  // Prefix substitutions applied to module paths before opening them (first match wins).
  std::vector<std::pair<std::string, std::string>> path_map;
  // A directory holding a copy of the process's machine: module paths not substituted above are looked
  // up under it (gdb's `set sysroot`). Empty: the paths as they are.
  std::string sysroot;
  // Fetches a module's file by the build-id the process had, for a module whose file is missing or another
  // build (debuginfod): the path of the fetched file, or empty, with *warning set when the fetch itself
  // failed. May be empty.
  std::function<std::string(const std::string& build_id, const std::string& module_path, std::string* warning)>
      fetch_by_build_id;
  // How warnings name the source of memory: "core" or "process".
  std::string source_noun = "core";
  // Called for each mapping of a module whose file matched the build-id in memory, before the link_map
  // walk (which may need those bytes); a core fills the bytes it omitted from the file. May be empty.
  std::function<void(const FileMapping&, const ElfFile&)> use_verified_file;
};

struct ModuleLayout {
  std::vector<Module> modules;          // sorted by start
  std::vector<LinkMapEntry> link_map;   // the dynamic linker's list as found (empty when unreadable)
  std::vector<std::unique_ptr<ElfFile>> verified_files;  // the files checked against memory, still open
};

// Problems (unusable files, build-id mismatches, a corrupted link_map) go to *warnings.
ModuleLayout discover_modules(const ModuleLayoutInputs& inputs, std::vector<std::string>* warnings);

}  // namespace heapscope
