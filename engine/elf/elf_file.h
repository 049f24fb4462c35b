// ElfFile: one ELF file (executable, shared library, debug file or core) mapped privately and never
// written (libelf's elf_memory wants writable memory), with libelf
// on top for headers and sections. Shared by the core reader and the symbol loader so that ELF parsing
// lives in one place.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace heapscope {

struct ElfNote {
  std::uint32_t type = 0;
  std::string_view name;            // without the trailing NUL
  std::span<const std::byte> desc;  // payload
};

// Walks the notes in a PT_NOTE / SHT_NOTE payload. Stops quietly at the first malformed or truncated
// note (a damaged core must not crash the reader); returns false if it had to stop early.
bool for_each_note(std::span<const std::byte> data, const std::function<void(const ElfNote&)>& fn);

std::string to_hex(std::span<const std::byte> bytes);

class ElfFile {
 public:
  // Returns null and sets *error ("cannot open X: reason", "X is not an ELF file") on failure.
  static std::unique_ptr<ElfFile> open(const std::string& path, std::string* error);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  const std::string& path() const { return path_; }
  Elf* elf() const { return elf_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const GElf_Ehdr& header() const { return ehdr_; }
  bool is_x86_64() const { return ehdr_.e_machine == EM_X86_64 && ehdr_.e_ident[EI_CLASS] == ELFCLASS64; }
  bool is_core() const { return ehdr_.e_type == ET_CORE; }

  const std::vector<GElf_Phdr>& program_headers() const { return phdrs_; }
  // Bytes of the file in [offset, offset+size) clipped to what the file really holds (a truncated
  // file yields a shorter span).
  std::span<const std::byte> file_range(std::uint64_t offset, std::uint64_t size) const;

  // Section by name (null if absent); its data as stored in the file (empty for SHT_NOBITS).
  Elf_Scn* section(std::string_view name) const;
  std::span<const std::byte> section_bytes(Elf_Scn* scn) const;

  // GNU build-id from PT_NOTE segments or .note.gnu.build-id, as lowercase hex.
  std::optional<std::string> build_id() const;
  // Value of .gnu_debuglink's file name, if present.
  std::optional<std::string> debuglink() const;

  // File contents at a virtual address, through the PT_LOAD segments (bytes past p_filesz are zero).
  // Returns how many leading bytes were produced.
  std::size_t read_vaddr(std::uint64_t vaddr, void* out, std::size_t len) const;
  // First PT_LOAD's p_vaddr - p_offset (the link-time address of file offset 0), for load-bias math.
  std::optional<std::uint64_t> first_load_vaddr() const;

 private:
  ElfFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  Elf* elf_ = nullptr;
  GElf_Ehdr ehdr_{};
  std::vector<GElf_Phdr> phdrs_;
};

}  // namespace heapscope
