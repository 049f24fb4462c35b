// Test utility: writes synthetic x86-64 Linux ELF core files, laid out the way the kernel writes them
// (ELF header, program headers, one PT_NOTE, then the PT_LOAD contents).
//
// Typical use:
//
//   CoreBuilder core;
//   core.process(4242, "server").thread(4242, {{Reg::fs_base, 0x7f0000001000}, {Reg::rip, 0x401000}});
//   MemoryBlock& heap = core.segment(0x555555559000, 0x21000);   // 132 KiB of zeroed, writable memory
//   heap.put_u64(0x555555559008, 0x291);                          // a hand-made malloc chunk header
//   core.auxv(AT_PAGESZ, 4096);
//   TempFile file("heap.core");
//   core.write(file.path());
//
// Memory is written with absolute addresses (MemoryBlock::put_*), so tests read like a memory map.
// A segment whose memsz exceeds its bytes mimics a core that omits memory (the kernel leaves out
// read-only file-backed pages); add_module_file() maps a real ELF file the way the kernel would dump it,
// so the image under test finds the module, checks its build-id and reads omitted bytes from the file.
#pragma once

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"

namespace heapscope::testing {

inline constexpr std::uint64_t kTestPageSize = 4096;

inline std::uint64_t test_page_up(std::uint64_t v) { return (v + kTestPageSize - 1) & ~(kTestPageSize - 1); }
inline std::uint64_t test_page_down(std::uint64_t v) { return v & ~(kTestPageSize - 1); }

// A file (or directory tree) under the temp directory, removed when the object dies.
class TempFile {
 public:
  explicit TempFile(std::string_view name_hint = "heapscope-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (std::string(name_hint) + ".XXXXXX")).string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed for " + pattern);
    ::close(fd);
    path_ = pattern;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Cuts a file to new_size bytes, the way a full disk or `ulimit -c` leaves a core.
inline void truncate_file(const std::string& path, std::uint64_t new_size) {
  std::filesystem::resize_file(path, new_size);
}

// Bytes of process memory at a fixed address. Writers take absolute addresses and throw if the
// write does not fit, so a wrong address in a test fails loudly instead of corrupting other data.
struct MemoryBlock {
  Address vaddr = 0;
  std::vector<std::byte> bytes;

  MemoryBlock() = default;
  MemoryBlock(Address at, std::size_t size) : vaddr(at), bytes(size) {}

  Address end() const { return vaddr + bytes.size(); }
  bool contains(Address addr, std::size_t len = 1) const { return addr >= vaddr && addr + len <= end(); }

  void put_bytes(Address addr, const void* data, std::size_t len) {
    if (!contains(addr, len)) throw std::out_of_range("MemoryBlock write outside the block");
    std::memcpy(bytes.data() + (addr - vaddr), data, len);
  }
  void put_u64(Address addr, std::uint64_t value) { put_bytes(addr, &value, sizeof value); }
  void put_u32(Address addr, std::uint32_t value) { put_bytes(addr, &value, sizeof value); }
  void put_string(Address addr, std::string_view s) {  // with its terminating NUL
    put_bytes(addr, s.data(), s.size());
    put_bytes(addr + s.size(), "", 1);
  }
  void fill(Address addr, std::size_t len, std::uint8_t value) {
    if (!contains(addr, len)) throw std::out_of_range("MemoryBlock fill outside the block");
    std::memset(bytes.data() + (addr - vaddr), value, len);
  }
  std::uint64_t get_u64(Address addr) const {
    if (!contains(addr, 8)) throw std::out_of_range("MemoryBlock read outside the block");
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + (addr - vaddr), 8);
    return v;
  }
};

struct CoreSegment {
  MemoryBlock memory;      // what the core holds: p_vaddr = memory.vaddr, p_filesz = memory.bytes.size()
  std::uint64_t memsz = 0;  // p_memsz; bytes past p_filesz are "omitted" by the core writer
  std::uint32_t flags = PF_R | PF_W;
};

struct CoreFileMapping {
  Address start = 0;
  Address end = 0;
  std::uint64_t file_offset = 0;  // bytes
  std::string path;
};

// Where write() put things, for tests that damage the file afterwards.
struct CoreLayout {
  std::uint64_t file_size = 0;
  std::uint64_t notes_offset = 0;
  std::uint64_t notes_size = 0;
  std::vector<std::uint64_t> segment_offsets;  // file offset of each segment's bytes, in segment order
};

class CoreBuilder {
 public:
  using RegisterValues = std::initializer_list<std::pair<Reg, std::uint64_t>>;

