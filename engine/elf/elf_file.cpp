#include "elf/elf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace heapscope {

namespace {

struct LibelfInit {
  LibelfInit() { elf_version(EV_CURRENT); }
};

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// "X is a FIFO, not a regular file": what the file is, so that a user sees why it was refused.
std::string not_a_regular_file(const std::string& path, mode_t mode) {
  const char* kind = S_ISFIFO(mode)   ? "a FIFO"
                     : S_ISDIR(mode)  ? "a directory"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "something else";
  return path + " is " + kind + ", not a regular file";
}

}  // namespace

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    const auto v = static_cast<unsigned>(b);
    out.push_back(kDigits[v >> 4]);
    out.push_back(kDigits[v & 15]);
  }
  return out;
}

bool for_each_note(std::span<const std::byte> data, const std::function<void(const ElfNote&)>& fn) {
  std::size_t pos = 0;
  while (pos + 12 <= data.size()) {
    std::uint32_t namesz, descsz, type;
    std::memcpy(&namesz, data.data() + pos, 4);
    std::memcpy(&descsz, data.data() + pos + 4, 4);
    std::memcpy(&type, data.data() + pos + 8, 4);
    pos += 12;
    const std::uint64_t name_span = align_up(namesz, 4);
    const std::uint64_t desc_span = align_up(descsz, 4);
    if (name_span > data.size() - pos) return false;
    ElfNote note;
    note.type = type;
    const char* name = reinterpret_cast<const char*>(data.data() + pos);
    std::size_t name_len = namesz;
    while (name_len > 0 && name[name_len - 1] == '\0') --name_len;
    note.name = std::string_view(name, name_len);
    pos += name_span;
    if (descsz > data.size() - pos) return false;
    note.desc = data.subspan(pos, descsz);
    fn(note);
    if (desc_span > data.size() - pos) return pos + descsz == data.size();
    pos += desc_span;
  }
  return pos == data.size();
}

std::unique_ptr<ElfFile> ElfFile::open(const std::string& path, std::string* error) {
  static LibelfInit init;
  auto fail = [&](const std::string& why) -> std::unique_ptr<ElfFile> {
    if (error) *error = why;
    return nullptr;
  };
  // Only a regular file is mapped. Looked at before opening: opening a FIFO waits for a writer, forever
  // (and opening a device may do something); O_NONBLOCK and fstat cover a file swapped in between.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail("cannot open " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(not_a_regular_file(path, st.st_mode));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail("cannot open " + path + ": " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(not_a_regular_file(path, st.st_mode));
  }
  if (st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return fail(path + " is not an ELF file (too short)");
  }
  void* map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return fail("cannot map " + path + ": " + std::strerror(errno));

  std::unique_ptr<ElfFile> file(new ElfFile());
  file->path_ = path;
  file->data_ = static_cast<const std::byte*>(map);
  file->size_ = static_cast<std::size_t>(st.st_size);
  if (std::memcmp(map, ELFMAG, SELFMAG) != 0) return fail(path + " is not an ELF file");
  file->elf_ = elf_memory(static_cast<char*>(map), file->size_);
  if (!file->elf_ || elf_kind(file->elf_) != ELF_K_ELF || !gelf_getehdr(file->elf_, &file->ehdr_))
    return fail(path + " is not a readable ELF file: " + elf_errmsg(-1));

  std::size_t phnum = 0;
  if (elf_getphdrnum(file->elf_, &phnum) == 0) {
    file->phdrs_.reserve(phnum);
    for (std::size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(file->elf_, static_cast<int>(i), &ph)) file->phdrs_.push_back(ph);
    }
  }
  return file;
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

std::span<const std::byte> ElfFile::file_range(std::uint64_t offset, std::uint64_t size) const {
  if (offset >= size_) return {};
  const std::uint64_t avail = size_ - offset;
  return {data_ + offset, static_cast<std::size_t>(size < avail ? size : avail)};
}

Elf_Scn* ElfFile::section(std::string_view name) const {
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(elf_, shstrndx, sh.sh_name);
    if (n && name == n) return scn;
  }
  return nullptr;
}

std::span<const std::byte> ElfFile::section_bytes(Elf_Scn* scn) const {
  GElf_Shdr sh;
  if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) return {};
  return file_range(sh.sh_offset, sh.sh_size);
}

std::optional<std::string> ElfFile::build_id() const {
  std::optional<std::string> id;
  auto scan = [&](std::span<const std::byte> notes) {
    for_each_note(notes, [&](const ElfNote& n) {
      if (!id && n.type == NT_GNU_BUILD_ID && n.name == "GNU" && !n.desc.empty()) id = to_hex(n.desc);
    });
  };
  for (const GElf_Phdr& ph : phdrs_)
    if (ph.p_type == PT_NOTE && !is_core()) scan(file_range(ph.p_offset, ph.p_filesz));
  if (!id) scan(section_bytes(section(".note.gnu.build-id")));
  return id;
}

std::optional<std::string> ElfFile::debuglink() const {
  const auto data = section_bytes(section(".gnu_debuglink"));
  if (data.empty()) return std::nullopt;
  const char* s = reinterpret_cast<const char*>(data.data());
  const std::size_t len = strnlen(s, data.size());
  if (len == 0 || len == data.size()) return std::nullopt;
  return std::string(s, len);
}

std::size_t ElfFile::read_vaddr(std::uint64_t vaddr, void* out, std::size_t len) const {
  auto* dst = static_cast<std::byte*>(out);
  std::size_t done = 0;
  while (done < len) {
    const std::uint64_t a = vaddr + done;
    const GElf_Phdr* seg = nullptr;
    for (const GElf_Phdr& ph : phdrs_)
      if (ph.p_type == PT_LOAD && a >= ph.p_vaddr && a < ph.p_vaddr + ph.p_memsz) seg = &ph;
    if (!seg) break;
    const std::uint64_t in_seg = a - seg->p_vaddr;
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, seg->p_memsz - in_seg));
    if (in_seg >= seg->p_filesz) {
      std::memset(dst + done, 0, n);  // .bss
    } else {
      n = static_cast<std::size_t>(std::min<std::uint64_t>(n, seg->p_filesz - in_seg));
      const auto src = file_range(seg->p_offset + in_seg, n);
      std::memcpy(dst + done, src.data(), src.size());
      if (src.size() < n) return done + src.size();
    }
    done += n;
  }
  return done;
}

std::optional<std::uint64_t> ElfFile::first_load_vaddr() const {
  for (const GElf_Phdr& ph : phdrs_)
    if (ph.p_type == PT_LOAD) return ph.p_vaddr - ph.p_offset;
  return std::nullopt;
}

}  // namespace heapscope
