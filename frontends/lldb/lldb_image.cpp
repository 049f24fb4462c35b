#include "frontends/lldb/lldb_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <fstream>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "elf/elf_file.h"
#include "frontends/common/thread_pointers.h"
#include "frontends/lldb/thread_pointers.h"
#include "runtime/builtin/builtin_runtimes.h"
#include "image/process_arguments.h"
#include "sources/live_process_image.h"
#include "sources/process_identity.h"

namespace heapscope::lldb_plugin {

namespace {

constexpr Address kPageSize = 4096;

Address page_down(Address a) { return a & ~(kPageSize - 1); }
Address page_up(Address a) { return (a + kPageSize - 1) & ~(kPageSize - 1); }

std::string path_of(const lldb::SBFileSpec& spec) {
  if (!spec.IsValid()) return "";
  char buffer[4096];
  const std::uint32_t length = spec.GetPath(buffer, sizeof buffer);
  return length > 0 && length < sizeof buffer ? std::string(buffer, length) : std::string();
}

// LLDB prints an ELF build-id as an upper-case UUID with dashes ("2367CAD6-115E-...").
std::string build_id_of(const lldb::SBModule& module) {
  const char* uuid = module.GetUUIDString();
  std::string hex;
  for (const char* c = uuid ? uuid : ""; *c; ++c)
    if (*c != '-') hex += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  return hex;
}

// "[heap]", "[stack]", "[vdso]": /proc/PID/maps's names for memory no file backs.
bool is_pseudo_file_name(const std::string& name) { return !name.empty() && name.front() == '['; }

// LLDB's register names where they differ from the kernel's user_regs_struct's.
const char* lldb_register_name(Reg r) { return r == Reg::eflags ? "rflags" : register_name(r); }

std::map<std::string, std::uint64_t> general_registers(lldb::SBFrame frame) {
  std::map<std::string, std::uint64_t> values;
  lldb::SBValueList sets = frame.GetRegisters();
  for (std::uint32_t s = 0; s < sets.GetSize(); ++s) {
    lldb::SBValue set = sets.GetValueAtIndex(s);
    const char* set_name = set.GetName();
    // The general purpose set comes first; fs_base may sit in it or (in some LLDB versions) elsewhere.
    const bool general = s == 0 || (set_name && std::string_view(set_name).find("General") != std::string_view::npos);
    for (std::uint32_t i = 0; i < set.GetNumChildren(); ++i) {
      lldb::SBValue reg = set.GetChildAtIndex(i);
      const char* name = reg.GetName();
      if (!name || (!general && std::string_view(name) != "fs_base" && std::string_view(name) != "gs_base")) continue;
      lldb::SBError error;
      const std::uint64_t value = reg.GetValueAsUnsigned(error, 0);
      if (error.Success()) values.emplace(name, value);
    }
  }
  return values;
}

}  // namespace

LldbImage::LldbImage(lldb::SBProcess process, ServingThread& lldb_thread)
    : process_(process), lldb_thread_(lldb_thread) {
  const char* plugin = process_.GetPluginName();
  is_core_ = plugin && std::string_view(plugin) == "elf-core";
  pid_ = static_cast<int>(process_.GetProcessID());
  read_regions();
  cache_ = std::make_unique<PageCache>(
      [this](Address addr, void* out, std::size_t len) { return read_from_lldb(addr, out, len); },
      [this](Address addr) {
        const MemoryRegion* r = region_at(addr);
        return r ? r->end : addr;
      });
  if (!is_core_) open_proc_memory();
  read_modules();
  name_file_backed_regions();
  read_threads();
  complete_thread_pointers();
  if (is_core_) open_core_file();
  else read_live_auxv();
  description_ = fmt::format("{} {} in LLDB ({}){}", is_core_ ? "core of process" : "process", pid_,
                             process_identity(*this, command_line(), ""),
                             proc_memory_ ? fmt::format(", memory read from /proc/{}/mem", pid_)
                             : core_file_ ? ", memory read from the core file " + core_file_->path()
                                          : "");
}

std::string LldbImage::damage() const {
  if (!is_core_) return {};
  const bool any_library = std::any_of(modules_.begin(), modules_.end(), [](const Module& m) {
    return !m.is_main_executable && !is_pseudo_file_name(m.path) && m.path.find(".so") != std::string::npos;
  });
  if (any_library) return {};
  lldb::SBTarget target = process_.GetTarget();
  const std::string executable = path_of(target.GetExecutable());
  const std::string why =
      executable.empty()
          ? "the target has no executable (the core was loaded without the program, or its file is missing)"
          : fmt::format("its executable {} is not the program that wrote the core, or not the same build, so "
                        "LLDB's dynamic loader could not follow the core's list of libraries",
                        executable);
  return fmt::format("LLDB loaded no shared libraries for this core: {}. Load the core with the program that "
                     "wrote it: `target create /path/to/PROGRAM --core CORE`; when the program's libraries are "
                     "not where they were, map their directory with `image search-paths add OLD NEW`",
                     why);
}

std::size_t LldbImage::read(Address addr, void* out, std::size_t len) const {
  if (core_file_) return read_core_file(addr, out, len);
  if (!proc_memory_) return cache_->read(addr, out, len);
  return proc_memory_->read_regions(*this, addr, out, len);
}

// The core file's bytes where it holds them; LLDB reads the rest as before (what a core left out: LLDB
// reads it from the module's file, or gives zeros up to the segment's size in memory).
std::size_t LldbImage::read_core_file(Address addr, void* out, std::size_t len) const {
  const std::size_t held = core_file_->read(addr, out, len);
  if (held == len || addr + held < addr) return held;  // all of it, or it ran to the end of the address space
  return held + cache_->read(addr + held, static_cast<std::byte*>(out) + held, len - held);
}

std::span<const std::byte> LldbImage::view(Address addr, std::size_t len) const {
  if (!core_file_) return {};
  const std::span<const std::byte> held = core_file_->bytes_at(addr);
  return held.size() >= len ? held.first(len) : std::span<const std::byte>();
}

// The core file LLDB loaded this process from, found among the cores it has mapped (core_file_memory.h),
// used only once it holds the bytes LLDB reads where they tell one stop from another: each thread's stack
// around its stack pointer, and the first page of each writable region (up to a few of each). Another
// core of the same program, or a file changed since LLDB loaded it, leaves reads to LLDB.
std::string LldbImage::command_line() const {
  if (!is_core_) return is_local_process() ? proc_command_line(pid_) : "";
  if (std::string in_memory = command_line_in_memory(*this); !in_memory.empty()) return in_memory;
  if (!core_file_) return {};
  const std::optional<ProcessNote> note = core_process_note(core_file_->file());
  return !note ? "" : !note->command_line.empty() ? note->command_line : note->name;
}

void LldbImage::open_core_file() {
  for (const std::string& path : mapped_core_files()) {
    std::unique_ptr<CoreFileMemory> core = CoreFileMemory::open(path);
    if (core && holds_what_lldb_reads(*core)) {
      core_file_ = std::move(core);
      return;
    }
  }
}

bool LldbImage::holds_what_lldb_reads(const CoreFileMemory& core) const {
  // A stack's live words start below its pointer: the 128-byte red zone leaf functions may use.
  constexpr Address kRedZone = 128, kStackBytes = 512;
  constexpr std::size_t kStackProbes = 8, kRegionProbes = 8;
  std::vector<std::pair<Address, std::size_t>> probes;
  for (const ThreadState& t : threads_) {
    if (probes.size() == kStackProbes) break;
    const MemoryRegion* r = region_at(t.sp());
    if (!r || !r->bytes_present) continue;
    const Address from = std::max(r->start, t.sp() - std::min(t.sp(), kRedZone));
    probes.push_back({from, static_cast<std::size_t>(std::min(kRedZone + kStackBytes, r->end - from))});
  }
  std::size_t regions = 0;
  for (const MemoryRegion& r : regions_) {
    if (regions == kRegionProbes) break;
    if (!r.writable || !r.bytes_present) continue;
    probes.push_back({r.start, static_cast<std::size_t>(std::min<Address>(kPageSize, r.size()))});
    ++regions;
  }
  return reads_as_lldb(probes, [&](Address addr, void* out, std::size_t len) { return core.read(addr, out, len); });
}

// A probe neither reads is passed over (a truncated core's lost page); one only one reads, or reads
// differently, rules the source out.
bool LldbImage::reads_as_lldb(const std::vector<std::pair<Address, std::size_t>>& probes, const Read& read) const {
  std::size_t compared = 0;
  for (const auto& [at, len] : probes) {
    std::vector<char> from_lldb(len), from_source(len);
    const std::size_t got = read_from_lldb(at, from_lldb.data(), len);
    const std::size_t held = read(at, from_source.data(), len);
    if (got == 0 && held == 0) continue;
    if (got != len || held != len || from_lldb != from_source) return false;
    ++compared;
  }
  return compared > 0;
}

// /proc/PID/mem of a live process LLDB runs through the host platform, used only once it proved to hold
// the same bytes LLDB reads (the first 4 KiB of the first readable region): a pid from another machine or
// namespace, or a process this user may not read, leaves reads to LLDB. LLDB's software breakpoints are in
// the process's code while it is stopped; heapscope reads data (the heap, roots, GOT slots), not code.
void LldbImage::open_proc_memory() {
  if (!is_local_process()) return;
  const auto first = std::find_if(regions_.begin(), regions_.end(), [](const MemoryRegion& r) { return r.bytes_present; });
  if (first == regions_.end()) return;
  int error_number = 0;
  std::unique_ptr<ProcessMemory> memory = ProcessMemory::open(pid_, &error_number);
  if (!memory) return;
  const std::size_t probe = static_cast<std::size_t>(std::min<Address>(first->size(), kPageSize));
  const bool same = reads_as_lldb({{first->start, probe}}, [&](Address addr, void* out, std::size_t len) {
    return memory->read(first->start, first->end, addr, out, len);
  });
  if (same) proc_memory_ = std::move(memory);
}

// Reads as much as LLDB has from addr on. A core's segments end where the process's mappings did, and
// LLDB reads one segment at a time, so a short read is followed by another from where it stopped.
std::size_t LldbImage::read_from_lldb(Address addr, void* out, std::size_t len) const {
  std::size_t got = 0;
  lldb_thread_.call([&] {
    lldb::SBProcess process = process_;  // SB calls are not const
    while (got < len) {
      lldb::SBError error;
      std::size_t n = process.ReadMemory(addr + got, static_cast<char*>(out) + got, len - got, error);
      if (n == 0 && is_core_) {  // bytes the core left out may be in the module's file
        lldb::SBTarget target = process.GetTarget();
        n = target.ReadMemory(lldb::SBAddress(addr + got, target), static_cast<char*>(out) + got, len - got, error);
      }
      if (n == 0 || n > len - got) break;
      got += n;
    }
  });
  return got;
}

void LldbImage::read_regions() {
  lldb::SBMemoryRegionInfoList list = process_.GetMemoryRegions();
  for (std::uint32_t i = 0; i < list.GetSize(); ++i) {
    lldb::SBMemoryRegionInfo info;
    if (!list.GetMemoryRegionAtIndex(i, info) || !info.IsMapped()) continue;
    MemoryRegion r;
    r.start = info.GetRegionBase();
    r.end = info.GetRegionEnd();
    if (r.start >= r.end) continue;
    r.readable = info.IsReadable();
    r.writable = info.IsWritable();
    r.executable = info.IsExecutable();
    r.bytes_present = r.readable;
    const char* name = info.GetName();
    if (name && !is_pseudo_file_name(name)) r.backing_path = name;
    regions_.push_back(std::move(r));
  }
  std::sort(regions_.begin(), regions_.end(), [](const MemoryRegion& a, const MemoryRegion& b) { return a.start < b.start; });
  std::vector<MemoryRegion> disjoint;
  for (MemoryRegion& r : regions_) {
    if (!disjoint.empty() && r.start < disjoint.back().end) r.start = disjoint.back().end;
    if (r.start < r.end) disjoint.push_back(std::move(r));
  }
  regions_ = std::move(disjoint);
  if (regions_.empty()) warnings_.push_back("LLDB lists no memory regions of the process");
  if (is_core_) mark_unreadable_core_bytes();
}

// Called on the LLDB thread, like the rest of the constructor.
bool LldbImage::reads_at(Address addr) const {
  lldb::SBProcess process = process_;  // SB calls are not const
  char byte = 0;
  lldb::SBError error;
  return process.ReadMemory(addr, &byte, 1, error) == 1;
}

// LLDB lists a truncated core's segments whole but cannot read past the cut (a core is cut once, so each
// writable region reads up to some page and no further). Each such region is split there, so analyses know
// what they could not see: leaks marks its result partial, roots name the threads whose stacks are gone.
void LldbImage::mark_unreadable_core_bytes() {
  constexpr Address kPage = 4096;
  std::vector<MemoryRegion> split;
  std::uint64_t missing = 0;
  for (const MemoryRegion& r : regions_) {
    if (!r.writable || !r.bytes_present || r.size() < kPage || reads_at(r.end - 1)) {
      split.push_back(r);
      continue;
    }
    std::uint64_t readable_pages = 0, unreadable_from = r.size() / kPage;  // the answer lies in between
    while (readable_pages < unreadable_from) {
      const std::uint64_t middle = (readable_pages + unreadable_from) / 2;
      if (reads_at(r.start + middle * kPage)) readable_pages = middle + 1;
      else unreadable_from = middle;
    }
    const Address cut = r.start + readable_pages * kPage;
    if (cut > r.start) {
      MemoryRegion present = r;
      present.end = cut;
      split.push_back(present);
    }
    MemoryRegion absent = r;
    absent.start = cut;
    absent.bytes_present = false;
    split.push_back(absent);
    missing += r.end - cut;
  }
  regions_ = std::move(split);
  if (missing)
    warnings_.push_back(fmt::format("LLDB cannot read {} bytes of the core's writable memory (the core file is "
                                    "truncated?): analyses treat them as missing",
                                    missing));
}

namespace {

// The bytes of register `reg` (an SBValue of a register set), or nothing when LLDB cannot read them.
std::optional<std::vector<std::uint8_t>> register_bytes(lldb::SBValue reg) {
  lldb::SBData data = reg.GetData();
  const std::size_t size = data.GetByteSize();
  if (!data.IsValid() || size == 0) return std::nullopt;
  std::vector<std::uint8_t> bytes(size);
  lldb::SBError error;
  if (data.ReadRawData(error, 0, bytes.data(), size) != size || error.Fail()) return std::nullopt;
  return bytes;
}

using RegisterBytes = std::map<std::string, std::vector<std::uint8_t>, std::less<>>;

// The xmm and ymm registers of the frame's register sets, by name, as bytes (none for one LLDB lists but
// cannot read).
RegisterBytes vector_register_bytes(lldb::SBFrame frame) {
  RegisterBytes found;
  lldb::SBValueList sets = frame.GetRegisters();
  for (std::uint32_t s = 0; s < sets.GetSize(); ++s) {
    lldb::SBValue set = sets.GetValueAtIndex(s);
    for (std::uint32_t i = 0; i < set.GetNumChildren(); ++i) {
      lldb::SBValue reg = set.GetChildAtIndex(i);
      const std::string_view name = reg.GetName() ? reg.GetName() : "";
      if (!name.starts_with("xmm") && !name.starts_with("ymm")) continue;
      found.emplace(name, register_bytes(reg).value_or(std::vector<std::uint8_t>{}));
    }
  }
  return found;
}

// Registers `prefix`0-15 (each `lanes` 8-byte lanes) into `out`; false when LLDB lacks any of them.
bool take_vector_lanes(const RegisterBytes& found, const char* prefix, int lanes, VectorRegisters& out) {
  const std::size_t bytes = 8u * static_cast<std::size_t>(lanes);
  for (int r = 0; r < VectorRegisters::kRegisters; ++r) {
    const auto it = found.find(fmt::format("{}{}", prefix, r));
    if (it == found.end() || it->second.size() < bytes) return false;
    std::memcpy(out.lanes[r].data(), it->second.data(), bytes);
  }
  out.lanes_read = lanes;
  return true;
}

// ymm0-15 when LLDB shows them (a target with AVX: its AVX register set), else xmm0-15 (its floating
// point set), else none. `ymm_unavailable`: LLDB lists ymm registers it cannot read (LLDB 16 on a core
// reads no AVX state from its NT_X86_XSTATE notes).
VectorRegisters vector_registers(lldb::SBFrame frame, bool* ymm_unavailable) {
  const RegisterBytes found = vector_register_bytes(frame);
  VectorRegisters out;
  if (take_vector_lanes(found, "ymm", VectorRegisters::kYmmLanes, out)) return out;
  *ymm_unavailable = found.contains("ymm0");
  out = VectorRegisters{};
  if (take_vector_lanes(found, "xmm", VectorRegisters::kXmmLanes, out)) return out;
  return VectorRegisters{};
}

}  // namespace

void LldbImage::read_threads() {
  const std::uint32_t count = process_.GetNumThreads();
  bool ymm_unavailable = false;
  for (std::uint32_t t = 0; t < count; ++t) {
    lldb::SBThread thread = process_.GetThreadAtIndex(t);
    if (!thread.IsValid()) continue;
    ThreadState state;
    state.tid = static_cast<std::uint32_t>(thread.GetThreadID());
    if (const char* name = thread.GetName()) state.name = name;
    const auto values = general_registers(thread.GetFrameAtIndex(0));
    for (int r = 0; r < static_cast<int>(Reg::count); ++r)
      if (auto it = values.find(lldb_register_name(static_cast<Reg>(r))); it != values.end()) state.regs[r] = it->second;
    if (values.find("rip") == values.end())
      warnings_.push_back(fmt::format("LLDB shows no registers of thread tid {}", state.tid));
    thread_pointer_known_.push_back(values.count("fs_base") > 0);
    state.vector = vector_registers(thread.GetFrameAtIndex(0), &ymm_unavailable);
    threads_.push_back(std::move(state));
  }
  if (ymm_unavailable)
    warnings_.push_back("LLDB cannot read the ymm registers of this process (LLDB 16 reads no AVX state from a "
                        "core): only xmm0-15 are scanned, so a pointer held only in the upper half of a ymm "
                        "register is not seen");
}

void LldbImage::read_modules() {
  lldb::SBTarget target = process_.GetTarget();
  const std::string executable = path_of(target.GetExecutable());
  bool main_found = false;
  for (std::uint32_t i = 0; i < target.GetNumModules(); ++i) {
    lldb::SBModule module = target.GetModuleAtIndex(i);
    const bool is_main = !main_found && !executable.empty() && path_of(module.GetFileSpec()) == executable;
    main_found = main_found || is_main;
    add_module(target, module, is_main, i);
  }
  std::sort(modules_.begin(), modules_.end(), [](const Module& a, const Module& b) { return a.start < b.start; });
}

// The load bias is where the module's ELF header is minus where the file says its first segment goes;
// the extent and the file-backed stretches come from the file's PT_LOAD segments.
// `position` is the module's place in the target's list: LLDB's dynamic loader adds modules in the order of
// the dynamic linker's list after the executable, which is symbol lookup order.
void LldbImage::add_module(lldb::SBTarget& target, lldb::SBModule module, bool is_main_executable,
                           std::uint32_t position) {
  lldb::SBAddress header = module.GetObjectFileHeaderAddress();
  const lldb::addr_t header_load = header.GetLoadAddress(target);
  if (header_load == LLDB_INVALID_ADDRESS) return;  // known to the target, not loaded in this process
  Module m;
  const std::string local_path = path_of(module.GetFileSpec());
  m.path = path_of(module.GetPlatformFileSpec());
  if (m.path.empty()) m.path = local_path;
  // LLDB records the path the dynamic loader was given (libstdc++.so.6, a symlink); the kernel's mapping,
  // which cores and /proc/PID/maps name, is the file behind it (libstdc++.so.6.0.30). Name the module
  // the kernel's way where this machine has that file, so that snapshots and reports match the CLI's.
  std::error_code no_such_file;
  if (const auto real = std::filesystem::canonical(m.path, no_such_file); !no_such_file) m.path = real.string();
  m.build_id = build_id_of(module);
  m.is_main_executable = is_main_executable;
  m.lookup_order = position;
  m.load_bias = header_load - header.GetFileAddress();

  std::unique_ptr<ElfFile> file;
  if (!local_path.empty() && !is_pseudo_file_name(local_path)) {
    std::string error;
    file = ElfFile::open(local_path, &error);
    if (!file) warnings_.push_back(fmt::format("symbols of {} are not loaded: {}", m.path, error));
  }
  if (file) {
    const std::optional<std::string> file_id = file->build_id();
    if (file_id && !m.build_id.empty() && *file_id != m.build_id) {
      warnings_.push_back(fmt::format("build-id mismatch for {}: LLDB has {}, the file {} has {}; the file is not used",
                                      m.path, m.build_id, local_path, *file_id));
      file.reset();
    } else {
      m.build_id = file_id.value_or("");  // without a build-id, LLDB's UUID is a checksum of the file
    }
  }
  if (file) {
    m.file_on_disk = local_path;
    if (const auto first_vaddr = file->first_load_vaddr()) m.load_bias = header_load - *first_vaddr;
    bool first = true;
    for (const GElf_Phdr& ph : file->program_headers()) {
      if (ph.p_type != PT_LOAD) continue;
      const Address start = page_down(m.load_bias + ph.p_vaddr);
      m.start = first ? start : std::min(m.start, start);
      m.end = std::max(m.end, m.load_bias + ph.p_vaddr + ph.p_memsz);
      first = false;
      if (ph.p_filesz > 0)
        file_backed_.push_back({start, page_up(m.load_bias + ph.p_vaddr + ph.p_filesz), m.path, page_down(ph.p_offset)});
    }
  }
  if (m.end == 0) {  // no usable file ([vdso], a missing library): the extent of its loaded sections
    m.start = header_load;
    m.end = header_load;
    for (std::size_t s = 0; s < module.GetNumSections(); ++s) {
      lldb::SBSection section = module.GetSectionAtIndex(s);
      const lldb::addr_t load = section.GetLoadAddress(target);
      if (load == LLDB_INVALID_ADDRESS || section.GetByteSize() == 0) continue;
      m.start = std::min<Address>(m.start, load);
      m.end = std::max<Address>(m.end, load + section.GetByteSize());
    }
  }
  modules_.push_back(std::move(m));
}

// LLDB names no region of a core; those that hold a module's file-backed segments get its path.
void LldbImage::name_file_backed_regions() {
  for (MemoryRegion& r : regions_) {
    if (!r.backing_path.empty()) continue;
    for (const FileBackedRange& f : file_backed_) {
      if (r.start < f.start || r.start >= f.end) continue;
      r.backing_path = f.path;
      r.file_offset = f.file_offset + (r.start - f.start);
      break;
    }
  }
}

// Threads whose fs_base LLDB did not show get it from glibc's own thread list (thread_pointers.h), or musl's
// descriptors found in memory.
void LldbImage::complete_thread_pointers() {
  if (std::all_of(thread_pointer_known_.begin(), thread_pointer_known_.end(), [](bool known) { return known; })) return;
  std::string error;
  auto pointers = glibc_thread_pointers(process_.GetTarget(), memory_reader_for(*this), &error);
  if (pointers.empty()) pointers = thread_pointers_from_memory(*this);  // musl's descriptors
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    if (thread_pointer_known_[i]) continue;
    if (const auto it = pointers.find(threads_[i].tid); it != pointers.end()) {
      threads_[i].regs[static_cast<int>(Reg::fs_base)] = it->second;
      thread_pointer_known_[i] = true;
      continue;
    }
    warnings_.push_back(unknown_thread_pointer(i, threads_[i].tid, error));
  }
}

// A live process on this machine shows its auxv in /proc (LLDB has no SB call for it). Only read when
// LLDB runs the process through the host platform: a remote pid means another process here.
bool LldbImage::is_local_process() const {
  lldb::SBProcess process = process_;  // SB calls are not const
  lldb::SBTarget target = process.GetTarget();
  lldb::SBPlatform platform = target.GetPlatform();
  const char* platform_name = platform.GetName();
  return !is_core_ && platform_name && std::string_view(platform_name) == "host" && pid_ > 0;
}

void LldbImage::read_live_auxv() {
  if (!is_local_process()) return;
  std::ifstream in(fmt::format("/proc/{}/auxv", pid_), std::ios::binary);
  std::uint64_t pair[2];
  while (in.read(reinterpret_cast<char*>(pair), sizeof pair) && pair[0] != 0) auxv_.push_back({pair[0], pair[1]});
}

}  // namespace heapscope::lldb_plugin
