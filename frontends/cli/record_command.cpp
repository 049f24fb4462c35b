#include "frontends/cli/record_command.h"

#include <fmt/format.h>
#include <gelf.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string_view>

#include "elf/elf_file.h"

namespace heapscope {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryName = "libheapscope_sites.so";
// Allocators that replace malloc themselves: preloading the recorder would move the program onto glibc's
// malloc under them, and they keep sites of their own (issue 37's readers).
constexpr std::array<std::pair<const char*, const char*>, 3> kOwnAllocators{{
    {"libjemalloc", "start it with MALLOC_CONF=prof:true (jemalloc samples allocations itself)"},
    {"libtcmalloc", "start it with TCMALLOC_SAMPLE_PARAMETER=524288 (tcmalloc samples allocations itself)"},
    {"libmimalloc", "mimalloc replaces glibc's malloc, whose allocations the recorder samples"},
}};

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The file execvp would run for `program`.
std::string program_file(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (is_file(candidate) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return program;
}

std::vector<std::string> needed_libraries(const ElfFile& elf) {
  std::vector<std::string> needed;
  Elf_Scn* dynamic = elf.section(".dynamic");
  if (!dynamic) return needed;
  GElf_Shdr header;
  Elf_Data* data = gelf_getshdr(dynamic, &header) ? elf_getdata(dynamic, nullptr) : nullptr;
  if (!data || header.sh_entsize == 0) return needed;
  for (std::size_t i = 0; i < header.sh_size / header.sh_entsize; ++i) {
    GElf_Dyn entry;
    if (!gelf_getdyn(data, static_cast<int>(i), &entry)) break;
    if (entry.d_tag != DT_NEEDED) continue;
    if (const char* name = elf_strptr(elf.elf(), header.sh_link, entry.d_un.d_val)) needed.emplace_back(name);
  }
  return needed;
}

// Whether the file's dynamic symbol table defines `malloc`: the program serves malloc itself (an allocator
// linked in statically), and comes before any preloaded library in symbol lookup order.
bool defines_malloc(const ElfFile& elf) {
  Elf_Scn* symbols = elf.section(".dynsym");
  GElf_Shdr header;
  Elf_Data* data = symbols && gelf_getshdr(symbols, &header) ? elf_getdata(symbols, nullptr) : nullptr;
  if (!data || header.sh_entsize == 0) return false;
  for (std::size_t i = 0; i < header.sh_size / header.sh_entsize; ++i) {
    GElf_Sym symbol;
    if (!gelf_getsym(data, static_cast<int>(i), &symbol)) break;
    if (symbol.st_shndx == SHN_UNDEF || GELF_ST_TYPE(symbol.st_info) != STT_FUNC) continue;
    const char* name = elf_strptr(elf.elf(), header.sh_link, symbol.st_name);
    if (name && std::strcmp(name, "malloc") == 0) return true;
  }
  return false;
}

// Why the recorder cannot work in `file`, or empty (also when the file cannot be read as ELF: a script
// runs an interpreter, which the preload reaches).
std::string why_not(const std::string& file) {
  std::string error;
  const auto elf = ElfFile::open(file, &error);
  if (!elf) return {};
  const auto& phdrs = elf->program_headers();
  const auto interp = std::find_if(phdrs.begin(), phdrs.end(), [](const GElf_Phdr& p) { return p.p_type == PT_INTERP; });
  if (interp == phdrs.end()) return fmt::format("{} is statically linked: no library can be preloaded into it", file);
  const auto bytes = elf->file_range(interp->p_offset, interp->p_filesz);
  const std::string interpreter(reinterpret_cast<const char*>(bytes.data()), strnlen(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (interpreter.find("ld-musl") != std::string::npos)
    return fmt::format("{} runs on musl's C library (its interpreter is {}): the recorder is built against glibc's "
                       "and cannot be loaded into it",
                       file, interpreter);
  for (const std::string& library : needed_libraries(*elf))
    for (const auto& [prefix, instead] : kOwnAllocators)
      if (library.starts_with(prefix)) return fmt::format("{} uses {}: {}", file, library, instead);
  if (defines_malloc(*elf))
    return fmt::format("{} defines malloc itself (an allocator linked in): the recorder's would never be called", file);
  return {};
}

// Why the user's own LD_PRELOAD (`preloads`, as ld.so reads it: colon- or space-separated) leaves the
// recorder nothing to sample, or empty.
std::string why_not_with(const std::string& preloads) {
  for (std::size_t start = 0; start < preloads.size();) {
    const std::size_t end = std::min(preloads.find_first_of(": ", start), preloads.size());
    const std::string library = fs::path(preloads.substr(start, end - start)).filename().string();
    for (const auto& [prefix, instead] : kOwnAllocators)
      if (library.starts_with(prefix)) return fmt::format("LD_PRELOAD has {}: {}", library, instead);
    start = end + 1;
  }
  return {};
}

}  // namespace

std::string recorder_library(std::string* error) {
  if (const char* chosen = std::getenv("HEAPSCOPE_SITES_LIBRARY"); chosen && *chosen) {
    if (is_file(chosen)) return chosen;
    *error = fmt::format("HEAPSCOPE_SITES_LIBRARY names {}, which does not exist", chosen);
    return {};
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) candidates.push_back(self.parent_path().parent_path() / "lib" / "heapscope" / kLibraryName);
#ifdef HEAPSCOPE_BUILD_SITES_LIBRARY
  candidates.emplace_back(HEAPSCOPE_BUILD_SITES_LIBRARY);
#endif
  for (const fs::path& candidate : candidates)
    if (is_file(candidate)) return fs::absolute(candidate).string();
  *error = fmt::format("cannot find {} (looked for {}); HEAPSCOPE_SITES_LIBRARY may name it", kLibraryName,
                       candidates.empty() ? std::string("nothing") : candidates.front().string());
  return {};
}

CLI::App* add_record_command(CLI::App& app, RecordOptions& options) {
  CLI::App* record = app.add_subcommand(
      "record",
      "Run a glibc program with heapscope's allocation-site recorder: it samples allocations and keeps each "
      "sampled block's stack in the process, so that any later core or attach says where blocks were "
      "allocated (`heapscope record -- ./server --port 80`)");
  record->add_option("--every", options.every,
                     "Mean bytes allocated between two samples (default 524288, as jemalloc and tcmalloc sample; 1 "
                     "samples every allocation)")
      ->check(CLI::PositiveNumber);
  record->add_option("--slots", options.slots,
                     "Sampled blocks the recorder can keep live at once (default 65536, or 1048576 with --every 1)")
      ->check(CLI::PositiveNumber);
  // Everything from the program's name on is the program's, its options included: main() hands it over
  // unparsed (record_program_start); the positional is there for --help.
  record->add_option("PROGRAM", options.program, "The program to run, then its arguments (after --, or after "
                     "record's own options)");
  return record;
}

int record_program_start(int argc, char** argv) {
  int i = 2;
  while (i < argc) {
    const std::string_view word = argv[i];
    if (word == "--") return i + 1;
    if (word == "--every" || word == "--slots") i += 2;
    else if (word.starts_with("--every=") || word.starts_with("--slots=") || word == "-h" || word == "--help") ++i;
    else break;
  }
  return std::min(i, argc);
}

int run_record(const RecordOptions& options) {
  std::string error;
  const std::string library = recorder_library(&error);
  auto fail = [](const std::string& message) {
    std::cerr << "heapscope record: " << message << "\n";
    return 1;
  };
  if (library.empty()) return fail(error);
  if (options.program.empty()) return fail("no program given: heapscope record [--every BYTES] [--slots N] -- PROGRAM ARGS...");
  const std::string program = options.program.front();
  if (const std::string problem = why_not(program_file(program)); !problem.empty()) return fail(problem);
  // The user's own preloads stay first, where they asked for them (the ASan runtime must be first of all);
  // the recorder still comes before libc, whose malloc it wraps.
  const char* preload = std::getenv("LD_PRELOAD");
  if (const std::string problem = why_not_with(preload ? preload : ""); !problem.empty()) return fail(problem);
  const std::string preloads = preload && *preload ? std::string(preload) + ":" + library : library;
  ::setenv("LD_PRELOAD", preloads.c_str(), 1);
  if (options.every) ::setenv("HEAPSCOPE_SAMPLE_BYTES", std::to_string(options.every).c_str(), 1);
  if (options.slots) ::setenv("HEAPSCOPE_SITES_SLOTS", std::to_string(options.slots).c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& arg : options.program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int why = errno;
  fail(fmt::format("cannot run {}: {}", program, std::strerror(why)));
  return why == ENOENT ? 127 : 126;  // as env and the shells say it
}

}  // namespace heapscope