  CoreBuilder& machine(std::uint16_t e_machine) {
    machine_ = e_machine;
    return *this;
  }
  CoreBuilder& elf_type(std::uint16_t e_type) {
    type_ = e_type;
    return *this;
  }

  // NT_PRPSINFO. Without it the core carries no process name or pid.
  // The process note: pid, pr_fname (16 bytes of `name`) and pr_psargs (80 bytes of `command_line`, its
  // arguments joined by spaces as the kernel writes them).
  CoreBuilder& process(int pid, std::string name, std::string command_line = {}) {
    pid_ = pid;
    name_ = std::move(name);
    command_line_ = std::move(command_line);
    has_process_ = true;
    return *this;
  }

  // One NT_PRSTATUS; registers not named are zero.
  CoreBuilder& thread(std::uint32_t tid, RegisterValues regs = {}) {
    ThreadState t;
    t.tid = tid;
    for (const auto& [reg, value] : regs) t.regs[static_cast<int>(reg)] = value;
    threads_.push_back(t);
    thread_notes_.emplace_back();
    return *this;
  }

  // Values of xmm0-15 (or of ymm0-15's upper halves), two 8-byte lanes each.
  using VectorHalves = std::array<std::array<std::uint64_t, 2>, 16>;

  // NT_PRFPREG of the thread added last, written right after its NT_PRSTATUS as the kernel and gdb do:
  // an FXSAVE area (struct user_fpregs_struct) holding `xmm`. `size` other than 512: a wrong-size note.
  CoreBuilder& fxsave_note(const VectorHalves& xmm, std::size_t size = 512) {
    std::vector<std::byte> desc(std::max<std::size_t>(size, 512));
    store_halves(desc, 160, xmm);
    desc.resize(size);
    thread_notes_.back().push_back({NT_PRFPREG, "CORE", std::move(desc)});
    return *this;
  }

  // NT_X86_XSTATE of the thread added last: an XSAVE area in standard format holding `xmm` and, when
  // `ymm_high` is given, ymm0-15's upper halves (its header marking SSE, and AVX with ymm_high, present).
  // `size` (default: up to the end of the AVX component) smaller than that: a truncated note.
  CoreBuilder& xsave_note(const VectorHalves& xmm, const VectorHalves* ymm_high, std::size_t size = 832) {
    std::vector<std::byte> desc(std::max<std::size_t>(size, 832));
    store_halves(desc, 160, xmm);
    store(desc, 512, std::uint64_t{ymm_high ? 0x7u : 0x3u});  // XSTATE_BV: x87, SSE (and AVX)
    if (ymm_high) store_halves(desc, 576, *ymm_high);
    desc.resize(size);
    thread_notes_.back().push_back({NT_X86_XSTATE, "LINUX", std::move(desc)});
    return *this;
  }

  CoreBuilder& auxv(std::uint64_t type, std::uint64_t value) {
    auxv_.push_back({type, value});
    return *this;
  }

  // One NT_FILE entry. NT_FILE is written when at least one mapping was added.
  CoreBuilder& file_mapping(Address start, Address end, std::uint64_t file_offset, std::string path) {
    mappings_.push_back({start, end, file_offset, std::move(path)});
    return *this;
  }
  // The kernel writes offsets in 4096-byte pages; gdb writes page size 1 and byte offsets.
  CoreBuilder& nt_file_page_size(std::uint64_t page_size) {
    nt_file_page_size_ = page_size;
    return *this;
  }

  // A PT_LOAD whose first filesz bytes are in the core (zeroed, fill them through the returned block)
  // and whose memsz (default: filesz) is its size in memory. The reference stays valid.
  MemoryBlock& segment(Address vaddr, std::size_t filesz, std::uint64_t memsz = 0, std::uint32_t flags = PF_R | PF_W) {
    segments_.push_back({MemoryBlock(vaddr, filesz), memsz ? memsz : filesz, flags});
    return segments_.back().memory;
  }
  MemoryBlock& segment(MemoryBlock block, std::uint64_t memsz = 0, std::uint32_t flags = PF_R | PF_W) {
    const std::uint64_t size = block.bytes.size();
    segments_.push_back({std::move(block), memsz ? memsz : size, flags});
    return segments_.back().memory;
  }

