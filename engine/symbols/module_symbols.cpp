#include "symbols/module_symbols.h"

#include <cxxabi.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "symbols/debuginfod_fetch.h"

namespace heapscope {

namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------
// Symbol tables

SymbolKind kind_of(unsigned char type) {
  switch (type) {
    case STT_FUNC:
    case STT_GNU_IFUNC:
      return SymbolKind::function;
    case STT_OBJECT:
      return SymbolKind::object;
    case STT_TLS:
      return SymbolKind::tls;
    default:
      return SymbolKind::other;
  }
}

// Calls visit(raw, name) for each defined, named symbol of one SHT_SYMTAB / SHT_DYNSYM section, in order,
// until it returns false. Returns false when the section's data is unreadable (libelf validates its bounds
// against the file, so a truncated file just yields nothing here).
template <typename Visit>
bool each_defined_symbol(const ElfFile& file, Elf_Scn* scn, Visit&& visit) {
  GElf_Shdr header;
  if (!gelf_getshdr(scn, &header)) return false;
  Elf_Data* data = elf_getdata(scn, nullptr);
  const std::size_t entry_size = gelf_fsize(file.elf(), ELF_T_SYM, 1, EV_CURRENT);
  if (!data || !data->d_buf || entry_size == 0) return false;
  const std::size_t count = data->d_size / entry_size;
  for (std::size_t i = 1; i < count; ++i) {  // entry 0 is the reserved null symbol
    GElf_Sym raw;
    if (!gelf_getsym(data, static_cast<int>(i), &raw)) break;
    if (raw.st_shndx == SHN_UNDEF) continue;
    const char* name = elf_strptr(file.elf(), header.sh_link, raw.st_name);
    if (!name || *name == '\0') continue;
    if (!visit(raw, name)) break;
  }
  return true;
}

// Appends the defined, named symbols of one section but its section and file symbols (each_defined_symbol).
bool read_symbol_section(const ElfFile& file, Elf_Scn* scn, std::vector<Symbol>& out) {
  return each_defined_symbol(file, scn, [&](const GElf_Sym& raw, const char* name) {
    const unsigned char type = GELF_ST_TYPE(raw.st_info);
    if (type == STT_SECTION || type == STT_FILE) return true;
    Symbol symbol;
    symbol.name = name;
    symbol.value = raw.st_value;
    symbol.size = raw.st_size;
    symbol.kind = kind_of(type);
    symbol.local = GELF_ST_BIND(raw.st_info) == STB_LOCAL;
    out.push_back(std::move(symbol));
    return true;
  });
}

// Appends the symbols of every symbol table in the file; true when one of them was a full .symtab
// (local symbols included) rather than only the dynamic symbols.
bool read_symbols(const ElfFile& file, std::vector<Symbol>& out) {
  bool had_symtab = false;
  for (Elf_Scn* scn = elf_nextscn(file.elf(), nullptr); scn; scn = elf_nextscn(file.elf(), scn)) {
    GElf_Shdr header;
    if (!gelf_getshdr(scn, &header)) continue;
    if (header.sh_type != SHT_SYMTAB && header.sh_type != SHT_DYNSYM) continue;
    if (read_symbol_section(file, scn, out) && header.sh_type == SHT_SYMTAB) had_symtab = true;
  }
  return had_symtab;
}

std::size_t leading_underscores(const std::string& name) {
  const std::size_t n = name.find_first_not_of('_');
  return n == std::string::npos ? name.size() : n;
}

// Among aliases at one address (malloc / __libc_malloc / __malloc), the one a person would write.
bool more_presentable(const Symbol& a, const Symbol& b) {
  if (a.local != b.local) return !a.local;
  const std::size_t ua = leading_underscores(a.name), ub = leading_underscores(b.name);
  if (ua != ub) return ua < ub;
  return a.name < b.name;
}

// The same symbol usually appears in .dynsym, .symtab and the debug file's .symtab: keep one copy, and
// call it global if any copy says so. Sorted through a permutation, so that no string moves while the
// thousands of symbols of libc's debug file are sorted (two sorts of the symbols themselves were most of
// the time a command spent loading libc's); aliases at one address then put the most presentable first.
void sort_and_deduplicate(std::vector<Symbol>& symbols) {
  std::vector<std::uint32_t> order(symbols.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    const Symbol &a = symbols[x], &b = symbols[y];
    if (a.value != b.value) return a.value < b.value;
    if (const int c = a.name.compare(b.name)) return c < 0;
    return a.kind < b.kind;
  });
  std::vector<Symbol> unique;
  unique.reserve(symbols.size());
  for (const std::uint32_t i : order) {
    Symbol& s = symbols[i];
    if (!unique.empty() && unique.back().value == s.value && unique.back().name == s.name &&
        unique.back().kind == s.kind) {
      unique.back().local = unique.back().local && s.local;
      unique.back().size = std::max(unique.back().size, s.size);
      continue;
    }
    unique.push_back(std::move(s));
  }
  for (auto run = unique.begin(); run != unique.end();) {
    const auto end = std::find_if(run, unique.end(), [&](const Symbol& s) { return s.value != run->value; });
    if (end - run > 1)
      std::sort(run, end, [](const Symbol& a, const Symbol& b) {
        if (more_presentable(a, b) || more_presentable(b, a)) return more_presentable(a, b);
        return a.kind < b.kind;  // one name of two kinds: as the first sort had them
      });
    run = end;
  }
  symbols = std::move(unique);
}

