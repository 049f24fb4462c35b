// Symbols and relocations, on real files: this machine's libc (and its libc6-dbg debug file) and a small
// library compiled here, split into stripped module + debug file the way distributions ship them.
#include <link.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "elf/elf_file.h"
#include "image/image.h"
#include "symbols/module_symbols.h"
#include "symbols/symbol_index.h"
#include "types/block_types.h"

namespace fs = std::filesystem;
using namespace heapscope;

namespace {

// ---------------------------------------------------------------------------------------------------
// Test material

std::string libc_path() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("/libc.so.6") == std::string::npos) return 0;
        *static_cast<std::string*>(out) = name;
        return 1;
      },
      &found);
  return found;
}

void run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

std::string read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A library with one of everything the loader distinguishes: global and static objects, a static
// function, exported and private initial-exec TLS, and a table of pointers long enough to need RELR
// bitmaps when packed. `flavour` changes the code so that two builds get different build-ids.
std::string probe_source(int flavour) {
  std::string pointers;
  for (int i = 0; i < 100; ++i) pointers += "&static_table[" + std::to_string(i % 8) + "], ";
  return "int g_cache[32] = {1, 2, 3};\n"
         "static int static_table[8] = {" + std::to_string(flavour) + "};\n"
         "int *g_pointers[100] = {" + pointers + "};\n"
         "__thread long t_exported = 5;\n"
         "static __thread long t_private[4];\n"
         "__attribute__((noinline)) static int helper(int x) { return x * 3 + static_table[x & 7]; }\n"
         "long probe_entry(int x) {\n"
         "  t_private[1] += x;\n"
         "  t_exported += helper(x);\n"
         "  return t_private[1] + *g_pointers[x & 63];\n"
         "}\n";
}

// Removed again even when a build step fails half-way (the ProbeBuilds constructor then throws).
struct TemporaryDirectory {
  TemporaryDirectory() {
    char pattern[] = "/tmp/heapscope-symbols-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  fs::path path;
};

class ProbeBuilds {
 public:
  ProbeBuilds() : root(temporary.path) {
    write_file(root / "probe.c", probe_source(1));
    write_file(root / "other.c", probe_source(2));
    const std::string cc = "cc -shared -fPIC -O0 -g -ftls-model=initial-exec -Wl,--build-id ";
    fs::create_directories(root / "plain");
    fs::create_directories(root / "packed");
    fs::create_directories(root / "other");
    fs::create_directories(root / "split");
    plain = root / "plain" / "libprobe.so";
    packed = root / "packed" / "libprobe.so";
    other = root / "other" / "libprobe.so";
    run(cc + "-o " + plain.string() + " " + (root / "probe.c").string());
    run(cc + "-Wl,-z,pack-relative-relocs -o " + packed.string() + " " + (root / "probe.c").string());
    run(cc + "-o " + other.string() + " " + (root / "other.c").string());

    // As distributions ship it: a fully stripped module that names its debug file.
    stripped = root / "split" / "libprobe.so";
    debug = root / "split" / "libprobe.so.debug";
    other_debug = root / "other" / "libprobe.so.debug";
    fs::copy_file(plain, stripped);
    run("objcopy --only-keep-debug " + stripped.string() + " " + debug.string());
    run("strip --strip-all " + stripped.string());
    run("cd " + (root / "split").string() + " && objcopy --add-gnu-debuglink=libprobe.so.debug libprobe.so");
    run("objcopy --only-keep-debug " + other.string() + " " + other_debug.string());
  }

  // A directory holding only a copy of the stripped module, so nothing is found next to it by accident.
  fs::path lone_copy_of_stripped(const std::string& name) const {
    const fs::path dir = root / name;
    fs::create_directories(dir);
    fs::copy_file(stripped, dir / "libprobe.so", fs::copy_options::overwrite_existing);
    return dir / "libprobe.so";
  }