  // The block holding addr, to poke bytes into memory already laid out (e.g. by add_module_file).
  MemoryBlock* block_at(Address addr) {
    for (CoreSegment& s : segments_)
      if (s.memory.contains(addr)) return &s.memory;
    return nullptr;
  }

  // Any extra note, e.g. a deliberately corrupt one. raw_note payloads are written after the standard
  // notes; without_standard_note() suppresses the standard note of that type.
  CoreBuilder& raw_note(std::uint32_t type, std::string name, std::vector<std::byte> desc) {
    raw_notes_.push_back({type, std::move(name), std::move(desc)});
    return *this;
  }
  CoreBuilder& without_standard_note(std::uint32_t type) {
    suppressed_.push_back(type);
    return *this;
  }

  // Maps a real ELF file at `base` (its load bias, a page multiple) as the kernel dumps it: NT_FILE
  // entries for each PT_LOAD; the first page (ELF header, program headers, build-id note) saved in the
  // core with the rest of that mapping omitted; read-only/executable segments omitted entirely
  // (memsz only); writable segments saved in full (file bytes, then zeroed .bss to the page end).
  // Returns the writable blocks so tests can plant data (e.g. in libc's main_arena).
  std::vector<MemoryBlock*> add_module_file(const std::string& path, Address base) {
    std::string error;
    auto file = ElfFile::open(path, &error);
    if (!file) throw std::runtime_error(error);
    std::vector<MemoryBlock*> writable;
    Address previous_end = 0;
    for (const GElf_Phdr& ph : file->program_headers()) {
      if (ph.p_type != PT_LOAD) continue;
      // Two segments may share a page; here the earlier one keeps it so core segments never overlap.
      const Address start = std::max<Address>(test_page_down(base + ph.p_vaddr), previous_end);
      const Address file_end = base + ph.p_vaddr + ph.p_filesz;
      const Address mem_end = test_page_up(base + ph.p_vaddr + ph.p_memsz);
      const std::uint64_t offset = test_page_down(ph.p_offset) + (start - test_page_down(base + ph.p_vaddr));
      previous_end = std::max<Address>(test_page_up(file_end), mem_end);
      const std::uint32_t flags = (ph.p_flags & (PF_R | PF_W | PF_X));
      file_mapping(start, test_page_up(file_end), offset, path);
      if (ph.p_flags & PF_W) {
        MemoryBlock& block = segment(start, mem_end - start, 0, flags);
        const auto bytes = file->file_range(offset, file_end - start);
        block.put_bytes(start, bytes.data(), bytes.size());
        writable.push_back(&block);
      } else if (offset == 0) {
        MemoryBlock& block = segment(start, kTestPageSize, test_page_up(file_end) - start, flags);
        const auto bytes = file->file_range(0, kTestPageSize);
        block.put_bytes(start, bytes.data(), bytes.size());
      } else {
        segment(start, 0, test_page_up(file_end) - start, flags);
      }
    }
    return writable;
  }

  std::vector<std::byte> build(CoreLayout* layout = nullptr) const {
    const std::vector<std::byte> notes = build_notes();
    const std::size_t phnum = 1 + segments_.size();
    const std::uint64_t notes_offset = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr);
    std::uint64_t offset = align8(notes_offset + notes.size());
    std::vector<std::uint64_t> segment_offsets;
    for (const CoreSegment& s : segments_) {
      segment_offsets.push_back(offset);
      offset = align8(offset + s.memory.bytes.size());
    }
    std::vector<std::byte> out(offset);

    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = type_;
    eh.e_machine = machine_;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<std::uint16_t>(phnum);
    std::memcpy(out.data(), &eh, sizeof eh);

    std::vector<Elf64_Phdr> phdrs;
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = notes_offset;
    note.p_filesz = notes.size();
    note.p_align = 4;
    phdrs.push_back(note);
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      const CoreSegment& s = segments_[i];
      Elf64_Phdr ph{};
      ph.p_type = PT_LOAD;
      ph.p_flags = s.flags;
      ph.p_offset = segment_offsets[i];
      ph.p_vaddr = s.memory.vaddr;
      ph.p_filesz = s.memory.bytes.size();
      ph.p_memsz = s.memsz;
      ph.p_align = kTestPageSize;
      phdrs.push_back(ph);
      std::memcpy(out.data() + segment_offsets[i], s.memory.bytes.data(), s.memory.bytes.size());
    }
    std::memcpy(out.data() + sizeof eh, phdrs.data(), phdrs.size() * sizeof(Elf64_Phdr));
    std::memcpy(out.data() + notes_offset, notes.data(), notes.size());

