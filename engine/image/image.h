// Image: a read-only view of a stopped process.
//
// Everything above this layer (allocator walkers, roots, graph, analyses) sees a process only through
// this interface, so one analysis serves a core file, a live /proc process and a debugger session alike
// (the idea of .NET SOS's debugger-services interface). Implementations: ElfCoreImage and LiveProcessImage
// (sources/; the C API that GDB's frontend loads opens its targets with them) and LldbImage (frontends/lldb/).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace heapscope {

// A word read from memory (Image::read_u64, MemoryCursor::u64), or none where it cannot be read:
// std::optional's interface for a word, as a plain struct. GCC 12 copies a std::optional<uint64_t> through
// the stack as a word and a flag stored apart, then loaded as one 16-byte value, which the store buffer
// cannot forward: a stall of a dozen cycles per read in the walk's and the namers' hottest loops. A plain
// struct stays in registers.
class WordRead {
 public:
  constexpr WordRead() = default;
  constexpr WordRead(std::uint64_t value) : value_(value), read_(true) {}  // NOLINT: as optional's
  constexpr WordRead(std::nullopt_t) {}                                   // NOLINT
  constexpr explicit operator bool() const { return read_; }
  constexpr bool has_value() const { return read_; }
  constexpr std::uint64_t operator*() const { return value_; }
  constexpr std::uint64_t value() const {
    if (!read_) throw std::bad_optional_access();
    return value_;
  }
  constexpr std::uint64_t value_or(std::uint64_t otherwise) const { return read_ ? value_ : otherwise; }
  friend constexpr bool operator==(const WordRead& w, std::uint64_t v) { return w.read_ && w.value_ == v; }
  constexpr operator std::optional<std::uint64_t>() const {  // NOLINT: where an optional is kept
    return read_ ? std::optional<std::uint64_t>(value_) : std::nullopt;
  }

 private:
  std::uint64_t value_ = 0;
  bool read_ = false;
};

using Address = std::uint64_t;

struct MemoryRegion {
  Address start = 0;
  Address end = 0;  // exclusive
  bool readable = false;
  bool writable = false;
  bool executable = false;
  // The source holds bytes for the whole region (a core may omit read-only file-backed text, filter
  // mappings through coredump_filter, or be truncated: then bytes come from the module file or are absent).
  bool bytes_present = false;
  std::string backing_path;  // file that backs the mapping, empty for anonymous memory
  std::uint64_t file_offset = 0;

  std::uint64_t size() const { return end - start; }
  bool contains(Address a) const { return a >= start && a < end; }
};

// x86-64 general registers in the order of the kernel's user_regs_struct (NT_PRSTATUS, PTRACE_GETREGS).
enum class Reg : int {
  r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax,
  rip, cs, eflags, rsp, ss, fs_base, gs_base, ds, es, fs, gs, count
};
const char* register_name(Reg r);

// The SSE/AVX registers of a thread. memcpy, SIMD code and compilers move and keep pointers in them, so
// they are roots like the general registers. xmmN is the low 16 bytes of ymmN; each register is kept as
// 8-byte lanes, lanes 0-1 being xmmN and lanes 2-3 ymmN's upper half.
struct VectorRegisters {
  static constexpr int kRegisters = 16;
  static constexpr int kXmmLanes = 2;
  static constexpr int kYmmLanes = 4;
  std::array<std::array<std::uint64_t, kYmmLanes>, kRegisters> lanes{};
  // Lanes per register the source gave: 0 (none: a source without them, an unreadable note), kXmmLanes
  // (SSE state only) or kYmmLanes (AVX state too).
  int lanes_read = 0;
};
// The register a lane belongs to: "xmm3" for lanes 0-1 of register 3, "ymm3" for its upper half.
std::string vector_register_name(int reg, int lane);

struct ThreadState {
  std::uint32_t tid = 0;
  std::string name;  // may be empty (cores carry only the process name)
  std::array<std::uint64_t, static_cast<int>(Reg::count)> regs{};
  VectorRegisters vector{};

  std::uint64_t reg(Reg r) const { return regs[static_cast<int>(r)]; }
  std::uint64_t fs_base() const { return reg(Reg::fs_base); }
  std::uint64_t sp() const { return reg(Reg::rsp); }
};

// Where Module::file_on_disk came from: the path the process recorded, the --exe option, that path under
// a --sysroot (or another path substitution), or a download by build-id from debuginfod.
enum class ModuleFileOrigin { recorded_path, exe_option, sysroot, debuginfod };