  TemporaryDirectory temporary;
  fs::path root, plain, packed, other, stripped, debug, other_debug;
};

const ProbeBuilds& probe() {
  static ProbeBuilds builds;
  return builds;
}

std::unique_ptr<ModuleSymbols> load_or_fail(const fs::path& path, const SymbolSearchOptions& options) {
  std::string error;
  auto symbols = ModuleSymbols::load(path.string(), options, &error);
  INFO(error);
  REQUIRE(symbols);
  return symbols;
}

// Local files only: a DEBUGINFOD_URLS in the environment must not send these tests to a server.
SymbolSearchOptions debug_dirs(std::vector<std::string> dirs) {
  SymbolSearchOptions options;
  options.debug_dirs = std::move(dirs);
  options.use_debuginfod = false;
  return options;
}

fs::path build_id_path(const fs::path& debug_dir, const std::string& build_id) {
  return debug_dir / ".build-id" / build_id.substr(0, 2) / (build_id.substr(2) + ".debug");
}

// An Image with nothing but modules: enough for SymbolIndex, which needs no memory.
class ModulesOnlyImage : public Image {
 public:
  explicit ModulesOnlyImage(std::vector<Module> modules) : modules_(std::move(modules)) {}
  const std::vector<MemoryRegion>& regions() const override { return regions_; }
  const std::vector<ThreadState>& threads() const override { return threads_; }
  const std::vector<Module>& modules() const override { return modules_; }
  const std::vector<AuxvEntry>& auxv() const override { return auxv_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  std::string description() const override { return "modules only"; }
  std::size_t read(Address, void*, std::size_t) const override { return 0; }

 private:
  std::vector<MemoryRegion> regions_;
  std::vector<ThreadState> threads_;
  std::vector<Module> modules_;
  std::vector<AuxvEntry> auxv_;
  std::vector<std::string> warnings_;
};

Module module_at_bias(const std::string& path, const std::string& file_on_disk, Address bias) {
  Module m;
  m.path = path;
  m.file_on_disk = file_on_disk;
  m.load_bias = bias;
  m.start = bias;
  m.end = bias + 0x100000;
  return m;
}

bool has_relative(const ModuleSymbols& symbols, Address offset, Address addend) {
  const auto& all = symbols.relative_relocations();
  return std::any_of(all.begin(), all.end(),
                     [&](const RelativeRelocation& r) { return r.offset == offset && r.addend == addend; });
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// libc

TEST_CASE("libc's debug file gives main_arena, mp_ and the tcache TLS symbol", "[symbols][libc]") {
  const std::string libc = libc_path();
  REQUIRE(!libc.empty());
  const auto symbols = load_or_fail(libc, SymbolSearchOptions{});

  REQUIRE(!symbols->build_id().empty());
  CHECK(symbols->debug_file() == build_id_path("/usr/lib/debug", symbols->build_id()).string());
  CHECK(symbols->has_local_symbols());

  const Symbol* main_arena = symbols->find("main_arena");
  REQUIRE(main_arena);
  CHECK(main_arena->kind == SymbolKind::object);
  CHECK(main_arena->size == 2200);
  CHECK(main_arena->local);
  const Symbol* mp = symbols->find("mp_");
  REQUIRE(mp);
  CHECK(mp->kind == SymbolKind::object);
  const Symbol* tcache = symbols->find("tcache");
  REQUIRE(tcache);
  CHECK(tcache->kind == SymbolKind::tls);
  const Symbol* malloc_symbol = symbols->find("malloc");
  REQUIRE(malloc_symbol);
  CHECK(malloc_symbol->kind == SymbolKind::function);

  CHECK(symbols->covering(main_arena->value + 100) == main_arena);
  CHECK(symbols->covering(malloc_symbol->value + 1)->value == malloc_symbol->value);
}

TEST_CASE("without debug files libc offers only its dynamic symbols", "[symbols][libc]") {
  SymbolSearchOptions options;
  options.use_debug_files = false;
  const auto symbols = load_or_fail(libc_path(), options);
  CHECK(symbols->debug_file().empty());
  CHECK_FALSE(symbols->has_local_symbols());
  CHECK(symbols->find("main_arena") == nullptr);
  CHECK(symbols->find("mp_") == nullptr);
  CHECK(symbols->find("tcache") == nullptr);
  REQUIRE(symbols->find("malloc"));
  CHECK(symbols->find("malloc")->kind == SymbolKind::function);
}

TEST_CASE("exports() reads the dynamic symbol table alone: what libc exports, not what its debug file has",
          "[symbols][libc]") {
  CHECK(ModuleSymbols::exports(libc_path(), "malloc"));
  CHECK(ModuleSymbols::exports(libc_path(), "pthread_create"));
  CHECK_FALSE(ModuleSymbols::exports(libc_path(), "main_arena"));  // in the debug file's .symtab only
  CHECK_FALSE(ModuleSymbols::exports(libc_path(), "GC_malloc"));
  CHECK_FALSE(ModuleSymbols::exports("/nonexistent/libgc.so", "GC_malloc"));
}

TEST_CASE("libc's relocations point at main_arena and the tcache TLS slot", "[symbols][libc]") {
  const auto symbols = load_or_fail(libc_path(), SymbolSearchOptions{});
  // libc.so.6 on this system packs its relative relocations; make sure that path is what is tested.
  REQUIRE(symbols->elf().section(".relr.dyn") != nullptr);
  const Symbol* main_arena = symbols->find("main_arena");
  const Symbol* tcache = symbols->find("tcache");
  REQUIRE(main_arena);
  REQUIRE(tcache);

  constexpr Address kOffsetOfNext = 2160;  // main_arena.next, statically &main_arena
  CHECK(has_relative(*symbols, main_arena->value + kOffsetOfNext, main_arena->value));

  // Every decoded relocation must store a pointer into libc itself: a mis-decoded RELR bitmap would
  // produce offsets whose words are not pointers at all.
  Address image_end = 0;
  for (const GElf_Phdr& ph : symbols->elf().program_headers())
    if (ph.p_type == PT_LOAD) image_end = std::max<Address>(image_end, ph.p_vaddr + ph.p_memsz);
  REQUIRE(symbols->relative_relocations().size() > 1000);
  for (const RelativeRelocation& r : symbols->relative_relocations()) {
    INFO("offset " << r.offset << " addend " << r.addend);
    REQUIRE(r.offset < image_end);
    REQUIRE(r.addend < image_end);
  }

  const auto& tls = symbols->tls_relocations();
  CHECK(std::any_of(tls.begin(), tls.end(), [&](const TlsRelocation& r) {
    return r.addend == tcache->value && r.symbol.empty();
  }));
}

TEST_CASE("find_bytes locates libc's version banner", "[symbols][libc]") {
  const auto symbols = load_or_fail(libc_path(), SymbolSearchOptions{});
  const auto at = symbols->find_bytes("GNU C Library");
  REQUIRE(at);
  char text[14] = {};
  REQUIRE(symbols->elf().read_vaddr(*at, text, 13) == 13);
  CHECK(std::string(text) == "GNU C Library");
  CHECK_FALSE(symbols->find_bytes("no such byte sequence in libc, surely: 8d1f6c0e"));
}

// ---------------------------------------------------------------------------------------------------
// A library built here

TEST_CASE("symbol kinds, sizes and locality of a freshly built library", "[symbols][probe]") {
  const auto symbols = load_or_fail(probe().plain, debug_dirs({}));
  CHECK(symbols->has_local_symbols());
  CHECK(symbols->debug_file().empty());

  const Symbol* cache = symbols->find("g_cache");
  REQUIRE(cache);
  CHECK(cache->kind == SymbolKind::object);
  CHECK(cache->size == 32 * sizeof(int));
  CHECK_FALSE(cache->local);
  const Symbol* table = symbols->find("static_table");
  REQUIRE(table);
  CHECK(table->local);
  REQUIRE(symbols->find("helper"));
  CHECK(symbols->find("helper")->kind == SymbolKind::function);
  REQUIRE(symbols->find("t_private"));
  CHECK(symbols->find("t_private")->kind == SymbolKind::tls);
  CHECK(symbols->find("probe_entry") != nullptr);
  CHECK(symbols->find("no_such_symbol") == nullptr);

  const auto& all = symbols->symbols();
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [](const Symbol& a, const Symbol& b) { return a.value < b.value; }));
  // g_cache is in both .dynsym and .symtab: one copy only.
  CHECK(std::count_if(all.begin(), all.end(), [](const Symbol& s) { return s.name == "g_cache"; }) == 1);
}

TEST_CASE("covering() finds the symbol around an address", "[symbols][probe]") {
  const auto symbols = load_or_fail(probe().plain, debug_dirs({}));
  const Symbol* cache = symbols->find("g_cache");
  REQUIRE(cache);
  CHECK(symbols->covering(cache->value) == cache);
  CHECK(symbols->covering(cache->value + 0x10) == cache);
  CHECK(symbols->covering(cache->value + cache->size - 1) == cache);
  const Symbol* after = symbols->covering(cache->value + cache->size);
  CHECK(after != cache);
  CHECK(symbols->covering(0) == nullptr);  // the ELF header belongs to no symbol
}

TEST_CASE("relative relocations from .rela.dyn and from a packed RELR table agree", "[symbols][probe]") {
  const auto rela = load_or_fail(probe().plain, debug_dirs({}));
  const auto relr = load_or_fail(probe().packed, debug_dirs({}));
  REQUIRE(relr->elf().section(".relr.dyn") != nullptr);
  REQUIRE(rela->elf().section(".relr.dyn") == nullptr);

  for (const ModuleSymbols* symbols : {rela.get(), relr.get()}) {
    INFO(symbols->path());
    const Symbol* pointers = symbols->find("g_pointers");
    const Symbol* table = symbols->find("static_table");
    REQUIRE(pointers);
    REQUIRE(table);
    // 100 consecutive pointers to a static (a global could be preempted, so would get symbolic
    // relocations): one address word and then bitmaps in the RELR form.
    for (int i = 0; i < 100; ++i) {
      INFO("g_pointers[" << i << "]");
      CHECK(has_relative(*symbols, pointers->value + 8 * i, table->value + 4 * (i % 8)));
    }
  }
}

TEST_CASE("initial-exec TLS relocations name exported variables and carry offsets of private ones",
          "[symbols][probe]") {
  const auto symbols = load_or_fail(probe().plain, debug_dirs({}));
  const Symbol* private_tls = symbols->find("t_private");
  REQUIRE(private_tls);
  const auto& tls = symbols->tls_relocations();
  CHECK(std::any_of(tls.begin(), tls.end(), [](const TlsRelocation& r) { return r.symbol == "t_exported"; }));
  CHECK(std::any_of(tls.begin(), tls.end(), [&](const TlsRelocation& r) {
    return r.symbol.empty() && r.addend == private_tls->value;
  }));
}

TEST_CASE("a stripped module gets its local symbols from the debuglink file beside it", "[symbols][debug]") {
  const ProbeBuilds& builds = probe();
  const auto symbols = load_or_fail(builds.stripped, debug_dirs({}));
  CHECK(symbols->debug_file() == builds.debug.string());
  CHECK(symbols->has_local_symbols());
  CHECK(symbols->debug_file_source() == DebugSource::debuglink);
  CHECK(symbols->symtab_source() == DebugSource::debuglink);
  CHECK(symbols->dwarf_source() == DebugSource::debuglink);
  REQUIRE(symbols->find("helper"));
  CHECK(symbols->find("helper")->kind == SymbolKind::function);
  REQUIRE(symbols->find("static_table"));
  CHECK(symbols->find("static_table")->local);

  SymbolSearchOptions no_debug = debug_dirs({});
  no_debug.use_debug_files = false;
  const auto bare = load_or_fail(builds.stripped, no_debug);
  CHECK(bare->debug_file().empty());
  CHECK_FALSE(bare->has_local_symbols());
  CHECK(bare->debug_file_source() == DebugSource::none);
  CHECK(bare->symtab_source() == DebugSource::none);
  CHECK(bare->dwarf_source() == DebugSource::none);
  CHECK(bare->find("helper") == nullptr);
  CHECK(bare->find("static_table") == nullptr);
  CHECK(bare->find("g_cache") != nullptr);  // exported: in .dynsym

  // The unstripped build has all of it in itself.
  const auto whole = load_or_fail(builds.plain, debug_dirs({}));
  CHECK(whole->symtab_source() == DebugSource::module_file);
  CHECK(whole->dwarf_source() == DebugSource::module_file);
}

TEST_CASE("debuglink files are found in .debug/ and mirrored under a debug directory", "[symbols][debug]") {
  const ProbeBuilds& builds = probe();
  SECTION(".debug/ subdirectory") {
    const fs::path module = builds.lone_copy_of_stripped("dotdebug");
    fs::create_directories(module.parent_path() / ".debug");
    fs::copy_file(builds.debug, module.parent_path() / ".debug" / "libprobe.so.debug");
    const auto symbols = load_or_fail(module, debug_dirs({}));
    CHECK(symbols->debug_file() == (module.parent_path() / ".debug" / "libprobe.so.debug").string());
    CHECK(symbols->find("helper") != nullptr);
  }
  SECTION("<debug dir>/<module dir>/") {
    const fs::path module = builds.lone_copy_of_stripped("mirrored");
    const fs::path debug_root = builds.root / "mirror-root";
    const fs::path mirrored = debug_root / module.parent_path().relative_path() / "libprobe.so.debug";
    fs::create_directories(mirrored.parent_path());
    fs::copy_file(builds.debug, mirrored, fs::copy_options::overwrite_existing);
    const auto symbols = load_or_fail(module, debug_dirs({debug_root.string()}));
    CHECK(symbols->debug_file() == mirrored.string());
    CHECK(symbols->find("helper") != nullptr);
  }
}

TEST_CASE("a debug file is found by build-id under a debug directory", "[symbols][debug]") {
  const ProbeBuilds& builds = probe();
  const fs::path module = builds.lone_copy_of_stripped("by-build-id");
  const auto bare = load_or_fail(module, debug_dirs({}));
  REQUIRE(bare->build_id().size() > 2);
  CHECK(bare->find("helper") == nullptr);

  const fs::path debug_root = builds.root / "debug-root";
  const fs::path by_id = build_id_path(debug_root, bare->build_id());
  fs::create_directories(by_id.parent_path());
  fs::copy_file(builds.debug, by_id, fs::copy_options::overwrite_existing);

  const auto symbols =
      load_or_fail(module, debug_dirs({(builds.root / "empty-dir").string(), debug_root.string()}));
  CHECK(symbols->debug_file() == by_id.string());
  CHECK(symbols->debug_file_source() == DebugSource::build_id_directory);
  CHECK(symbols->dwarf_source() == DebugSource::build_id_directory);
  CHECK(std::string(debug_source_name(symbols->dwarf_source())) == "build-id");
  REQUIRE(symbols->find("helper"));
  CHECK(symbols->find("static_table") != nullptr);
}

TEST_CASE("a debug file with another build-id is rejected", "[symbols][debug]") {
  const ProbeBuilds& builds = probe();
  const fs::path module = builds.lone_copy_of_stripped("mismatch");
  const auto bare = load_or_fail(module, debug_dirs({}));
  REQUIRE(load_or_fail(builds.other, debug_dirs({}))->build_id() != bare->build_id());

  // The wrong debug file planted at both places it would be looked for.
  const fs::path debug_root = builds.root / "mismatch-root";
  const fs::path by_id = build_id_path(debug_root, bare->build_id());
  fs::create_directories(by_id.parent_path());
  fs::copy_file(builds.other_debug, by_id, fs::copy_options::overwrite_existing);
  fs::copy_file(builds.other_debug, module.parent_path() / "libprobe.so.debug",
                fs::copy_options::overwrite_existing);

  const auto symbols = load_or_fail(module, debug_dirs({debug_root.string()}));
  CHECK(symbols->debug_file().empty());
  CHECK(symbols->find("helper") == nullptr);
  CHECK(symbols->find("static_table") == nullptr);
  REQUIRE(symbols->warnings().size() == 2);
  CHECK_THAT(symbols->warnings()[0], Catch::Contains("does not match"));
}

// ---------------------------------------------------------------------------------------------------
// SymbolIndex

TEST_CASE("SymbolIndex resolves and describes runtime addresses", "[symbols][index]") {
  const ProbeBuilds& builds = probe();
  constexpr Address kBias = 0x7f0000000000;
  Module vdso = module_at_bias("[vdso]", "", 0x7fff00000000);
  // Sorted by start, as every Image keeps its modules.
  ModulesOnlyImage image({module_at_bias("/gone/libmissing.so.1", (builds.root / "missing.so").string(),
                                         0x7e0000000000),
                          module_at_bias("/opt/app/lib/libprobe.so", builds.stripped.string(), kBias), vdso});
  SymbolIndex index(image, debug_dirs({}));
  const Module& probe_module = image.modules()[1];

  REQUIRE(index.find_module("libprobe") == &probe_module);
  CHECK(index.find_module("libmiss") == &image.modules()[0]);
  CHECK(index.find_module("libc.so") == nullptr);

  const ModuleSymbols* symbols = index.symbols_for(probe_module);
  REQUIRE(symbols);
  CHECK(index.symbols_for(probe_module) == symbols);  // loaded once
  const Symbol* cache = symbols->find("g_cache");
  REQUIRE(cache);

  REQUIRE(index.address_of(probe_module, "g_cache") == kBias + cache->value);
  CHECK(index.address_of(probe_module, "helper") == kBias + symbols->find("helper")->value);
  CHECK_FALSE(index.address_of(probe_module, "t_private"));  // TLS: an offset, not an address
  CHECK_FALSE(index.address_of(probe_module, "no_such_symbol"));

  const Address inside = kBias + cache->value + 0x10;
  const ResolvedSymbol resolved = index.resolve(inside);
  CHECK(resolved.module == &probe_module);
  CHECK(resolved.symbol == cache);
  CHECK(resolved.offset == 0x10);
  CHECK(index.describe(inside) == "g_cache+0x10 in libprobe.so");
  CHECK(index.describe(kBias + cache->value) == "g_cache in libprobe.so");
  CHECK(index.describe(kBias + 0x40) == "libprobe.so+0x40");  // ELF header: no symbol
  CHECK(index.describe(0x1234) == "0x1234");

  // [vdso] has no file: quietly nothing. A missing file: a warning naming the module.
  CHECK(index.symbols_for(vdso) == nullptr);
  CHECK(index.warnings().empty());
  CHECK(index.describe(0x7e0000000100) == "libmissing.so.1+0x100");
  REQUIRE(index.warnings().size() == 1);
  CHECK_THAT(index.warnings()[0], Catch::Contains("/gone/libmissing.so.1"));
}

TEST_CASE("SymbolIndex loads each module once under concurrent use", "[symbols][index]") {
  ModulesOnlyImage image({module_at_bias("/lib/libprobe.so", probe().plain.string(), 0x7f0000000000)});
  SymbolIndex index(image, debug_dirs({}));
  std::vector<const ModuleSymbols*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = index.symbols_for(image.modules()[0]); });
  for (auto& t : threads) t.join();
  REQUIRE(seen[0] != nullptr);
  CHECK(std::all_of(seen.begin(), seen.end(), [&](const ModuleSymbols* s) { return s == seen[0]; }));
}