bool is_coverable(const Symbol& s) { return s.kind == SymbolKind::function || s.kind == SymbolKind::object; }

bool covers(const Symbol& s, Address vaddr) {
  if (s.size == 0) return vaddr == s.value;
  return vaddr >= s.value && vaddr - s.value < s.size;
}

// ---------------------------------------------------------------------------------------------------
// Separate debug files

// The CRC-32 (IEEE 802.3, reflected) that .gnu_debuglink stores for its file.
std::uint32_t crc32_of(std::span<const std::byte> bytes) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::byte b : bytes) crc = table[(crc ^ static_cast<std::uint8_t>(b)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// .gnu_debuglink holds the file name, NUL padding to a multiple of 4, then the CRC.
std::optional<std::uint32_t> debuglink_crc(const ElfFile& file) {
  const auto data = file.section_bytes(file.section(".gnu_debuglink"));
  if (data.empty()) return std::nullopt;
  const char* text = reinterpret_cast<const char*>(data.data());
  const std::size_t name_len = strnlen(text, data.size());
  const std::size_t crc_at = (name_len + 1 + 3) / 4 * 4;
  if (name_len == 0 || crc_at + 4 > data.size()) return std::nullopt;
  std::uint32_t crc = 0;
  std::memcpy(&crc, data.data() + crc_at, 4);
  return crc;
}

struct DebugFileCandidate {
  std::string path;
  DebugSource source;
};

void add_unique(std::vector<DebugFileCandidate>& list, std::string path, DebugSource source) {
  for (const DebugFileCandidate& c : list)
    if (c.path == path) return;
  list.push_back({std::move(path), source});
}

// Where GDB's conventions put a module's debug file: by build-id under each debug directory first, then
// by debuglink name next to the module, in its .debug/ subdirectory, and mirrored under each debug
// directory. The module's directory is tried both as given and with symlinks resolved (on merged-/usr
// systems /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu are the same place).
std::vector<DebugFileCandidate> debug_file_candidates(const std::string& module_path,
                                                      const std::optional<std::string>& build_id,
                                                      const std::optional<std::string>& debuglink,
                                                      const SymbolSearchOptions& options) {
  std::vector<DebugFileCandidate> out;
  if (build_id && build_id->size() > 2) {
    const fs::path by_id = fs::path(".build-id") / build_id->substr(0, 2) / (build_id->substr(2) + ".debug");
    for (const std::string& dir : options.debug_dirs)
      add_unique(out, (fs::path(dir) / by_id).string(), DebugSource::build_id_directory);
  }
  if (!debuglink) return out;
  std::error_code ec;
  std::vector<fs::path> module_dirs;
  const fs::path absolute = fs::absolute(module_path, ec);
  if (!ec) module_dirs.push_back(absolute.parent_path());
  const fs::path canonical = fs::canonical(module_path, ec);
  if (!ec && (module_dirs.empty() || canonical.parent_path() != module_dirs.front()))
    module_dirs.push_back(canonical.parent_path());
  for (const fs::path& dir : module_dirs) {
    add_unique(out, (dir / *debuglink).string(), DebugSource::debuglink);
    add_unique(out, (dir / ".debug" / *debuglink).string(), DebugSource::debuglink);
  }
  for (const std::string& debug_dir : options.debug_dirs)
    for (const fs::path& dir : module_dirs)
      add_unique(out, (fs::path(debug_dir) / dir.relative_path() / *debuglink).string(), DebugSource::debuglink);
  return out;
}

// DWARF is there when .debug_info has bytes (a stripped file has none; a debug file's code sections are
// NOBITS, its .debug_info is not).
bool has_dwarf(const ElfFile& file) {
  Elf_Scn* scn = file.section(".debug_info");
  GElf_Shdr header;
  return scn && gelf_getshdr(scn, &header) && header.sh_type != SHT_NOBITS && header.sh_size > 0;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A debug file belongs to the module when the build-ids agree; a module without a build-id can only be
// checked through its debuglink CRC.
bool debug_file_matches(const ElfFile& candidate, const std::optional<std::string>& build_id,
                        const std::optional<std::uint32_t>& crc, std::string* why) {
  if (build_id) {
    const auto theirs = candidate.build_id();
    if (theirs == build_id) return true;
    *why = "build-id " + theirs.value_or("(none)") + " does not match the module's " + *build_id;
    return false;
  }
  if (crc) {
    if (crc32_of(candidate.bytes()) == *crc) return true;
    *why = "CRC does not match the module's .gnu_debuglink";
    return false;
  }
  *why = "the module has neither a build-id nor a debuglink CRC to check it against";
  return false;
}

// ---------------------------------------------------------------------------------------------------
// Relocations (x86-64 only: relocation type numbers are per architecture)

// The file bytes behind [vaddr, vaddr+size), clipped to the PT_LOAD segment's file part that holds
// vaddr. Dynamic-section pointers are link-time addresses, so this is how the tables are reached even
// when section headers are stripped.
std::span<const std::byte> loaded_file_bytes(const ElfFile& file, Address vaddr, std::uint64_t size) {
  for (const GElf_Phdr& ph : file.program_headers()) {
    if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz) continue;
    const std::uint64_t into = vaddr - ph.p_vaddr;
    return file.file_range(ph.p_offset + into, std::min(size, ph.p_filesz - into));
  }
  return {};
}

template <typename T>
std::optional<T> read_struct(std::span<const std::byte> bytes, std::size_t at) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

struct RelocationTables {
  std::span<const std::byte> rela;
  std::span<const std::byte> relr;
  std::function<std::string(std::uint32_t)> symbol_name;  // by index into the dynamic symbol table
};

std::string c_string_at(std::span<const std::byte> bytes) {
  if (bytes.empty()) return {};
  const char* text = reinterpret_cast<const char*>(bytes.data());
  return std::string(text, strnlen(text, bytes.size()));
}

std::optional<RelocationTables> tables_from_dynamic(const ElfFile& file) {
  const GElf_Phdr* dynamic = nullptr;
  for (const GElf_Phdr& ph : file.program_headers())
    if (ph.p_type == PT_DYNAMIC) dynamic = &ph;
  if (!dynamic) return std::nullopt;
  const auto entries = file.file_range(dynamic->p_offset, dynamic->p_filesz);
  std::optional<Address> rela, relr, symtab, strtab;
  std::uint64_t rela_size = 0, relr_size = 0, strtab_size = 0;
  for (std::size_t at = 0;; at += sizeof(Elf64_Dyn)) {
    const auto entry = read_struct<Elf64_Dyn>(entries, at);
    if (!entry || entry->d_tag == DT_NULL) break;
    const std::uint64_t value = entry->d_un.d_val;
    switch (entry->d_tag) {
      case DT_RELA: rela = value; break;
      case DT_RELASZ: rela_size = value; break;
      case DT_RELR: relr = value; break;
      case DT_RELRSZ: relr_size = value; break;
      case DT_SYMTAB: symtab = value; break;
      case DT_STRTAB: strtab = value; break;
      case DT_STRSZ: strtab_size = value; break;
      default: break;
    }
  }
  RelocationTables tables;
  if (rela) tables.rela = loaded_file_bytes(file, *rela, rela_size);
  if (relr) tables.relr = loaded_file_bytes(file, *relr, relr_size);
  if (symtab && strtab) {
    tables.symbol_name = [&file, symbols_at = *symtab, names_at = *strtab, strtab_size](std::uint32_t index) {
      const Address entry = symbols_at + std::uint64_t{index} * sizeof(Elf64_Sym);
      const auto sym = read_struct<Elf64_Sym>(loaded_file_bytes(file, entry, sizeof(Elf64_Sym)), 0);
      if (!sym || sym->st_name >= strtab_size) return std::string();
      return c_string_at(loaded_file_bytes(file, names_at + sym->st_name, strtab_size - sym->st_name));
    };
  }
  return tables;
}

// For files without a dynamic segment (unusual for a module, but cheap to support): the sections.
RelocationTables tables_from_sections(const ElfFile& file) {
  RelocationTables tables;
  if (Elf_Scn* rela = file.section(".rela.dyn")) {
    tables.rela = file.section_bytes(rela);
    GElf_Shdr header;
    if (gelf_getshdr(rela, &header)) {
      Elf_Scn* symbols = elf_getscn(file.elf(), header.sh_link);
      GElf_Shdr symbols_header;
      Elf_Data* data = symbols ? elf_getdata(symbols, nullptr) : nullptr;
      if (data && data->d_buf && gelf_getshdr(symbols, &symbols_header)) {
        tables.symbol_name = [&file, data, link = symbols_header.sh_link](std::uint32_t index) {
          GElf_Sym sym;
          if (!gelf_getsym(data, static_cast<int>(index), &sym)) return std::string();
          const char* name = elf_strptr(file.elf(), link, sym.st_name);
          return std::string(name ? name : "");
        };
      }
    }
  }
  for (Elf_Scn* scn = elf_nextscn(file.elf(), nullptr); scn; scn = elf_nextscn(file.elf(), scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) && header.sh_type == SHT_RELR) tables.relr = file.section_bytes(scn);
  }
  return tables;
}

void read_rela(std::span<const std::byte> table, const RelocationTables& tables,
               std::vector<RelativeRelocation>& relative, std::vector<TlsRelocation>& tls) {
  for (std::size_t at = 0;; at += sizeof(Elf64_Rela)) {
    const auto rela = read_struct<Elf64_Rela>(table, at);
    if (!rela) break;
    const std::uint32_t type = ELF64_R_TYPE(rela->r_info);
    if (type == R_X86_64_RELATIVE) {
      relative.push_back({rela->r_offset, static_cast<Address>(rela->r_addend)});
    } else if (type == R_X86_64_TPOFF64 || type == R_X86_64_DTPMOD64) {
      TlsRelocation r;
      r.module_id = type == R_X86_64_DTPMOD64;
      r.got_offset = rela->r_offset;
      r.addend = static_cast<std::uint64_t>(rela->r_addend);
      const std::uint32_t symbol = ELF64_R_SYM(rela->r_info);
      if (symbol != 0 && tables.symbol_name) r.symbol = tables.symbol_name(symbol);
      tls.push_back(std::move(r));
    }
  }
}

// DT_RELR: an even word is the address of a relocated word (and the next one is the base for a bitmap);
// an odd word is a bitmap whose bit i (1..63) relocates base + (i-1)*8, after which the base moves on by
// 63 words. Each relocated word holds its addend in the file.
//
// Every real relocation rewrites a distinct word of the file's loaded image, so more entries than the
// file has words means a corrupt table: stop there rather than grow without bound.
bool read_relr(const ElfFile& file, std::span<const std::byte> table,
               std::vector<RelativeRelocation>& relative) {
  const std::size_t limit = file.bytes().size() / 8 + 1;
  auto add = [&](Address offset) {
    std::uint64_t addend = 0;
    if (file.read_vaddr(offset, &addend, sizeof addend) == sizeof addend)
      relative.push_back({offset, addend});
    return relative.size() < limit;
  };
  constexpr int kBitsPerBitmap = 63;
  std::optional<Address> base;
  for (std::size_t at = 0;; at += 8) {
    const auto word = read_struct<std::uint64_t>(table, at);
    if (!word) return true;
    if ((*word & 1) == 0) {
      if (!add(*word)) return false;
      base = *word + 8;
      continue;
    }
    if (!base) continue;  // a bitmap before any address: nothing it could refer to
    std::uint64_t bits = *word >> 1;
    for (int i = 0; bits != 0; ++i, bits >>= 1)
      if ((bits & 1) && !add(*base + static_cast<Address>(i) * 8)) return false;
    *base += kBitsPerBitmap * 8;
  }
}

// A module file cut short (a copy interrupted, a library being rewritten) would give symbols and
// relocations for only part of it, silently; say so instead. (Cores are read leniently elsewhere: a
// truncated core still has much to tell.)
std::optional<std::string> truncation(const ElfFile& file) {
  const std::uint64_t size = file.bytes().size();
  const GElf_Ehdr& header = file.header();
  const std::uint64_t table_size = std::uint64_t{header.e_shnum} * header.e_shentsize;
  if (header.e_shoff != 0 && (header.e_shoff > size || table_size > size - header.e_shoff))
    return "section headers end past the end of the file";
  for (const GElf_Phdr& ph : file.program_headers())
    if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
      return "a loadable segment ends past the end of the file";
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

struct ModuleSymbols::Impl {
  std::string path;
  std::string build_id;
  std::string debug_file;
  DebugSource debug_source = DebugSource::none;
  bool has_local_symbols = false;
  DebugSource symtab_source = DebugSource::none;
  DebugSource dwarf_source = DebugSource::none;
  std::unique_ptr<ElfFile> elf;
  std::vector<Symbol> symbols;  // sorted by value, most presentable alias first
  // Function and object symbols in `symbols` order, with the furthest end reached by any of them up to
  // each position, so covering() knows when walking further back cannot find a cover.
  std::vector<const Symbol*> coverable;
  std::vector<Address> reach;
  std::unordered_map<std::string_view, const Symbol*> by_name;  // views into `symbols`, never resized
  std::vector<RelativeRelocation> relative;
  std::vector<TlsRelocation> tls;
  std::vector<std::string> warnings;

  void load_debug_file(const SymbolSearchOptions& options);
  bool use_debug_file(const std::string& candidate, DebugSource source, const std::optional<std::string>& id,
                      const std::optional<std::uint32_t>& crc);
  void index_symbols();
  void load_relocations();
};

// The local places first; debuginfod only for a module with a build-id and no DWARF of its own (gdb
// asks no server for what the file already has).
void ModuleSymbols::Impl::load_debug_file(const SymbolSearchOptions& options) {
  const std::optional<std::string> id = build_id.empty() ? std::nullopt : std::optional(build_id);
  const auto crc = debuglink_crc(*elf);
  for (const DebugFileCandidate& candidate : debug_file_candidates(path, id, elf->debuglink(), options)) {
    if (!exists(candidate.path) || same_file(candidate.path, path)) continue;
    if (use_debug_file(candidate.path, candidate.source, id, crc)) return;
  }
  if (!options.use_debuginfod || !id || has_dwarf(*elf)) return;
  const DebuginfodFetch fetched =
      debuginfod_fetch(DebuginfodFile::debuginfo, *id, fs::path(path).filename().string());
  if (!fetched.warning.empty()) warnings.push_back(fetched.warning);
  if (!fetched.path.empty()) use_debug_file(fetched.path, DebugSource::debuginfod, id, crc);
}

bool ModuleSymbols::Impl::use_debug_file(const std::string& candidate, DebugSource source,
                                         const std::optional<std::string>& id,
                                         const std::optional<std::uint32_t>& crc) {
  std::string error;
  auto debug = ElfFile::open(candidate, &error);
  if (!debug) {
    warnings.push_back("ignoring debug file " + candidate + ": " + error);
    return false;
  }
  std::string why;
  if (!debug_file_matches(*debug, id, crc, &why)) {
    warnings.push_back("ignoring debug file " + candidate + " for " + path + ": " + why);
    return false;
  }
  if (read_symbols(*debug, symbols)) {
    has_local_symbols = true;
    if (symtab_source == DebugSource::none) symtab_source = source;
  }
  debug_file = candidate;
  debug_source = source;
  dwarf_source = has_dwarf(*debug) ? source : DebugSource::none;
  return true;
}

void ModuleSymbols::Impl::index_symbols() {
  sort_and_deduplicate(symbols);
  Address furthest = 0;
  for (const Symbol& s : symbols) {
    if (!is_coverable(s)) continue;
    coverable.push_back(&s);
    furthest = std::max(furthest, s.value + std::max<std::uint64_t>(s.size, 1));
    reach.push_back(furthest);
  }
  by_name.reserve(symbols.size());
  for (const Symbol& s : symbols) {
    auto [it, inserted] = by_name.try_emplace(s.name, &s);
    if (!inserted && it->second->local && !s.local) it->second = &s;
  }
}

void ModuleSymbols::Impl::load_relocations() {
  if (!elf->is_x86_64()) return;
  auto tables = tables_from_dynamic(*elf);
  if (!tables) tables = tables_from_sections(*elf);
  read_rela(tables->rela, *tables, relative, tls);
  if (!read_relr(*elf, tables->relr, relative))
    warnings.push_back(path + ": RELR relocation table looks corrupt; read only its first entries");
}

std::unique_ptr<ModuleSymbols> ModuleSymbols::load(const std::string& path,
                                                   const SymbolSearchOptions& options, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->elf = ElfFile::open(path, error);
  if (!impl->elf) return nullptr;
  auto fail = [&](const std::string& why) -> std::unique_ptr<ModuleSymbols> {
    if (error) *error = path + ": " + why;
    return nullptr;
  };
  if (impl->elf->is_core()) return fail("a core file, not a module");
  if (auto cut = truncation(*impl->elf)) return fail("truncated file: " + *cut);
  impl->build_id = impl->elf->build_id().value_or("");
  impl->has_local_symbols = read_symbols(*impl->elf, impl->symbols);
  if (impl->has_local_symbols) impl->symtab_source = DebugSource::module_file;
  if (has_dwarf(*impl->elf)) impl->dwarf_source = DebugSource::module_file;
  if (options.use_debug_files) impl->load_debug_file(options);
  impl->index_symbols();
  impl->load_relocations();
  return std::unique_ptr<ModuleSymbols>(new ModuleSymbols(std::move(impl)));
}

bool ModuleSymbols::exports(const std::string& path, std::string_view name) {
  const std::unique_ptr<ElfFile> file = ElfFile::open(path, nullptr);
  if (!file) return false;
  for (Elf_Scn* scn = elf_nextscn(file->elf(), nullptr); scn; scn = elf_nextscn(file->elf(), scn)) {
    GElf_Shdr header;
    if (!gelf_getshdr(scn, &header) || header.sh_type != SHT_DYNSYM) continue;
    bool found = false;  // each symbol compared in place: nothing copied
    each_defined_symbol(*file, scn, [&](const GElf_Sym& raw, const char* defined) {
      found = GELF_ST_BIND(raw.st_info) != STB_LOCAL && name == defined;
      return !found;
    });
    return found;
  }
  return false;
}

ModuleSymbols::ModuleSymbols(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModuleSymbols::~ModuleSymbols() = default;

const std::string& ModuleSymbols::path() const { return impl_->path; }
const std::string& ModuleSymbols::build_id() const { return impl_->build_id; }
const std::string& ModuleSymbols::debug_file() const { return impl_->debug_file; }
DebugSource ModuleSymbols::debug_file_source() const { return impl_->debug_source; }
bool ModuleSymbols::has_local_symbols() const { return impl_->has_local_symbols; }
DebugSource ModuleSymbols::symtab_source() const { return impl_->symtab_source; }
DebugSource ModuleSymbols::dwarf_source() const { return impl_->dwarf_source; }
const ElfFile& ModuleSymbols::elf() const { return *impl_->elf; }
const std::vector<Symbol>& ModuleSymbols::symbols() const { return impl_->symbols; }
const std::vector<RelativeRelocation>& ModuleSymbols::relative_relocations() const { return impl_->relative; }
const std::vector<TlsRelocation>& ModuleSymbols::tls_relocations() const { return impl_->tls; }
const std::vector<std::string>& ModuleSymbols::warnings() const { return impl_->warnings; }

const Symbol* ModuleSymbols::find(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : it->second;
}

// The nearest-starting symbol that covers the address wins (a static inside a larger object, a local
// label inside a function); among aliases at that start, the most presentable.
const Symbol* ModuleSymbols::covering(Address file_vaddr) const {
  const auto& list = impl_->coverable;
  const auto after = std::upper_bound(list.begin(), list.end(), file_vaddr,
                                      [](Address a, const Symbol* s) { return a < s->value; });
  const Symbol* best = nullptr;
  for (auto i = static_cast<std::size_t>(after - list.begin()); i-- > 0;) {
    const Symbol* s = list[i];
    if (best && s->value != best->value) break;
    if (covers(*s, file_vaddr)) best = s;  // earlier in `list` at the same value = more presentable
    if (!best && impl_->reach[i] <= file_vaddr) break;
  }
  return best;
}

std::optional<Address> ModuleSymbols::find_bytes(std::string_view needle) const {
  if (needle.empty()) return std::nullopt;
  for (const GElf_Phdr& ph : impl_->elf->program_headers()) {
    if (ph.p_type != PT_LOAD) continue;
    const auto bytes = impl_->elf->file_range(ph.p_offset, ph.p_filesz);
    if (bytes.size() < needle.size()) continue;
    const void* hit = ::memmem(bytes.data(), bytes.size(), needle.data(), needle.size());
    if (hit) return ph.p_vaddr + static_cast<Address>(static_cast<const std::byte*>(hit) - bytes.data());
  }
  return std::nullopt;
}

const char* debug_source_name(DebugSource source) {
  switch (source) {
    case DebugSource::module_file: return "file";
    case DebugSource::build_id_directory: return "build-id";
    case DebugSource::debuglink: return "debuglink";
    case DebugSource::debuginfod: return "debuginfod";
    case DebugSource::none: break;
  }
  return "none";
}

std::string demangle(std::string_view name) {
  if (name.substr(0, 2) != "_Z") return std::string(name);
  const std::string mangled(name);
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !plain) {
    std::free(plain);
    return mangled;
  }
  std::string out(plain);
  std::free(plain);
  return out;
}

}  // namespace heapscope