    if (layout) *layout = CoreLayout{out.size(), notes_offset, notes.size(), segment_offsets};
    return out;
  }

  CoreLayout write(const std::string& path) const {
    CoreLayout layout;
    write_file(path, build(&layout));
    return layout;
  }

 private:
  struct RawNote {
    std::uint32_t type;
    std::string name;
    std::vector<std::byte> desc;
  };

  static std::uint64_t align8(std::uint64_t v) { return (v + 7) & ~std::uint64_t{7}; }

  bool suppressed(std::uint32_t type) const {
    for (std::uint32_t t : suppressed_)
      if (t == type) return true;
    return false;
  }

  static void append_note(std::vector<std::byte>& out, std::uint32_t type, std::string_view name,
                          const std::vector<std::byte>& desc) {
    auto put32 = [&](std::uint32_t v) {
      const auto* p = reinterpret_cast<const std::byte*>(&v);
      out.insert(out.end(), p, p + 4);
    };
    auto pad4 = [&] {
      while (out.size() % 4) out.push_back(std::byte{0});
    };
    put32(static_cast<std::uint32_t>(name.size() + 1));
    put32(static_cast<std::uint32_t>(desc.size()));
    put32(type);
    const auto* n = reinterpret_cast<const std::byte*>(name.data());
    out.insert(out.end(), n, n + name.size());
    out.push_back(std::byte{0});
    pad4();
    out.insert(out.end(), desc.begin(), desc.end());
    pad4();
  }

  template <typename T>
  static void store(std::vector<std::byte>& desc, std::size_t offset, const T& value) {
    std::memcpy(desc.data() + offset, &value, sizeof value);
  }

  static void store_halves(std::vector<std::byte>& desc, std::size_t offset, const VectorHalves& halves) {
    for (std::size_t r = 0; r < halves.size(); ++r)
      for (std::size_t lane = 0; lane < 2; ++lane) store(desc, offset + 16 * r + 8 * lane, halves[r][lane]);
  }

  std::vector<std::byte> build_notes() const {
    std::vector<std::byte> out;
    if (has_process_ && !suppressed(NT_PRPSINFO)) {
      std::vector<std::byte> desc(136);  // struct elf_prpsinfo on x86-64
      store(desc, 24, static_cast<std::int32_t>(pid_));
      std::memcpy(desc.data() + 40, name_.data(), std::min<std::size_t>(name_.size(), 16));
      std::memcpy(desc.data() + 56, command_line_.data(), std::min<std::size_t>(command_line_.size(), 80));
      append_note(out, NT_PRPSINFO, "CORE", desc);
    }
    if (!suppressed(NT_PRSTATUS)) {
      for (std::size_t i = 0; i < threads_.size(); ++i) {
        const ThreadState& t = threads_[i];
        std::vector<std::byte> desc(336);  // struct elf_prstatus on x86-64
        store(desc, 32, t.tid);
        std::memcpy(desc.data() + 112, t.regs.data(), sizeof t.regs);
        append_note(out, NT_PRSTATUS, "CORE", desc);
        for (const RawNote& n : thread_notes_[i]) append_note(out, n.type, n.name, n.desc);
      }
    }
    if (!auxv_.empty() && !suppressed(NT_AUXV)) {
      std::vector<std::byte> desc((auxv_.size() + 1) * 16);  // ends with AT_NULL
      for (std::size_t i = 0; i < auxv_.size(); ++i) {
        store(desc, i * 16, auxv_[i].type);
        store(desc, i * 16 + 8, auxv_[i].value);
      }
      append_note(out, NT_AUXV, "CORE", desc);
    }
    if (!mappings_.empty() && !suppressed(NT_FILE)) {
      std::vector<std::byte> desc(16 + mappings_.size() * 24);
      store(desc, 0, std::uint64_t{mappings_.size()});
      store(desc, 8, nt_file_page_size_);
      for (std::size_t i = 0; i < mappings_.size(); ++i) {
        store(desc, 16 + i * 24, mappings_[i].start);
        store(desc, 16 + i * 24 + 8, mappings_[i].end);
        store(desc, 16 + i * 24 + 16, mappings_[i].file_offset / nt_file_page_size_);
      }
      for (const CoreFileMapping& m : mappings_) {
        const auto* p = reinterpret_cast<const std::byte*>(m.path.c_str());
        desc.insert(desc.end(), p, p + m.path.size() + 1);
      }
      append_note(out, NT_FILE, "CORE", desc);
    }
    for (const RawNote& n : raw_notes_) append_note(out, n.type, n.name, n.desc);
    return out;
  }

  std::uint16_t machine_ = EM_X86_64;
  std::uint16_t type_ = ET_CORE;
  bool has_process_ = false;
  int pid_ = 0;
  std::string name_;
  std::string command_line_;
  std::vector<ThreadState> threads_;
  std::vector<std::vector<RawNote>> thread_notes_;  // per thread: notes written after its NT_PRSTATUS
  std::vector<AuxvEntry> auxv_;
  std::vector<CoreFileMapping> mappings_;
  std::uint64_t nt_file_page_size_ = kTestPageSize;
  std::deque<CoreSegment> segments_;  // a deque: references returned by segment() stay valid
  std::vector<RawNote> raw_notes_;
  std::vector<std::uint32_t> suppressed_;
};

