#include "sources/elf_core_image.h"

#include <elf.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "image/module_layout.h"
#include "image/process_arguments.h"
#include "image/x86_vector_state.h"
#include "sources/compressed_core.h"
#include "sources/core_segments.h"
#include "sources/process_identity.h"
#include "symbols/debuginfod_fetch.h"

namespace heapscope {

namespace {

// Layout of the x86-64 thread notes (struct elf_prstatus in <sys/procfs.h>; elf_prpsinfo: process_identity).
constexpr std::size_t kPrstatusSize = 336;
constexpr std::size_t kPrstatusPidOffset = 32;
constexpr std::size_t kPrstatusRegsOffset = 112;
constexpr std::size_t kNtFileHeaderSize = 16;  // count, page size
constexpr std::size_t kNtFileEntrySize = 24;   // start, end, file offset (in pages)

constexpr std::uint64_t kPageSize = 4096;

std::uint64_t page_down(std::uint64_t v) { return v & ~(kPageSize - 1); }
std::uint64_t page_up(std::uint64_t v) {
  return v > std::numeric_limits<std::uint64_t>::max() - (kPageSize - 1) ? page_down(v) : page_down(v + kPageSize - 1);
}

std::string machine_name(const GElf_Ehdr& eh) {
  if (eh.e_machine == EM_X86_64) return "32-bit x86-64 (x32)";  // only reached for ELFCLASS32
  switch (eh.e_machine) {
    case EM_AARCH64: return "AArch64";
    case EM_386: return "i386";
    case EM_ARM: return "32-bit ARM";
    case EM_PPC64: return "PowerPC 64";
    case EM_PPC: return "PowerPC";
    case EM_S390: return "s390x";
    case EM_RISCV: return "RISC-V";
    case EM_MIPS: return "MIPS";
    case EM_LOONGARCH: return "LoongArch";
    case EM_SPARCV9: return "SPARC V9";
    default: return fmt::format("machine type {}", eh.e_machine);
  }
}

std::uint64_t load_u64(std::span<const std::byte> bytes, std::size_t offset) {
  std::uint64_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

std::uint32_t load_u32(std::span<const std::byte> bytes, std::size_t offset) {
  std::uint32_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes < (1u << 20)) return fmt::format("{} bytes", bytes);
  return fmt::format("{} bytes ({:.1f} MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

class ElfCoreImage::Builder {
 public:
  Builder(ElfCoreImage& image, const CoreOpenOptions& opts) : img_(image), opts_(opts) {}

  bool load(const std::string& core_path, std::string* error) {
    img_.core_path_ = core_path;
    if (!open_core(core_path, error)) return false;
    if (!read_notes(error)) return false;
    add_segments();
    check_section_table();
    add_unsaved_file_mappings();
    if (img_.notes_lost_) recover_auxv_from_memory();
    discover_modules();
    build_regions();
    warn_about_missing_stacks();
    // The arguments in memory are what pr_psargs was cut from (gdb writes only the program's path there).
    if (std::string in_memory = command_line_in_memory(img_); !in_memory.empty())
      img_.command_line_ = std::move(in_memory);
    return true;
  }

 private:
  // ---- core file and notes -------------------------------------------------------------------------

  bool open_core(const std::string& path, std::string* error) {
    auto fail = [&](std::string why) {
      if (error) *error = std::move(why);
      return false;
    };
    std::string open_error;
    // A compressed core (systemd-coredump's zstd, a .gz passed around) is read from its uncompressed copy,
    // found by its magic whatever its name.
    const Compression compression = compression_of(path);
    if (compression != Compression::none) {
      std::optional<UnpackedCore> unpacked = CoreCopyCache::process().unpack(path, compression, error);
      if (!unpacked) return false;
      img_.core_ = ElfFile::open(unpacked->path(), &open_error);
      if (!img_.core_)
        return fail(fmt::format("{} is {}-compressed, but what it holds is no core: {}", path,
                                compression_name(compression), open_error));
      if (unpacked->stream_cut())
        warn(fmt::format("{}'s {} stream ends early (the file was cut short): the core is read from the {} it held",
                         path, compression_name(compression), size_text(img_.core_->bytes().size())));
    } else {
      img_.core_ = ElfFile::open(path, &open_error);
    }
    if (!img_.core_) return fail(open_error);
    const GElf_Ehdr& eh = img_.core_->header();
    if (!img_.core_->is_core())
      return fail(fmt::format("{} is an ELF file but not a core dump (its type is {})", path, elf_type_name(eh)));
    if (!img_.core_->is_x86_64())
      return fail(fmt::format("unsupported architecture: heapscope reads x86-64 cores; {} is {}", path,
                              machine_name(eh)));
    // With PN_XNUM the real count lives in section 0, which libelf has already consulted.
    const std::uint64_t phnum = eh.e_phnum == PN_XNUM ? img_.core_->program_headers().size() : eh.e_phnum;
    const std::uint64_t table_end = eh.e_phoff + phnum * sizeof(Elf64_Phdr);
    if (phnum != 0 && table_end > img_.core_->bytes().size())
      return fail(fmt::format("{} is truncated before the end of its program headers ({} of {} bytes present)",
                              path, img_.core_->bytes().size(), table_end));
    return true;
  }

  static std::string elf_type_name(const GElf_Ehdr& eh) {
    switch (eh.e_type) {
      case ET_EXEC: return "ET_EXEC, an executable";
      case ET_DYN: return "ET_DYN, a shared object or PIE executable";
      case ET_REL: return "ET_REL, an object file";
      default: return fmt::format("{}", eh.e_type);
    }
  }

  // gdb writes a section header table after everything else: a file cut anywhere is short of it. Said after
  // what the cut lost of the notes and the memory, since nothing needs the table.
  void check_section_table() {
    const GElf_Ehdr& eh = img_.core_->header();
    const std::uint64_t table_end = eh.e_shoff + std::uint64_t{eh.e_shnum} * eh.e_shentsize;
    if (eh.e_shoff != 0 && table_end > img_.core_->bytes().size()) {
      const std::uint64_t missing = table_end - std::max<std::uint64_t>(eh.e_shoff, img_.core_->bytes().size());
      img_.missing_metadata_bytes_ += missing;
      warn(fmt::format("core file {} is truncated: {} of its section header table are missing (the table is not "
                       "needed; the memory segments say for themselves whether they are complete)",
                       img_.core_path_, size_text(missing)));
    }
  }

  bool read_notes(std::string* error) {
    bool has_note_segment = false;
    bool any_note_bytes = false;
    bool notes_cut_off = false;
    for (const GElf_Phdr& ph : img_.core_->program_headers()) {
      if (ph.p_type != PT_NOTE) continue;
      has_note_segment = true;
      const auto bytes = img_.core_->file_range(ph.p_offset, ph.p_filesz);
      notes_cut_off = notes_cut_off || bytes.size() < ph.p_filesz;
      if (bytes.empty()) continue;
      any_note_bytes = true;
      const bool complete = for_each_note(bytes, [&](const ElfNote& note) { read_note(note); });
      if (bytes.size() < ph.p_filesz) {
        img_.notes_cut_ = true;
        img_.missing_metadata_bytes_ += ph.p_filesz - bytes.size();
        warn(fmt::format("core file {} is truncated inside its notes: {} of {} are present; threads, mappings "
                         "and modules in the notes after the cut are missing",
                         img_.core_path_, size_text(bytes.size()), size_text(ph.p_filesz)));
      } else if (!complete) {
        warn("the core's notes are damaged; the notes after the damage are ignored");
      }
    }
    if (!has_note_segment) {
      if (error) *error = img_.core_path_ + " has no PT_NOTE segment, so it records no threads or mappings";
      return false;
    }
    if (!any_note_bytes && !notes_cut_off) {
      if (error) *error = img_.core_path_ + "'s PT_NOTE segment is empty, so it records no threads or mappings";
      return false;
    }
    if (!any_note_bytes) {
      // gdb writes the notes after the memory: a gdb core cut anywhere has lost them all, while the memory
      // before the cut, the ELF headers of the modules among it, is still there to read.
      img_.notes_lost_ = true;
      warn(fmt::format("core file {} is truncated before its notes (the file ends at byte {}): its threads, "
                       "registers, mapped files and auxiliary vector are unknown. Modules are found from the "
                       "executable's ELF header in memory and the dynamic linker's list; stacks are scanned as "
                       "plain memory, without registers or frames",
                       img_.core_path_, img_.core_->bytes().size()));
      return true;
    }
    if (img_.threads_.empty()) warn("the core has no thread (NT_PRSTATUS) notes");
    if (img_.pid_ == 0 && !img_.threads_.empty()) img_.pid_ = static_cast<int>(img_.threads_.front().tid);
    return true;
  }

  void read_note(const ElfNote& note) {
    if (note.name == "LINUX" && note.type == NT_X86_XSTATE)
      return read_vector_note(note.desc, "NT_X86_XSTATE", decode_xsave);
    if (note.name != "CORE") return;
    switch (note.type) {
      case NT_PRSTATUS: read_prstatus(note.desc); break;
      case NT_PRFPREG: read_vector_note(note.desc, "NT_PRFPREG", decode_fxsave); break;
      case NT_PRPSINFO: read_prpsinfo(note.desc); break;
      case NT_AUXV: read_auxv(note.desc); break;
      case NT_FILE: read_nt_file(note.desc); break;
      default: break;
    }
  }

  void read_prstatus(std::span<const std::byte> desc) {
    vector_notes_owner_ = false;  // until this thread is accepted: its register notes must not go to another
    if (desc.size() != kPrstatusSize) {
      warn(fmt::format("a thread note (NT_PRSTATUS) is {} bytes instead of {}; that thread is skipped", desc.size(),
                       kPrstatusSize));
      return;
    }
    ThreadState thread;
    thread.tid = load_u32(desc, kPrstatusPidOffset);
    std::memcpy(thread.regs.data(), desc.data() + kPrstatusRegsOffset, sizeof thread.regs);
    img_.threads_.push_back(std::move(thread));
    vector_notes_owner_ = true;
  }

  // A thread's SSE/AVX registers follow its NT_PRSTATUS: NT_PRFPREG (the FXSAVE area: xmm0-15) and
  // NT_X86_XSTATE (the XSAVE area: ymm0-15 too). The one with more lanes wins, whatever their order.
  using VectorDecoder = bool (*)(std::span<const std::byte>, VectorRegisters&, std::string*);
  void read_vector_note(std::span<const std::byte> desc, const char* note_name, VectorDecoder decode) {
    if (!vector_notes_owner_) return;  // its thread was skipped (or the note comes before any thread)
    ThreadState& thread = img_.threads_.back();
    VectorRegisters decoded;
    std::string problem;
    const bool any = decode(desc, decoded, &problem);
    if (!problem.empty())
      warn(fmt::format("the vector register note ({}) of thread tid {} is damaged: {}{}", note_name, thread.tid,
                       problem, any ? "" : "; pointers held only in its vector registers are not seen"));
    if (any && decoded.lanes_read >= thread.vector.lanes_read) thread.vector = decoded;
  }

  void read_prpsinfo(std::span<const std::byte> desc) {
    std::optional<ProcessNote> note = decode_process_note(desc);
    if (!note) {
      warn(fmt::format("the process note (NT_PRPSINFO) is only {} bytes; pid and name are unknown", desc.size()));
      return;
    }
    img_.pid_ = note->pid;
    img_.process_name_ = std::move(note->name);
    img_.command_line_ = std::move(note->command_line);
  }

  void read_auxv(std::span<const std::byte> desc) {
    for (std::size_t pos = 0; pos + 16 <= desc.size(); pos += 16) {
      const AuxvEntry entry{load_u64(desc, pos), load_u64(desc, pos + 8)};
      if (entry.type == AT_NULL) break;
      img_.auxv_.push_back(entry);
    }
  }

  // NT_FILE: count, page size, count × (start, end, offset in pages), then count NUL-terminated paths.
  void read_nt_file(std::span<const std::byte> desc) {
    if (desc.size() < kNtFileHeaderSize) {
      warn("the mapped-files note (NT_FILE) is too short to read; file mappings are unknown");
      return;
    }
    const std::uint64_t count = load_u64(desc, 0);
    const std::uint64_t page_size = load_u64(desc, 8);
    const std::uint64_t room = (desc.size() - kNtFileHeaderSize) / kNtFileEntrySize;
    if (count > room) {
      warn(fmt::format("the mapped-files note (NT_FILE) claims {} mappings but has room for at most {}; it is "
                       "corrupted and ignored",
                       count, room));
      return;
    }
    if (page_size == 0 || (page_size & (page_size - 1)) != 0 || page_size > (1u << 30)) {
      warn(fmt::format("the mapped-files note (NT_FILE) has an impossible page size {}; it is ignored", page_size));
      return;
    }
    std::size_t name_pos = kNtFileHeaderSize + static_cast<std::size_t>(count) * kNtFileEntrySize;
    std::size_t skipped = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (name_pos >= desc.size()) {
        warn(fmt::format("the mapped-files note (NT_FILE) lists {} mappings but only {} paths; the rest are "
                         "ignored",
                         count, i));
        break;
      }
      const char* name = reinterpret_cast<const char*>(desc.data() + name_pos);
      const std::size_t name_len = strnlen(name, desc.size() - name_pos);
      name_pos += name_len + 1;
      const std::size_t entry = kNtFileHeaderSize + static_cast<std::size_t>(i) * kNtFileEntrySize;
      FileMapping m;
      m.start = load_u64(desc, entry);
      m.end = load_u64(desc, entry + 8);
      const std::uint64_t pages = load_u64(desc, entry + 16);
      if (m.start >= m.end || pages > std::numeric_limits<std::uint64_t>::max() / page_size) {
        ++skipped;
        continue;
      }
      m.file_offset = pages * page_size;
      m.path.assign(name, name_len);
      file_mappings_.push_back(std::move(m));
    }
    if (skipped > 0)
      warn(fmt::format("{} entries of the mapped-files note (NT_FILE) are impossible and were ignored", skipped));
    std::sort(file_mappings_.begin(), file_mappings_.end(),
              [](const FileMapping& a, const FileMapping& b) { return a.start < b.start; });
  }

  // ---- address space -------------------------------------------------------------------------------

  const FileMapping* file_mapping_at(Address addr) const {
    auto it = std::upper_bound(file_mappings_.begin(), file_mappings_.end(), addr,
                               [](Address a, const FileMapping& m) { return a < m.start; });
    if (it == file_mappings_.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }

  void add_piece(Address start, Address end, Piece::Source source, const std::byte* data, bool fillable,
                 std::size_t origin) {
    if (start < end) img_.pieces_.push_back(Piece{start, end, source, data, fillable, origin});
  }

  std::size_t add_origin(Address start, std::uint32_t flags, bool permissions_known) {
    Origin origin;
    origin.start = start;
    origin.readable = !permissions_known || (flags & PF_R) != 0;
    origin.writable = (flags & PF_W) != 0;
    origin.executable = (flags & PF_X) != 0;
    origin.permissions_known = permissions_known;
    if (const FileMapping* m = file_mapping_at(start)) {
      origin.backing_path = m->path;
      origin.file_offset = m->file_offset + (start - m->start);
    }
    img_.origins_.push_back(std::move(origin));
    return img_.origins_.size() - 1;
  }

  // Each PT_LOAD gives up to three pieces: bytes present in the file; bytes the file should hold but
  // lacks (truncation: gone for good); bytes the writer chose to omit (p_filesz < p_memsz: a module
  // file may supply them).
  void add_segments() {
    std::size_t impossible = 0;
    std::uint64_t promised = 0;
    for (const CoreSegment& s : core_segments(*img_.core_, &impossible)) {
      promised += s.file_end - s.start;
      img_.missing_bytes_ += s.file_end - s.start - s.present.size();
      const std::size_t origin = add_origin(s.start, s.flags, true);
      const Address present_end = s.start + s.present.size();
      add_piece(s.start, present_end, Piece::Source::core, s.present.data(), false, origin);
      add_piece(present_end, s.file_end, Piece::Source::absent, nullptr, false, origin);
      add_piece(s.file_end, s.end, Piece::Source::absent, nullptr, true, origin);
    }
    if (impossible > 0)
      warn(fmt::format("{} memory segments of the core overlap others or wrap around the address space and were "
                       "ignored",
                       impossible));
    if (img_.missing_bytes_ > 0)
      warn(fmt::format("core file {} is truncated: {} of the {} its memory segments need are missing (the file "
                       "is {} bytes); reads stop at the missing bytes",
                       img_.core_path_, size_text(img_.missing_bytes_), size_text(promised),
                       img_.core_->bytes().size()));
  }

  // Mappings NT_FILE lists where the core has no segment (gdb writes none for unmodified read-only file
  // mappings such as .text): they become regions whose bytes only a module file can supply.
  void add_unsaved_file_mappings() {
    std::vector<std::pair<Address, Address>> covered;
    for (const Piece& p : img_.pieces_) covered.emplace_back(p.start, p.end);  // already sorted
    for (const FileMapping& m : file_mappings_) {
      Address cursor = m.start;
      auto it = std::upper_bound(covered.begin(), covered.end(), cursor,
                                 [](Address a, const std::pair<Address, Address>& c) { return a < c.second; });
      for (; it != covered.end() && it->first < m.end; ++it) {
        add_unsaved_range(cursor, std::min(it->first, m.end));
        cursor = std::max(cursor, it->second);
      }
      add_unsaved_range(cursor, m.end);
    }
    drop_overlapping_pieces();
  }

  void add_unsaved_range(Address start, Address end) {
    if (start >= end) return;
    add_piece(start, end, Piece::Source::absent, nullptr, true, add_origin(start, 0, false));
  }

  void drop_overlapping_pieces() {
    auto& pieces = img_.pieces_;
    std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
    std::vector<Piece> kept;
    kept.reserve(pieces.size());
    std::size_t dropped = 0;
    for (const Piece& p : pieces) {
      if (!kept.empty() && p.start < kept.back().end) {
        ++dropped;
        continue;
      }
      kept.push_back(p);
    }
    if (dropped > 0)
      warn(fmt::format("{} file mappings of the mapped-files note (NT_FILE) overlap others and were ignored", dropped));
    pieces = std::move(kept);
  }

  // Lets a verified module file supply the bytes the core omitted in [start, end), which the process
  // mapped from file_offset onwards. Past the end of the file the kernel maps zeros up to the page end.
  void overlay_module_file(Address start, Address end, const ElfFile& file, std::uint64_t file_offset) {
    const std::uint64_t file_size = file.bytes().size();
    const std::uint64_t file_bytes_mapped =
        file_offset < file_size ? std::min<std::uint64_t>(file_size - file_offset, end - start) : 0;
    const Address data_end = start + file_bytes_mapped;
    const Address zeros_end = std::min<Address>(end, page_up(data_end));
    std::vector<Piece> result;
    result.reserve(img_.pieces_.size() + 4);
    for (const Piece& p : img_.pieces_) {
      if (!p.fillable || p.source != Piece::Source::absent || p.end <= start || p.start >= end) {
        result.push_back(p);
        continue;
      }
      const Address lo = std::max(p.start, start);
      const Address data_hi = std::clamp(data_end, lo, p.end);
      const Address zeros_hi = std::clamp(zeros_end, data_hi, p.end);
      push_clipped(result, p, p.start, lo);
      if (lo < data_hi)
        result.push_back(Piece{lo, data_hi, Piece::Source::module_file,
                               file.bytes().data() + file_offset + (lo - start), false, p.origin});
      if (data_hi < zeros_hi) result.push_back(Piece{data_hi, zeros_hi, Piece::Source::zeros, nullptr, false, p.origin});
      push_clipped(result, p, zeros_hi, p.end);
      learn_permissions(img_.origins_[p.origin], file, file_offset + (lo - start));
    }
    img_.pieces_ = std::move(result);
  }

  static void push_clipped(std::vector<Piece>& out, const Piece& p, Address start, Address end) {
    if (start >= end) return;
    Piece part = p;
    part.start = start;
    part.end = end;
    out.push_back(part);
  }

  // NT_FILE records no permissions; the module's program header for that file offset does.
  static void learn_permissions(Origin& origin, const ElfFile& file, std::uint64_t file_offset) {
    if (origin.permissions_known) return;
    for (const GElf_Phdr& ph : file.program_headers()) {
      if (ph.p_type != PT_LOAD) continue;
      if (file_offset >= page_down(ph.p_offset) && file_offset < ph.p_offset + std::max<std::uint64_t>(ph.p_filesz, 1)) {
        origin.readable = (ph.p_flags & PF_R) != 0;
        origin.writable = (ph.p_flags & PF_W) != 0;
        origin.executable = (ph.p_flags & PF_X) != 0;
        origin.permissions_known = true;
        return;
      }
    }
  }

  // ---- a core without notes -------------------------------------------------------------------------

  // The executable among the ELF headers at the start of the core's segments: the object with an
  // interpreter (PT_INTERP) whose dynamic section has a set DT_DEBUG (libc has PT_INTERP too, but no
  // DT_DEBUG). Its program headers stand in for the lost auxiliary vector: AT_PHDR, AT_PHNUM and AT_ENTRY
  // are what the dynamic linker's list and the main executable's place are found by.
  void recover_auxv_from_memory() {
    const MemoryReader read = memory_reader_for(img_);
    for (const Origin& origin : img_.origins_) {
      Elf64_Ehdr eh;
      if (!origin.permissions_known || img_.read(origin.start, &eh, sizeof eh) != sizeof eh) continue;
      if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
          (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 128)
        continue;
      std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
      const std::size_t table = phdrs.size() * sizeof(Elf64_Phdr);
      if (img_.read(origin.start + eh.e_phoff, phdrs.data(), table) != table) continue;
      const auto interp = std::find_if(phdrs.begin(), phdrs.end(), [](auto& ph) { return ph.p_type == PT_INTERP; });
      const auto dynamic = std::find_if(phdrs.begin(), phdrs.end(), [](auto& ph) { return ph.p_type == PT_DYNAMIC; });
      const auto info = inspect_mapped_elf(read, origin.start);
      if (interp == phdrs.end() || dynamic == phdrs.end() || !info ||
          !has_dt_debug(info->load_bias + dynamic->p_vaddr, dynamic->p_memsz))
        continue;
      img_.auxv_ = {{AT_PHDR, origin.start + eh.e_phoff},
                    {AT_PHENT, sizeof(Elf64_Phdr)},
                    {AT_PHNUM, eh.e_phnum},
                    {AT_ENTRY, info->load_bias + eh.e_entry}};
      return;
    }
    warn("no executable's ELF header with a dynamic linker's list was found in the core's memory, so its modules "
         "(libc among them) are unknown");
  }

  bool has_dt_debug(Address dynamic, std::uint64_t size) const {
    for (std::uint64_t at = 0; at + sizeof(Elf64_Dyn) <= std::min<std::uint64_t>(size, 4096); at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      if (img_.read(dynamic + at, &dyn, sizeof dyn) != sizeof dyn || dyn.d_tag == DT_NULL) return false;
      if (dyn.d_tag == DT_DEBUG) return dyn.d_un.d_ptr != 0;
    }
    return false;
  }

  // ---- modules -------------------------------------------------------------------------------------

  // Grouping by file, build-id checks, link_map and the vdso are shared with the other image sources;
  // what is the core's own is that a verified file fills in the read-only bytes the core left out.
  void discover_modules() {
    ModuleLayoutInputs inputs;
    inputs.read = memory_reader_for(img_);
    inputs.mappings = file_mappings_;
    inputs.auxv = img_.auxv_;
    inputs.vdso_extent = find_vdso_extent();
    inputs.executable = opts_.executable;
    inputs.path_map = opts_.path_map;
    inputs.sysroot = opts_.sysroot;
    if (opts_.use_debuginfod) inputs.fetch_by_build_id = fetch_module_file;
    inputs.source_noun = "core";
    inputs.use_verified_file = [this](const FileMapping& m, const ElfFile& file) {
      overlay_module_file(m.start, m.end, file, m.file_offset);
    };
    ModuleLayout layout = heapscope::discover_modules(inputs, &img_.warnings_);
    img_.modules_ = std::move(layout.modules);
    img_.link_map_ = std::move(layout.link_map);
    for (auto& file : layout.verified_files) img_.module_files_.push_back(std::move(file));
  }

  static std::string fetch_module_file(const std::string& build_id, const std::string& module_path,
                                       std::string* warning) {
    const std::string name = std::filesystem::path(module_path).filename().string();
    DebuginfodFetch fetched = debuginfod_fetch(DebuginfodFile::executable, build_id, name);
    *warning = std::move(fetched.warning);
    return fetched.path;
  }

  // The whole segment the vdso (AT_SYSINFO_EHDR) lives in.
  std::optional<std::pair<Address, Address>> find_vdso_extent() const {
    const auto base = img_.auxv_value(AT_SYSINFO_EHDR);
    if (!base || *base == 0) return std::nullopt;
    const Piece* p = img_.piece_at(*base);
    if (!p) return std::nullopt;
    Address start = p->start, end = p->end;
    for (const Piece& q : img_.pieces_)
      if (q.origin == p->origin) {
        start = std::min(start, q.start);
        end = std::max(end, q.end);
      }
    return std::make_pair(start, end);
  }

  // ---- regions -------------------------------------------------------------------------------------

  void build_regions() {
    std::size_t last_origin = 0;
    for (const Piece& p : img_.pieces_) {
      const bool present = p.source != Piece::Source::absent;
      MemoryRegion* last = img_.regions_.empty() ? nullptr : &img_.regions_.back();
      const Origin& origin = img_.origins_[p.origin];
      if (last && last->end == p.start && last_origin == p.origin && last->bytes_present == present) {
        last->end = p.end;
        continue;
      }
      MemoryRegion r;
      r.start = p.start;
      r.end = p.end;
      r.readable = origin.readable;
      r.writable = origin.writable;
      r.executable = origin.executable;
      r.bytes_present = present;
      r.backing_path = origin.backing_path;
      if (!r.backing_path.empty()) r.file_offset = origin.file_offset + (p.start - origin.start);
      img_.regions_.push_back(std::move(r));
      last_origin = p.origin;
    }
  }

  // A coredump_filter without anonymous private memory (or a cut-off file) leaves threads without their
  // stacks; nothing else in the core says that they are gone.
  void warn_about_missing_stacks() {
    const std::vector<std::uint32_t> tids = threads_without_stack(img_);
    if (tids.empty()) return;
    warn(fmt::format("the core holds no stack memory for {} of its {} threads (tid {}): it was truncated or written "
                     "with a coredump_filter that leaves out anonymous memory; their frames are not scanned",
                     tids.size(), img_.threads_.size(), fmt::join(tids, ", ")));
  }

  void warn(std::string message) { img_.warnings_.push_back(std::move(message)); }

  ElfCoreImage& img_;
  const CoreOpenOptions& opts_;
  std::vector<FileMapping> file_mappings_;  // sorted by start
  bool vector_notes_owner_ = false;         // the last NT_PRSTATUS made a thread: its register notes are its
};

std::string ElfCoreImage::damage() const {
  if (!truncated()) return {};
  std::vector<std::string> lost;
  if (notes_lost_) lost.emplace_back("all its notes (threads, registers, mapped files)");
  if (notes_cut_) lost.emplace_back("the end of its notes (the threads and mapped files listed there)");
  if (missing_bytes_) lost.push_back(size_text(missing_bytes_) + " of its memory");
  if (lost.empty()) lost.emplace_back("its section header table, which nothing needs");
  // Without modules nothing says which allocator serves malloc, or where its structures are.
  const char* modules = modules_.empty() ? "; none of the process's modules is in what remains" : "";
  return fmt::format("{} is truncated at byte {} of {}: it lost {}{}", core_path_, core_->bytes().size(),
                     promised_size(), fmt::join(lost, " and "), modules);
}

std::uint64_t ElfCoreImage::promised_size() const {
  const GElf_Ehdr& eh = core_->header();
  std::uint64_t end = eh.e_shoff + std::uint64_t{eh.e_shnum} * eh.e_shentsize;
  for (const GElf_Phdr& ph : core_->program_headers()) end = std::max<std::uint64_t>(end, ph.p_offset + ph.p_filesz);
  return end;
}

std::unique_ptr<ElfCoreImage> ElfCoreImage::open(const std::string& core_path, const CoreOpenOptions& opts,
                                                 std::string* error) {
  std::unique_ptr<ElfCoreImage> image(new ElfCoreImage());
  Builder builder(*image, opts);
  if (!builder.load(core_path, error)) return nullptr;
  return image;
}

ElfCoreImage::~ElfCoreImage() = default;

std::optional<std::int64_t> file_mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

std::int64_t ElfCoreImage::capture_time_ns() const {
  if (std::optional<std::int64_t> mtime = file_mtime_ns(core_path_)) return *mtime;
  return Image::capture_time_ns();
}

std::string ElfCoreImage::description() const {
  return fmt::format("core file {} (pid {}, {})", core_path_, pid_, process_identity(*this, command_line_, process_name_));
}

const ElfCoreImage::Piece* ElfCoreImage::piece_at(Address addr) const {
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), addr,
                             [](Address a, const Piece& p) { return a < p.start; });
  if (it == pieces_.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

std::size_t ElfCoreImage::read(Address addr, void* out, std::size_t len) const {
  const Piece* p = nullptr;
  return read_piecewise(
      addr, out, len,
      [&](Address at) -> Address {
        p = piece_at(at);
        return p && p->source != Piece::Source::absent ? p->end : 0;
      },
      [&](Address at, std::byte* dst, std::size_t n) {
        if (p->source == Piece::Source::zeros)
          std::memset(dst, 0, n);
        else
          std::memcpy(dst, p->data + (at - p->start), n);
        return n;
      });
}

std::span<const std::byte> ElfCoreImage::view(Address addr, std::size_t len) const {
  const Piece* p = piece_at(addr);
  if (!p || len == 0 || !p->data) return {};
  if (len > p->end - addr) return {};
  return {p->data + (addr - p->start), len};
}

}  // namespace heapscope