// ---------------------------------------------------------------------------------------------------
// Names and bad input

TEST_CASE("demangle turns C++ names readable and leaves others alone", "[symbols]") {
  CHECK(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi") ==
        "std::vector<int, std::allocator<int> >::push_back(int const&)");
  CHECK(demangle("_Z3fooi") == "foo(int)");
  CHECK(demangle("main_arena") == "main_arena");
  CHECK(demangle("_Zgarbage!") == "_Zgarbage!");
  CHECK(demangle("") == "");
}

TEST_CASE("a std::function manager names its functor, commas in the lambda's scope included", "[symbols]") {
  CHECK(functor_type_from_manager("std::_Function_base::_Base_manager<main::{lambda()#1}>::_M_manager("
                                  "std::_Any_data&, std::_Any_data const&, std::_Manager_operation)") ==
        "main::{lambda()#1}");
  CHECK(functor_type_from_manager("std::_Function_handler<void (int, long), wrap(std::function<void ()>, unsigned "
                                  "long)::{lambda()#1}>::_M_manager(std::_Any_data&, std::_Any_data const&, "
                                  "std::_Manager_operation)") ==
        "wrap(std::function<void ()>, unsigned long)::{lambda()#1}");
  CHECK(functor_type_from_manager("std::vector<int, std::allocator<int> >::push_back(int const&)").empty());
}