// A minimal ELF shared object: one PT_LOAD covering the whole file, a PT_NOTE with the given GNU
// build-id, and `payload` at file offset (and link-time address) kModulePayloadOffset. Map it with
// map_module() to get a module the core only partly holds.
inline constexpr std::uint64_t kModulePayloadOffset = 0x1000;

inline std::vector<std::byte> make_elf_module(const std::vector<std::uint8_t>& build_id,
                                              const std::vector<std::byte>& payload) {
  std::vector<std::byte> note;
  auto put32 = [&](std::uint32_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    note.insert(note.end(), p, p + 4);
  };
  put32(4);
  put32(static_cast<std::uint32_t>(build_id.size()));
  put32(NT_GNU_BUILD_ID);
  for (char c : std::string_view("GNU\0", 4)) note.push_back(static_cast<std::byte>(c));
  for (std::uint8_t b : build_id) note.push_back(static_cast<std::byte>(b));
  while (note.size() % 4) note.push_back(std::byte{0});

  const std::uint64_t note_offset = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
  const std::uint64_t size = kModulePayloadOffset + payload.size();
  std::vector<std::byte> out(size);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  Elf64_Phdr phdrs[2]{};
  phdrs[0].p_type = PT_LOAD;
  phdrs[0].p_flags = PF_R | PF_X;
  phdrs[0].p_filesz = phdrs[0].p_memsz = size;
  phdrs[0].p_align = kTestPageSize;
  phdrs[1].p_type = PT_NOTE;
  phdrs[1].p_flags = PF_R;
  phdrs[1].p_offset = phdrs[1].p_vaddr = note_offset;
  phdrs[1].p_filesz = phdrs[1].p_memsz = note.size();
  phdrs[1].p_align = 4;
  std::memcpy(out.data(), &eh, sizeof eh);
  std::memcpy(out.data() + sizeof eh, phdrs, sizeof phdrs);
  std::memcpy(out.data() + note_offset, note.data(), note.size());
  std::memcpy(out.data() + kModulePayloadOffset, payload.data(), payload.size());
  return out;
}

// Maps a make_elf_module() image at base as the kernel dumps it: NT_FILE entry for the whole file, the
// first page (ELF header and build-id note) saved in the core, the rest omitted (p_filesz < p_memsz).
// `module_bytes` is what the process had loaded; the file at `path` may differ (a mismatch test).
inline void map_module(CoreBuilder& core, const std::string& path, Address base,
                       const std::vector<std::byte>& module_bytes) {
  const std::uint64_t mapped = test_page_up(module_bytes.size());
  core.file_mapping(base, base + mapped, 0, path);
  MemoryBlock first_page(base, kTestPageSize);
  first_page.put_bytes(base, module_bytes.data(), std::min<std::size_t>(module_bytes.size(), kTestPageSize));
  core.segment(std::move(first_page), mapped, PF_R | PF_X);
}

}  // namespace heapscope::testing
