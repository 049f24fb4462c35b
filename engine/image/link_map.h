// Module discovery from a process's own memory: the dynamic linker's list of loaded objects
// (r_debug -> link_map chain) and the ELF headers modules leave mapped at their base.
//
// These work over a plain memory reader rather than an Image so that every process source (an ELF core
// while it is still being assembled, a live process through /proc/PID/mem) can share them. Every walk
// is bounded: the memory may be corrupted, and garbage pointers must end in a warning, not a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "image/image.h"

namespace heapscope {

// Copies up to len bytes at addr into out; returns how many leading bytes were available.
using MemoryReader = std::function<std::size_t(Address addr, void* out, std::size_t len)>;

MemoryReader memory_reader_for(const Image& image);

// One struct link_map (glibc <link.h>) as found in the process.
struct LinkMapEntry {
  Address node = 0;    // address of the struct link_map itself
  Address l_addr = 0;  // load bias: runtime address = file vaddr + l_addr
  Address l_ld = 0;    // runtime address of the object's dynamic section
  std::string name;    // l_name: "" for the main executable, the soname/path otherwise
  bool name_readable = true;
};

inline constexpr std::size_t kMaxLinkMapEntries = 65536;

// Follows r_debug.r_map and the l_next chain. Stops at the end of the list, at an unreadable node, at a
// node seen before (a cycle) or after max_entries nodes; the last three add a warning.
std::vector<LinkMapEntry> walk_link_map(const MemoryReader& read, Address r_debug,
                                        std::vector<std::string>* warnings,
                                        std::size_t max_entries = kMaxLinkMapEntries);

// Where the executable's DT_DEBUG entry points (the dynamic linker's struct r_debug), found through
// AT_PHDR/AT_PHNUM -> PT_DYNAMIC. Null for static executables (no PT_DYNAMIC; no warning) and when the
// chain cannot be followed or the linker has not filled DT_DEBUG yet (with a warning).
std::optional<Address> find_r_debug(const MemoryReader& read, const std::vector<AuxvEntry>& auxv,
                                    std::vector<std::string>* warnings);

struct LinkMapResult {
  Address r_debug = 0;  // 0 when not found
  std::vector<LinkMapEntry> entries;
};

// find_r_debug + walk_link_map.
LinkMapResult read_link_map(const MemoryReader& read, const std::vector<AuxvEntry>& auxv,
                            std::vector<std::string>* warnings);

// What an ELF image mapped in memory says about itself: read from its ELF header (at the start of the
// mapping of file offset 0), its program headers and its PT_NOTE segments.
struct MappedElfInfo {
  Address load_bias = 0;                // header address - link-time address of file offset 0
  std::optional<std::string> build_id;  // lowercase hex; absent if the image has none or it is not mapped
  bool notes_readable = true;           // false if a PT_NOTE segment could not be read from memory
};

// Null when there is no readable 64-bit ELF header at header_addr.
std::optional<MappedElfInfo> inspect_mapped_elf(const MemoryReader& read, Address header_addr);

}  // namespace heapscope