TEST_CASE("files that are not usable modules give an error, not a crash", "[symbols][garbage]") {
  const ProbeBuilds& builds = probe();
  std::string error;
  SECTION("not an ELF file") {
    write_file(builds.root / "text.so", "this is not an ELF file, just text long enough to look at\n");
    CHECK(ModuleSymbols::load((builds.root / "text.so").string(), {}, &error) == nullptr);
    CHECK_THAT(error, Catch::Contains("not an ELF file"));
  }
  SECTION("missing") {
    CHECK(ModuleSymbols::load((builds.root / "nothing-here.so").string(), {}, &error) == nullptr);
    CHECK_THAT(error, Catch::Contains("cannot open"));
  }
  SECTION("truncated") {
    const std::string whole = read_file_bytes(builds.plain);
    for (std::size_t keep : {std::size_t{64}, std::size_t{4096}, whole.size() / 2, whole.size() - 1}) {
      INFO("kept " << keep << " of " << whole.size() << " bytes");
      write_file(builds.root / "truncated.so", whole.substr(0, keep));
      error.clear();
      CHECK(ModuleSymbols::load((builds.root / "truncated.so").string(), {}, &error) == nullptr);
      CHECK_FALSE(error.empty());
    }
  }
}

TEST_CASE("corrupted modules load partially or fail, never crash", "[symbols][garbage]") {
  const ProbeBuilds& builds = probe();
  const std::string whole = read_file_bytes(builds.packed);
  const fs::path damaged = builds.root / "damaged.so";
  std::mt19937_64 random(20240611);
  for (int round = 0; round < 200; ++round) {
    std::string bytes = whole;
    // Spare the ELF identification so most rounds get past the magic check into the tables.
    std::uniform_int_distribution<std::size_t> where(16, bytes.size() - 1);
    for (int i = 0; i < 32; ++i) bytes[where(random)] = static_cast<char>(random());
    write_file(damaged, bytes);
    std::string error;
    const auto symbols = ModuleSymbols::load(damaged.string(), debug_dirs({}), &error);
    INFO("round " << round);
    REQUIRE((symbols != nullptr || !error.empty()));
    if (symbols) {
      CHECK(symbols->relative_relocations().size() <= whole.size() / 8 + 1);
      (void)symbols->covering(0x1000);
      (void)symbols->find_bytes("probe");
    }
  }
}
