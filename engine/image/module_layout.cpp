#include "image/module_layout.h"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <tuple>

namespace heapscope {

namespace {

constexpr std::uint64_t kPageSize = 4096;

std::uint64_t page_down(std::uint64_t v) { return v & ~(kPageSize - 1); }

// A module being assembled: its mappings (or mappings derived from its file's program headers when only
// link_map knows it), what its in-memory ELF header says, and the file that may back it.
struct ModuleCandidate {
  Module module;
  std::vector<FileMapping> mappings;  // sorted by start
  std::optional<MappedElfInfo> in_memory;
  std::unique_ptr<ElfFile> file;  // opened; kept only once verified
  std::string file_path;
  ModuleFileOrigin file_origin = ModuleFileOrigin::recorded_path;
  std::string open_error;
  bool open_attempted = false;
  bool file_verified = false;
  bool is_module = false;  // an ELF object, not a data file someone mmapped
  bool from_link_map = false;
};

class ModuleDiscovery {
 public:
  ModuleDiscovery(const ModuleLayoutInputs& in, std::vector<std::string>* warnings) : in_(in), warnings_(warnings) {}

  ModuleLayout run() {
    group_file_mappings();
    const auto entry = auxv_lookup(in_.auxv, AT_ENTRY);
    for (ModuleCandidate& c : candidates_) {
      c.module.is_main_executable = entry && *entry >= c.module.start && *entry < c.module.end;
      c.in_memory = inspect_header(c);
      c.is_module = c.in_memory.has_value() || c.module.is_main_executable || looks_like_unsaved_elf(c);
    }
    for (ModuleCandidate& c : candidates_)
      if (c.is_module) verify_and_attach_file(c);

    // The link_map walk may read strings from read-only data a core omitted, so it runs after the files
    // above have filled those bytes in.
    LinkMapResult link = read_link_map(in_.read, in_.auxv, warnings_);
    for (std::size_t i = 0; i < link.entries.size(); ++i) merge_link_map_entry(link.entries[i], static_cast<std::uint32_t>(i));
    add_vdso(std::nullopt);
    ModuleLayout layout;
    layout.link_map = std::move(link.entries);
    finish_modules(layout);
    return layout;
  }

 private:
  void group_file_mappings() {
    std::map<std::string, std::size_t> index_by_path;
    for (const FileMapping& m : in_.mappings) {
      auto [it, inserted] = index_by_path.emplace(m.path, candidates_.size());
      if (inserted) {
        candidates_.emplace_back();
        candidates_.back().module.path = m.path;
        candidates_.back().module.start = m.start;
      }
      ModuleCandidate& c = candidates_[it->second];
      c.mappings.push_back(m);
      c.module.start = std::min(c.module.start, m.start);
      c.module.end = std::max(c.module.end, m.end);
    }
  }

  std::optional<MappedElfInfo> inspect_header(const ModuleCandidate& c) const {
    for (const FileMapping& m : c.mappings)
      if (m.file_offset == 0) return inspect_mapped_elf(in_.read, m.start);
    return std::nullopt;
  }

  // When memory holds no header for a mapping that starts at file offset 0 (a core omitted it), only
  // the file can say whether it is an ELF object or a data file (a locale archive, a font).
  bool looks_like_unsaved_elf(ModuleCandidate& c) {
    const auto header = std::find_if(c.mappings.begin(), c.mappings.end(),
                                     [](const FileMapping& m) { return m.file_offset == 0; });
    if (header == c.mappings.end()) return false;
    char magic[SELFMAG];
    if (in_.read(header->start, magic, sizeof magic) == sizeof magic) return false;  // readable, and not ELF
    open_file(c);
    return c.file != nullptr;
  }

  // The path to open for a module's recorded path, and what it came from.
  std::pair<std::string, ModuleFileOrigin> mapped_path(const std::string& path) const {
    for (const auto& [from, to] : in_.path_map)
      if (!from.empty() && path.compare(0, from.size(), from) == 0)
        return {to + path.substr(from.size()), ModuleFileOrigin::sysroot};
    if (!in_.sysroot.empty() && !path.empty() && path.front() == '/')
      return {in_.sysroot + path, ModuleFileOrigin::sysroot};
    return {path, ModuleFileOrigin::recorded_path};
  }

  void open_file(ModuleCandidate& c) {
    if (c.open_attempted) return;
    c.open_attempted = true;
    if (c.module.is_main_executable && !in_.executable.empty()) {
      c.file_path = in_.executable;
      // A debugger hands over the program it loaded, usually the very file the process recorded.
      std::error_code ec;
      const bool same = std::filesystem::equivalent(in_.executable, c.module.path, ec) && !ec;
      c.file_origin = same ? ModuleFileOrigin::recorded_path : ModuleFileOrigin::exe_option;
    } else {
      std::tie(c.file_path, c.file_origin) = mapped_path(c.module.path);
    }
    c.file = ElfFile::open(c.file_path, &c.open_error);
  }