struct Module {
  std::string path;           // as the process saw it (NT_FILE / link_map)
  std::string file_on_disk;   // file actually opened for symbols and omitted bytes; empty if unusable
  ModuleFileOrigin file_origin = ModuleFileOrigin::recorded_path;
  Address load_bias = 0;      // runtime address = file vaddr + load_bias
  Address start = 0;          // lowest mapped address
  Address end = 0;            // end of highest mapping
  std::string build_id;       // hex, as found in process memory (or the file when memory lacks it)
  bool is_main_executable = false;
  // Position on the dynamic linker's list, which is symbol lookup order (the executable, LD_PRELOAD
  // libraries, then dependencies breadth first); kNotOnLinkMap when the module is not on it.
  static constexpr std::uint32_t kNotOnLinkMap = 0xffffffffu;
  std::uint32_t lookup_order = kNotOnLinkMap;

  // The file name the process knew the module by ("libc.so.6"); the opened file's when that is missing.
  std::string_view name() const {
    const std::string_view p = path.empty() ? std::string_view(file_on_disk) : std::string_view(path);
    const auto slash = p.rfind('/');
    return slash == std::string_view::npos ? p : p.substr(slash + 1);
  }
};

struct AuxvEntry {
  std::uint64_t type = 0;
  std::uint64_t value = 0;
};

// The value of the first auxv entry of `type` (AT_ENTRY, AT_PHDR…), for sources still building an Image.
std::optional<std::uint64_t> auxv_lookup(const std::vector<AuxvEntry>& auxv, std::uint64_t type);

class Image {
 public:
  virtual ~Image() = default;

  virtual const std::vector<MemoryRegion>& regions() const = 0;  // sorted by start, non-overlapping
  virtual const std::vector<ThreadState>& threads() const = 0;
  virtual const std::vector<Module>& modules() const = 0;  // sorted by start, non-overlapping
  virtual const std::vector<AuxvEntry>& auxv() const = 0;
  // Problems found while opening (missing module files, build-id mismatches, truncation...).
  virtual const std::vector<std::string>& warnings() const = 0;
  virtual std::string description() const = 0;  // e.g. "core file core.1234 (pid 1234, ./server)"
  virtual int pid() const { return 0; }          // process id, 0 when unknown
  // Why this image may lack what an analysis needs, in one sentence ("core.1 is truncated: ..."), or empty.
  // A command that fails says it, since the failure's own message cannot know.
  virtual std::string damage() const { return {}; }
  // When the memory was captured, in nanoseconds since the Unix epoch: a core's file modification time,
  // now for a live process (the default). Snapshots are ordered and labelled by it.
  virtual std::int64_t capture_time_ns() const;

  // Copies up to len bytes starting at addr; returns how many leading bytes were available.
  virtual std::size_t read(Address addr, void* out, std::size_t len) const = 0;

  // Zero-copy view when the bytes are contiguous in the backing store (an mmapped core); empty otherwise.
  // Callers must fall back to read() when this is empty.
  virtual std::span<const std::byte> view(Address addr, std::size_t len) const {
    (void)addr;
    (void)len;
    return {};
  }

  // What read() does in every image source: walk [addr, addr + len) through consecutive readable pieces
  // of memory (core segments, mapped regions), stopping at the first gap. `piece_end(at)` is the end of
  // the readable piece holding `at` (0: none); `copy(at, dst, n)` copies n bytes from inside it and
  // returns how many it could (fewer ends the read).
  template <class PieceEnd, class Copy>
  static std::size_t read_piecewise(Address addr, void* out, std::size_t len, PieceEnd&& piece_end, Copy&& copy) {
    auto* dst = static_cast<std::byte*>(out);
    std::size_t done = 0;
    while (done < len) {
      const Address at = addr + done;
      if (at < addr) break;  // wrapped around the address space
      const Address end = piece_end(at);
      if (end <= at) break;
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, end - at));
      const std::size_t got = copy(at, dst + done, want);
      done += got;
      if (got < want) break;
    }
    return done;
  }

  // Conveniences built on read().
  WordRead read_u64(Address addr) const;
  std::optional<std::uint32_t> read_u32(Address addr) const;
  bool read_exact(Address addr, void* out, std::size_t len) const { return read(addr, out, len) == len; }
  std::optional<std::string> read_c_string(Address addr, std::size_t max_len = 4096) const;
  const MemoryRegion* region_at(Address addr) const;
  const Module* module_at(Address addr) const;
  const Module* main_executable() const;
  std::optional<std::uint64_t> auxv_value(std::uint64_t type) const;
};

// Bytes of readable, writable memory whose contents the image lacks (a truncated core, mappings a
// coredump_filter left out): stacks, globals or heap that no analysis can scan.
std::uint64_t missing_writable_bytes(const Image& image);
// The threads whose stack memory (at their stack pointer) the image lacks: a filtered or cut-off core's.
std::vector<std::uint32_t> threads_without_stack(const Image& image);
// The names of the modules whose file could not be used (missing, unreadable, another program's build):
// their symbols, DWARF types and unwind tables are unknown, while their memory is read and scanned as usual.
std::vector<std::string> modules_without_file(const Image& image);

}  // namespace heapscope
