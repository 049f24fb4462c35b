#include "image/link_map.h"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <unordered_set>

#include "elf/elf_file.h"

namespace heapscope {

namespace {

// Field offsets in glibc's struct r_debug and struct link_map on x86-64 (<link.h>).
constexpr std::size_t kRDebugMapOffset = 8;
struct RawLinkMap {  // the public head of struct link_map
  std::uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};
static_assert(sizeof(RawLinkMap) == 40);
constexpr std::size_t kMaxPathLength = 4096;
// The kernel refuses executables whose program headers exceed 64 KiB, about 1170 entries.
constexpr std::size_t kMaxProgramHeaders = 4096;
constexpr std::size_t kMaxDynamicEntries = 4096;
constexpr std::size_t kMaxNoteSegmentSize = 1 << 16;

bool read_exact(const MemoryReader& read, Address addr, void* out, std::size_t len) {
  return read(addr, out, len) == len;
}

std::optional<std::string> read_c_string(const MemoryReader& read, Address addr) {
  std::string out;
  char chunk[64];
  while (out.size() < kMaxPathLength) {
    const std::size_t got = read(addr + out.size(), chunk, sizeof chunk);
    if (got == 0) return std::nullopt;
    const void* nul = std::memchr(chunk, '\0', got);
    if (nul) {
      out.append(chunk, static_cast<const char*>(nul) - chunk);
      return out;
    }
    out.append(chunk, got);
  }
  return std::nullopt;
}

void warn(std::vector<std::string>* warnings, std::string message) {
  if (warnings) warnings->push_back(std::move(message));
}

std::optional<std::vector<Elf64_Phdr>> read_program_headers(const MemoryReader& read, Address addr,
                                                            std::size_t count) {
  if (count == 0 || count > kMaxProgramHeaders) return std::nullopt;
  std::vector<Elf64_Phdr> phdrs(count);
  if (!read_exact(read, addr, phdrs.data(), count * sizeof(Elf64_Phdr))) return std::nullopt;
  return phdrs;
}

std::optional<Elf64_Ehdr> read_elf_header(const MemoryReader& read, Address addr) {
  Elf64_Ehdr eh;
  if (!read_exact(read, addr, &eh, sizeof eh)) return std::nullopt;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return std::nullopt;
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return std::nullopt;
  return eh;
}

// The executable's load bias from its own program headers: PT_PHDR says where the table lives at link
// time, AT_PHDR where it is now. Without PT_PHDR, look for the ELF header on the page holding the table.
std::optional<Address> executable_load_bias(const MemoryReader& read, Address phdr_addr,
                                            const std::vector<Elf64_Phdr>& phdrs) {
  for (const Elf64_Phdr& ph : phdrs)
    if (ph.p_type == PT_PHDR) return phdr_addr - ph.p_vaddr;
  const Address page = phdr_addr & ~Address{0xfff};
  const auto eh = read_elf_header(read, page);
  if (!eh || page + eh->e_phoff != phdr_addr) return std::nullopt;
  const auto info = inspect_mapped_elf(read, page);
  if (!info) return std::nullopt;
  return info->load_bias;
}

std::optional<Address> find_dt_debug_value(const MemoryReader& read, Address dynamic_addr,
                                           std::uint64_t dynamic_size, std::vector<std::string>* warnings) {
  const std::size_t count = static_cast<std::size_t>(
      std::min<std::uint64_t>(dynamic_size / sizeof(Elf64_Dyn), kMaxDynamicEntries));
  for (std::size_t i = 0; i < count; ++i) {
    Elf64_Dyn dyn;
    if (!read_exact(read, dynamic_addr + i * sizeof dyn, &dyn, sizeof dyn)) {
      warn(warnings, fmt::format("the executable's dynamic section at {:#x} is not readable, so the dynamic "
                                 "linker's module list is not used",
                                 dynamic_addr + i * sizeof dyn));
      return std::nullopt;
    }
    if (dyn.d_tag == DT_NULL) break;
    if (dyn.d_tag == DT_DEBUG) {
      if (dyn.d_un.d_ptr != 0) return dyn.d_un.d_ptr;
      warn(warnings, "DT_DEBUG is still 0 (the process stopped before the dynamic linker set it up), so "
                     "the dynamic linker's module list is not used");
      return std::nullopt;
    }
  }
  warn(warnings, "the executable's dynamic section has no DT_DEBUG entry, so the dynamic linker's module "
                 "list is not used");
  return std::nullopt;
}

}  // namespace

MemoryReader memory_reader_for(const Image& image) {
  return [&image](Address addr, void* out, std::size_t len) { return image.read(addr, out, len); };
}

std::vector<LinkMapEntry> walk_link_map(const MemoryReader& read, Address r_debug,
                                        std::vector<std::string>* warnings, std::size_t max_entries) {
  std::vector<LinkMapEntry> entries;
  std::uint64_t first_node = 0;
  if (!read_exact(read, r_debug + kRDebugMapOffset, &first_node, sizeof first_node)) {
    warn(warnings, fmt::format("the dynamic linker's r_debug at {:#x} is not readable", r_debug));
    return entries;
  }
  std::unordered_set<Address> visited;
  Address previous = 0;
  bool reported_bad_back_link = false;
  for (Address node = first_node; node != 0;) {
    if (entries.size() >= max_entries) {
      warn(warnings, fmt::format("the dynamic linker's module list has more than {} entries; it is probably "
                                 "corrupted, and only the first {} are used",
                                 max_entries, max_entries));
      break;
    }
    if (!visited.insert(node).second) {
      warn(warnings, fmt::format("the dynamic linker's module list loops back to {:#x}; it is corrupted, and "
                                 "only the {} entries before the loop are used",
                                 node, entries.size()));
      break;
    }
    RawLinkMap raw;
    if (!read_exact(read, node, &raw, sizeof raw)) {
      warn(warnings, fmt::format("link_map entry at {:#x} is not readable; the dynamic linker's module list "
                                 "ends there",
                                 node));
      break;
    }
    if (raw.l_prev != previous && !reported_bad_back_link) {
      reported_bad_back_link = true;
      warn(warnings, fmt::format("link_map entry at {:#x} has l_prev {:#x} instead of {:#x}; the dynamic "
                                 "linker's module list may be corrupted",
                                 node, raw.l_prev, previous));
    }
    LinkMapEntry entry;
    entry.node = node;
    entry.l_addr = raw.l_addr;
    entry.l_ld = raw.l_ld;
    if (raw.l_name != 0) {
      auto name = read_c_string(read, raw.l_name);
      entry.name_readable = name.has_value();
      if (name) entry.name = std::move(*name);
    }
    entries.push_back(std::move(entry));
    previous = node;
    node = raw.l_next;
  }
  return entries;
}

std::optional<Address> find_r_debug(const MemoryReader& read, const std::vector<AuxvEntry>& auxv,
                                    std::vector<std::string>* warnings) {
  const auto phdr_addr = auxv_lookup(auxv, AT_PHDR);
  const auto phnum = auxv_lookup(auxv, AT_PHNUM);
  if (auxv.empty()) {
    warn(warnings, "there is no auxiliary vector (NT_AUXV), so the dynamic linker's module list is not used");
    return std::nullopt;
  }
  if (!phdr_addr || !phnum) {
    warn(warnings, "the auxiliary vector lacks AT_PHDR/AT_PHNUM, so the dynamic linker's module list is not used");
    return std::nullopt;
  }
  const auto phent = auxv_lookup(auxv, AT_PHENT);
  if (phent && *phent != sizeof(Elf64_Phdr)) {
    warn(warnings, fmt::format("AT_PHENT is {}, not {}; the executable's program headers are not used", *phent,
                               sizeof(Elf64_Phdr)));
    return std::nullopt;
  }
  const auto phdrs = read_program_headers(read, *phdr_addr, static_cast<std::size_t>(*phnum));
  if (!phdrs) {
    warn(warnings, fmt::format("the executable's {} program headers at {:#x} are not readable, so the dynamic "
                               "linker's module list is not used",
                               *phnum, *phdr_addr));
    return std::nullopt;
  }
  const Elf64_Phdr* dynamic = nullptr;
  for (const Elf64_Phdr& ph : *phdrs)
    if (ph.p_type == PT_DYNAMIC) dynamic = &ph;
  if (!dynamic) return std::nullopt;  // statically linked: there is no dynamic linker to ask
  const auto bias = executable_load_bias(read, *phdr_addr, *phdrs);
  if (!bias) {
    warn(warnings, "the executable's load address cannot be worked out (no PT_PHDR and no ELF header in "
                   "memory), so the dynamic linker's module list is not used");
    return std::nullopt;
  }
  return find_dt_debug_value(read, *bias + dynamic->p_vaddr, dynamic->p_memsz, warnings);
}

LinkMapResult read_link_map(const MemoryReader& read, const std::vector<AuxvEntry>& auxv,
                            std::vector<std::string>* warnings) {
  LinkMapResult result;
  const auto r_debug = find_r_debug(read, auxv, warnings);
  if (!r_debug) return result;
  result.r_debug = *r_debug;
  result.entries = walk_link_map(read, *r_debug, warnings);
  return result;
}

std::optional<MappedElfInfo> inspect_mapped_elf(const MemoryReader& read, Address header_addr) {
  const auto eh = read_elf_header(read, header_addr);
  if (!eh) return std::nullopt;
  const auto phdrs = read_program_headers(read, header_addr + eh->e_phoff, eh->e_phnum);
  if (!phdrs) return std::nullopt;
  const Elf64_Phdr* first_load = nullptr;
  for (const Elf64_Phdr& ph : *phdrs)
    if (ph.p_type == PT_LOAD && !first_load) first_load = &ph;
  if (!first_load) return std::nullopt;

  MappedElfInfo info;
  info.load_bias = header_addr - (first_load->p_vaddr - first_load->p_offset);
  for (const Elf64_Phdr& ph : *phdrs) {
    if (ph.p_type != PT_NOTE || info.build_id) continue;
    if (ph.p_filesz > kMaxNoteSegmentSize) {
      info.notes_readable = false;
      continue;
    }
    std::vector<std::byte> notes(static_cast<std::size_t>(ph.p_filesz));
    if (!read_exact(read, info.load_bias + ph.p_vaddr, notes.data(), notes.size())) {
      info.notes_readable = false;
      continue;
    }
    for_each_note(notes, [&](const ElfNote& note) {
      if (!info.build_id && note.type == NT_GNU_BUILD_ID && note.name == "GNU" && !note.desc.empty())
        info.build_id = to_hex(note.desc);
    });
  }
  return info;
}

}  // namespace heapscope