  // The file the process ran, fetched by its build-id, when the one at hand is missing or another build.
  bool fetch_by_build_id(ModuleCandidate& c, const std::string& build_id) {
    if (!in_.fetch_by_build_id || build_id.empty()) return false;
    std::string warning;
    const std::string path = in_.fetch_by_build_id(build_id, c.module.path, &warning);
    if (!warning.empty()) warn(warning);
    if (path.empty()) return false;
    std::string error;
    auto file = ElfFile::open(path, &error);
    if (!file || file->build_id() != build_id) {
      warn(fmt::format("the file fetched for {} by build-id {} ({}) is unusable: {}", c.module.path, build_id, path,
                       file ? "it has another build-id" : error));
      return false;
    }
    c.file = std::move(file);
    c.file_path = path;
    c.file_origin = ModuleFileOrigin::debuginfod;
    return true;
  }

  static std::string file_label(const ModuleCandidate& c) {
    return c.file_path == c.module.path ? c.module.path : fmt::format("{} (file {})", c.module.path, c.file_path);
  }

  // The build-id in process memory decides whether a file on disk is the one the process ran; a file
  // that does not match is never used, neither for bytes nor for symbols. A missing or mismatched file
  // is replaced by the right one fetched by build-id, when that is possible.
  void verify_and_attach_file(ModuleCandidate& c) {
    open_file(c);
    const std::optional<std::string> memory_id = c.in_memory ? c.in_memory->build_id : std::nullopt;
    c.module.build_id = memory_id.value_or("");
    const bool memory_knows_id = c.in_memory && c.in_memory->notes_readable;
    if (c.file && memory_knows_id && memory_id != c.file->build_id()) {
      warn(fmt::format("build-id mismatch for {}: {} has {}, file has {} — its symbols and bytes are not used",
                       file_label(c), in_.source_noun, memory_id.value_or("none"), c.file->build_id().value_or("none")));
      c.file.reset();
      c.open_error.clear();
    }
    if (!c.file && memory_knows_id && fetch_by_build_id(c, c.module.build_id)) c.open_error.clear();
    if (!c.file) {
      if (c.open_error.empty()) return;  // the mismatch said it
      const std::string consequence =
          in_.use_verified_file
              ? fmt::format("bytes the {} omits for it are unavailable and its symbols are not loaded", in_.source_noun)
              : std::string("its symbols are not loaded");
      warn(fmt::format("module {} cannot be used: {} — {}", c.module.path, c.open_error, consequence));
      return;
    }
    const std::optional<std::string> file_id = c.file->build_id();
    if (!memory_knows_id)
      warn(fmt::format("the {} does not hold the build-id of {}, so the file cannot be checked; it is used as is",
                       in_.source_noun, file_label(c)));
    else if (!memory_id)
      warn(fmt::format("{} has no build-id, so its file cannot be checked; it is used as is", file_label(c)));
    if (c.module.build_id.empty()) c.module.build_id = file_id.value_or("");
    c.module.file_on_disk = c.file_path;
    c.module.file_origin = c.file_origin;
    c.file_verified = true;
    if (in_.use_verified_file)
      for (const FileMapping& m : c.mappings) in_.use_verified_file(m, *c.file);
  }

  void merge_link_map_entry(const LinkMapEntry& entry, std::uint32_t position) {
    const bool first = position == 0;
    if (vdso_contains(entry.l_ld)) {
      add_vdso(entry.l_addr);
      return;
    }
    ModuleCandidate* c = candidate_containing(entry.l_ld);
    if (!c && !entry.name.empty()) c = add_link_map_only_module(entry);
    if (!c) {
      warn(fmt::format("the dynamic linker's entry at {:#x} ({}) matches no mapping in the {} and is ignored",
                       entry.node, entry.name.empty() ? "no name" : entry.name, in_.source_noun));
      return;
    }
    if (c->from_link_map) return;  // a second entry for the same object: the first one wins
    c->from_link_map = true;
    c->module.load_bias = entry.l_addr;
    c->module.lookup_order = position;
    if (first && entry.name.empty() && !main_executable_known()) c->module.is_main_executable = true;
    if (!c->is_module) {  // neither memory nor a readable file showed an ELF header, yet it is loaded
      c->is_module = true;
      verify_and_attach_file(*c);
    }
  }

  ModuleCandidate* candidate_containing(Address addr) {
    for (ModuleCandidate& c : candidates_)
      if (addr >= c.module.start && addr < c.module.end) return &c;
    return nullptr;
  }

