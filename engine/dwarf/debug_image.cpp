#include "dwarf/debug_image.h"

#include <gelf.h>
#include <libdeflate.h>
#include <libelf.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace heapscope {

namespace {

struct Section {
  std::string name;
  GElf_Shdr header{};
  const std::byte* data = nullptr;  // the file's bytes: compressed ones past their Elf64_Chdr
  std::size_t data_size = 0;
  bool compressed = false;
  std::uint64_t size = 0, align = 1;  // in the image
  std::uint64_t offset = 0;
};

std::uint64_t aligned(std::uint64_t offset, std::uint64_t align) {
  return align > 1 ? (offset + align - 1) / align * align : offset;
}

// The sections the image takes, or nullopt when the file is one to leave to libdw.
std::optional<std::vector<Section>> debug_sections(Elf* elf) {
  std::size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return std::nullopt;
  std::vector<Section> out;
  bool any_compressed = false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    Section s;
    if (!gelf_getshdr(scn, &s.header)) return std::nullopt;
    const char* name = elf_strptr(elf, names, s.header.sh_name);
    if (!name) return std::nullopt;
    s.name = name;
    const std::string_view n = s.name;
    if (n == ".gnu_debugaltlink" || n.starts_with(".zdebug")) return std::nullopt;
    if (!n.starts_with(".debug_") || s.header.sh_type == SHT_NOBITS) continue;
    Elf_Data* raw = elf_rawdata(scn, nullptr);
    if (!raw || (raw->d_size && !raw->d_buf)) return std::nullopt;
    s.data = static_cast<const std::byte*>(raw->d_buf);
    s.data_size = raw->d_size;
    s.align = s.header.sh_addralign;
    s.size = s.data_size;
    if (s.header.sh_flags & SHF_COMPRESSED) {
      Elf64_Chdr chdr;
      if (s.data_size < sizeof chdr) return std::nullopt;
      std::memcpy(&chdr, s.data, sizeof chdr);
      if (chdr.ch_type != ELFCOMPRESS_ZLIB || chdr.ch_size > (std::uint64_t{1} << 34)) return std::nullopt;
      s.compressed = any_compressed = true;
      s.size = chdr.ch_size;
      s.align = chdr.ch_addralign;
      s.data += sizeof chdr;
      s.data_size -= sizeof chdr;
    }
    out.push_back(std::move(s));
  }
  if (!any_compressed) return std::nullopt;
  return out;
}

class Decompressor {
 public:
  Decompressor() : d_(libdeflate_alloc_decompressor()) {}
  ~Decompressor() { libdeflate_free_decompressor(d_); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
  // Whether `in` (a zlib stream) inflates to exactly `size` bytes at `out`.
  bool inflate(const std::byte* in, std::size_t in_size, std::byte* out, std::size_t size) {
    std::size_t got = 0;
    return d_ && libdeflate_zlib_decompress(d_, in, in_size, out, size, &got) == LIBDEFLATE_SUCCESS && got == size;
  }

 private:
  libdeflate_decompressor* d_;
};

}  // namespace

std::optional<DebugImage> inflated_debug_image(int fd) {
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return std::nullopt;
  struct End {
    Elf* e;
    ~End() { elf_end(e); }
  } end{elf};
  GElf_Ehdr file_header;
  if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &file_header) || file_header.e_ident[EI_CLASS] != ELFCLASS64 ||
      file_header.e_ident[EI_DATA] != ELFDATA2LSB || file_header.e_type == ET_REL)
    return std::nullopt;
  std::optional<std::vector<Section>> sections = debug_sections(elf);
  if (!sections) return std::nullopt;

  // Layout: the ELF header, each section at its alignment, the section names, the section headers.
  std::uint64_t offset = sizeof(Elf64_Ehdr);
  std::string names(1, '\0');
  std::vector<std::uint32_t> name_at;
  for (Section& s : *sections) {
    offset = s.offset = aligned(offset, s.align);
    offset += s.size;
    name_at.push_back(static_cast<std::uint32_t>(names.size()));
    names.append(s.name).push_back('\0');
  }
  const std::uint64_t names_offset = offset;
  const auto names_name = static_cast<std::uint32_t>(names.size());
  names.append(".shstrtab").push_back('\0');
  const std::uint64_t headers_offset = aligned(names_offset + names.size(), 8);
  const std::size_t header_count = sections->size() + 2;  // the null section and .shstrtab besides
  DebugImage image;
  image.size = headers_offset + header_count * sizeof(Elf64_Shdr);
  image.bytes = std::make_unique_for_overwrite<std::byte[]>(image.size);
  std::byte* const base = image.bytes.get();

  Decompressor decompressor;
  std::uint64_t filled = sizeof(Elf64_Ehdr);  // bytes before `filled` are written; gaps are zeroed
  for (const Section& s : *sections) {
    std::memset(base + filled, 0, s.offset - filled);
    if (s.compressed) {
      if (!decompressor.inflate(s.data, s.data_size, base + s.offset, s.size)) return std::nullopt;
    } else if (s.size) {
      std::memcpy(base + s.offset, s.data, s.size);
    }
    filled = s.offset + s.size;
  }
  std::memcpy(base + names_offset, names.data(), names.size());
  std::memset(base + names_offset + names.size(), 0, headers_offset - names_offset - names.size());

  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, file_header.e_ident, EI_NIDENT);
  header.e_type = file_header.e_type;
  header.e_machine = file_header.e_machine;
  header.e_version = file_header.e_version;
  header.e_flags = static_cast<Elf64_Word>(file_header.e_flags);
  header.e_ehsize = sizeof(Elf64_Ehdr);
  header.e_shoff = headers_offset;
  header.e_shentsize = sizeof(Elf64_Shdr);
  header.e_shnum = static_cast<Elf64_Half>(header_count);
  header.e_shstrndx = static_cast<Elf64_Half>(header_count - 1);
  std::memcpy(base, &header, sizeof header);

  std::vector<Elf64_Shdr> headers(header_count);  // [0] stays the null section
  for (std::size_t i = 0; i < sections->size(); ++i) {
    const Section& s = (*sections)[i];
    Elf64_Shdr& h = headers[i + 1];
    h.sh_name = name_at[i];
    h.sh_type = s.header.sh_type;
    h.sh_flags = s.header.sh_flags & ~static_cast<std::uint64_t>(SHF_COMPRESSED);
    h.sh_offset = s.offset;
    h.sh_size = s.size;
    h.sh_addralign = s.align;
    h.sh_entsize = s.header.sh_entsize;
  }
  Elf64_Shdr& strings = headers.back();
  strings.sh_name = names_name;
  strings.sh_type = SHT_STRTAB;
  strings.sh_offset = names_offset;
  strings.sh_size = names.size();
  strings.sh_addralign = 1;
  std::memcpy(base + headers_offset, headers.data(), header_count * sizeof(Elf64_Shdr));
  return image;
}

}  // namespace heapscope
