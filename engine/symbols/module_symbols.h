// ModuleSymbols: what one ELF module (plus its separate debug file, when there is one) tells us by
// symbols and relocations. All addresses here are file (link-time) virtual addresses; add the module's
// load bias for runtime addresses (SymbolIndex does that).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"

namespace heapscope {

enum class SymbolKind { function, object, tls, other };

struct Symbol {
  std::string name;       // as stored (mangled for C++)
  Address value = 0;      // file vaddr; for TLS symbols the offset inside the module's TLS block
  std::uint64_t size = 0;
  SymbolKind kind = SymbolKind::other;
  bool local = false;
};

// R_X86_64_RELATIVE from .rela.dyn and every entry of a DT_RELR table: the word at `offset` holds
// load_bias + addend at run time. For RELR the addend is the word stored in the file at `offset`.
struct RelativeRelocation {
  Address offset = 0;
  Address addend = 0;
};

// R_X86_64_TPOFF64 (initial-exec TLS GOT slots): at run time the word at `got_offset` holds the
// thread-pointer-relative offset of (symbol value + addend) in the module's static TLS block.
struct TlsRelocation {
  Address got_offset = 0;
  std::uint64_t addend = 0;
  std::string symbol;  // empty for module-local TLS variables (symbol index 0)
  // R_X86_64_DTPMOD64 (local- and general-dynamic TLS): the slot holds the module's TLS id, its index in
  // each thread's DTV, rather than an offset from the thread pointer (R_X86_64_TPOFF64).
  bool module_id = false;
};

struct SymbolSearchOptions {
  // Where separate debug files are looked for (.build-id/xx/yyyy.debug, and debuglink names).
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};
  bool use_debug_files = true;
  // Whether a debug file found nowhere on this machine is fetched by build-id from the debuginfod servers
  // of DEBUGINFOD_URLS (and only then: without URLs nothing is asked).
  bool use_debuginfod = true;
};

// Where a module's symbols or DWARF come from, in the order they are looked for (gdb's order): the
// module file itself, a debug file by build-id under a debug directory, one named by .gnu_debuglink, one
// fetched from debuginfod.
enum class DebugSource { none, module_file, build_id_directory, debuglink, debuginfod };
// "none", "file", "build-id", "debuglink", "debuginfod".
const char* debug_source_name(DebugSource source);

class ModuleSymbols {
 public:
  // Loads .symtab and .dynsym of `path` and, when options allow, of its separate debug file found by
  // build-id, then .gnu_debuglink, then (when `path` has no DWARF of its own) debuginfod; the debug file is
  // used only if its build-id matches. Returns null
  // (with a reason in *error) when `path` cannot be read as an ELF file.
  static std::unique_ptr<ModuleSymbols> load(const std::string& path, const SymbolSearchOptions& options,
                                             std::string* error);
  // Whether `path`'s dynamic symbol table defines `name`, read alone (no debug file, no index): what a
  // question about every module asks before loading any module's whole table (false when unreadable).
  static bool exports(const std::string& path, std::string_view name);
  ~ModuleSymbols();

  const std::string& path() const;
  const std::string& build_id() const;       // hex; empty when the file has none
  const std::string& debug_file() const;     // separate debug file in use, empty if none
  // The file its DWARF is read from: the separate debug file in use, else the module's own file.
  const std::string& dwarf_file() const { return debug_file().empty() ? path() : debug_file(); }
  DebugSource debug_file_source() const;     // how debug_file() was found; none without one
  bool has_local_symbols() const;            // a .symtab (file or debug file) was loaded
  // Where the full symbol table (.symtab) came from; none when only the dynamic symbols are known.
  DebugSource symtab_source() const;
  // Where the DWARF the type and frame readers use comes from: the debug file when there is one, else
  // the module file; none when that file has no .debug_info.
  DebugSource dwarf_source() const;
  const ElfFile& elf() const;                // the module file itself

  const Symbol* find(std::string_view name) const;        // exact (mangled) name; prefers defined symbols
  const Symbol* covering(Address file_vaddr) const;       // function/object whose [value,value+size) covers it
  const std::vector<Symbol>& symbols() const;             // sorted by value, deduplicated

  const std::vector<RelativeRelocation>& relative_relocations() const;
  const std::vector<TlsRelocation>& tls_relocations() const;

  // Searches the module file's loadable, file-backed bytes for `needle`; returns its file vaddr.
  std::optional<Address> find_bytes(std::string_view needle) const;

  // Things a user should hear about: a debug file that was found but rejected (wrong build-id or CRC,
  // unreadable), a relocation table that had to be cut short.
  const std::vector<std::string>& warnings() const;

 private:
  struct Impl;
  explicit ModuleSymbols(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "std::vector<int>::push_back(int const&)" for "_ZNSt6vectorIiSaIiEE9push_backERKi"; the input unchanged
// when it is not a mangled C++ name.
std::string demangle(std::string_view name);

}  // namespace heapscope