  bool main_executable_known() const {
    return std::any_of(candidates_.begin(), candidates_.end(),
                       [](const ModuleCandidate& c) { return c.module.is_main_executable && c.is_module; });
  }

  // An object the dynamic linker lists but the mappings do not (a core written without NT_FILE): its
  // mappings are derived from its file's program headers and the link_map load bias.
  ModuleCandidate* add_link_map_only_module(const LinkMapEntry& entry) {
    ModuleCandidate c;
    c.module.path = entry.name;
    c.module.load_bias = entry.l_addr;
    open_file(c);
    if (!c.file) {
      warn(fmt::format("module {} (listed by the dynamic linker) cannot be used: {}", entry.name, c.open_error));
      return nullptr;
    }
    for (const GElf_Phdr& ph : c.file->program_headers()) {
      if (ph.p_type != PT_LOAD || ph.p_filesz == 0) continue;
      FileMapping m;
      m.start = page_down(entry.l_addr + ph.p_vaddr);
      m.end = entry.l_addr + ph.p_vaddr + ph.p_filesz;
      m.file_offset = page_down(ph.p_offset);
      m.path = entry.name;
      c.mappings.push_back(std::move(m));
    }
    if (c.mappings.empty()) {
      warn(fmt::format("module {} (listed by the dynamic linker) has no loadable segments and is ignored", entry.name));
      return nullptr;
    }
    c.module.start = c.mappings.front().start;
    c.module.end = c.mappings.back().end;
    if (const auto first_vaddr = c.file->first_load_vaddr())
      c.in_memory = inspect_mapped_elf(in_.read, entry.l_addr + *first_vaddr);
    c.is_module = true;
    candidates_.push_back(std::move(c));
    verify_and_attach_file(candidates_.back());
    return &candidates_.back();
  }

  // ---- vdso ----------------------------------------------------------------------------------------

  bool vdso_contains(Address addr) const {
    return in_.vdso_extent && addr >= in_.vdso_extent->first && addr < in_.vdso_extent->second;
  }

  // The vdso is mapped from no file, so it is known from AT_SYSINFO_EHDR and (for its bias) link_map.
  void add_vdso(std::optional<Address> load_bias) {
    if (vdso_added_ || !in_.vdso_extent) return;
    const auto base = auxv_lookup(in_.auxv, AT_SYSINFO_EHDR);
    const auto info = base ? inspect_mapped_elf(in_.read, *base) : std::nullopt;
    if (!info && !load_bias) return;
    vdso_added_ = true;
    ModuleCandidate c;
    c.module.path = "[vdso]";
    c.module.start = in_.vdso_extent->first;
    c.module.end = in_.vdso_extent->second;
    c.module.load_bias = load_bias ? *load_bias : info->load_bias;
    if (info && info->build_id) c.module.build_id = *info->build_id;
    c.is_module = true;
    c.from_link_map = load_bias.has_value();
    candidates_.push_back(std::move(c));
  }

  // ---- final module list ---------------------------------------------------------------------------

  void finish_modules(ModuleLayout& layout) {
    bool main_found = false;
    for (ModuleCandidate& c : candidates_) {
      if (!c.is_module) continue;
      if (!c.from_link_map) c.module.load_bias = fallback_load_bias(c);
      main_found = main_found || c.module.is_main_executable;
      layout.modules.push_back(std::move(c.module));
      if (c.file_verified) layout.verified_files.push_back(std::move(c.file));
    }
    if (!main_found && !in_.executable.empty())
      warn(fmt::format("{} (--exe) was not used: the {} does not show which mapping is the main executable",
                       in_.executable, in_.source_noun));
    std::sort(layout.modules.begin(), layout.modules.end(),
              [](const Module& a, const Module& b) { return a.start < b.start; });
  }

  // Without link_map: the lowest mapping maps some file offset; the file's first PT_LOAD says which
  // link-time address that offset has.
  static std::uint64_t fallback_load_bias(const ModuleCandidate& c) {
    if (c.in_memory) return c.in_memory->load_bias;
    if (!c.file_verified || c.mappings.empty()) return 0;
    const auto first_vaddr = c.file->first_load_vaddr();
    if (!first_vaddr) return 0;
    const FileMapping& lowest = c.mappings.front();
    return lowest.start - lowest.file_offset - page_down(*first_vaddr);
  }

  void warn(std::string message) {
    if (warnings_) warnings_->push_back(std::move(message));
  }

  const ModuleLayoutInputs& in_;
  std::vector<std::string>* warnings_;
  std::deque<ModuleCandidate> candidates_;  // a deque: pointers to candidates stay valid as it grows
  bool vdso_added_ = false;
};

}  // namespace

ModuleLayout discover_modules(const ModuleLayoutInputs& inputs, std::vector<std::string>* warnings) {
  return ModuleDiscovery(inputs, warnings).run();
}

}  // namespace heapscope
