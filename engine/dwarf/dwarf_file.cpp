#include "dwarf/dwarf_file.h"

#include <dwarf.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dwarf/debug_file_cache.h"

namespace heapscope {

std::string SourceLocation::describe() const {
  if (!known()) return {};
  const std::size_t slash = file.rfind('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(line);
}

std::unique_ptr<DwarfFile> DwarfFile::open(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = path + ": " + std::strerror(errno);
    return nullptr;
  }
  // A compressed file's uncompressed copy, kept in the cache (dwarf/debug_file_cache.h), is read as any
  // uncompressed file is: libdw maps it.
  const DebugFileCache& cache = DebugFileCache::process();
  auto from_copy = [fd](int copy) -> std::unique_ptr<DwarfFile> {
    if (copy < 0) return nullptr;
    if (Dwarf* dwarf = dwarf_begin(copy, DWARF_C_READ)) {
      ::close(fd);
      return std::unique_ptr<DwarfFile>(new DwarfFile(copy, dwarf, nullptr, {}));
    }
    ::close(copy);
    return nullptr;
  };
  if (auto file = from_copy(cache.open_copy(fd))) return file;
  if (std::optional<DebugImage> image = inflated_debug_image(fd)) {
    if (auto file = from_copy(cache.save_copy(fd, *image))) return file;  // the image goes now
    if (Elf* elf = elf_memory(reinterpret_cast<char*>(image->bytes.get()), image->size)) {
      if (Dwarf* dwarf = dwarf_begin_elf(elf, DWARF_C_READ, nullptr)) {
        ::close(fd);  // the image holds all libdw reads
        return std::unique_ptr<DwarfFile>(new DwarfFile(-1, dwarf, elf, std::move(*image)));
      }
      elf_end(elf);  // libdw then opens the file itself, and says what it finds wrong
    }
  }
  Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
  if (!dwarf) {
    if (error) *error = path + ": no DWARF (" + dwarf_errmsg(-1) + ")";
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<DwarfFile>(new DwarfFile(fd, dwarf, nullptr, {}));
}

DwarfFile::~DwarfFile() {
  dwarf_end(dwarf_);
  if (image_elf_) elf_end(image_elf_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Depth-first, iteratively over siblings, so a long run of siblings costs no stack.
void walk_children(Dwarf_Die& parent, const DwarfFile::Visitor& visit, int depth) {
  constexpr int kMaxDepth = 64;  // corrupt DWARF must not recurse without end
  Dwarf_Die child;
  if (depth > kMaxDepth || dwarf_child(&parent, &child) != 0) return;
  do {
    if (visit(child, &parent) && dwarf_haschildren(&child)) walk_children(child, visit, depth + 1);
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

void DwarfFile::for_each_die(const Visitor& visit) const {
  Dwarf_Off offset = 0, next = 0;
  std::size_t header_size = 0;
  while (dwarf_nextcu(dwarf_, offset, &next, &header_size, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die unit;
    if (dwarf_offdie(dwarf_, offset + header_size, &unit) && visit(unit, nullptr)) walk_children(unit, visit, 0);
    offset = next;
  }
}

std::optional<Dwarf_Die> DwarfFile::die_at(Dwarf_Off offset) const {
  Dwarf_Die die;
  if (!dwarf_offdie(dwarf_, offset, &die)) return std::nullopt;
  return die;
}

std::string die_name(Dwarf_Die& die) {
  const char* name = dwarf_diename(&die);
  return name ? name : "";
}

std::string die_linkage_name(Dwarf_Die& die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name})
    if (dwarf_attr_integrate(&die, at, &attr))
      if (const char* s = dwarf_formstring(&attr)) return s;
  return {};
}

std::optional<Dwarf_Die> die_reference(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  Dwarf_Die target;
  if (!dwarf_attr_integrate(&die, attribute, &attr) || !dwarf_formref_die(&attr, &target)) return std::nullopt;
  return target;
}

bool die_flag(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  bool flag = false;
  return dwarf_attr_integrate(&die, attribute, &attr) && dwarf_formflag(&attr, &flag) == 0 && flag;
}

std::optional<Dwarf_Word> die_udata(Dwarf_Die& die, int attribute) {
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (!dwarf_attr(&die, attribute, &attr) || dwarf_formudata(&attr, &value) != 0) return std::nullopt;
  return value;
}

std::optional<Dwarf_Die> die_type(Dwarf_Die& die) {
  std::optional<Dwarf_Die> type = die_reference(die, DW_AT_type);
  for (int hops = 0; type && hops < 16; ++hops) {
    const int tag = dwarf_tag(&*type);
    if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type) break;
    std::optional<Dwarf_Die> next = die_reference(*type, DW_AT_type);
    if (!next) break;
    type = next;
  }
  return type;
}

std::string qualified_name(Dwarf_Die& die) {
  std::string name = die_name(die);
  Dwarf_Die* scopes = nullptr;
  const int count = dwarf_getscopes_die(&die, &scopes);
  // scopes[0] is the DIE itself, then its enclosing scopes out to the unit.
  for (int i = 1; i < count; ++i) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_namespace && tag != DW_TAG_class_type && tag != DW_TAG_structure_type &&
        tag != DW_TAG_union_type && tag != DW_TAG_subprogram)
      continue;
    std::string scope = die_name(scopes[i]);
    if (scope.empty() && tag == DW_TAG_namespace) scope = "(anonymous namespace)";
    if (!scope.empty()) name = scope + "::" + name;
  }
  std::free(scopes);
  return name;
}

std::uint64_t type_size(Dwarf_Die& type) {
  Dwarf_Word size = 0;
  return dwarf_aggregate_size(&type, &size) == 0 ? size : 0;
}

std::vector<DwarfMember> data_members(Dwarf_Die& structure) {
  std::vector<DwarfMember> out;
  Dwarf_Die child;
  if (dwarf_child(&structure, &child) != 0) return out;
  do {
    if (dwarf_tag(&child) != DW_TAG_member) continue;
    Dwarf_Attribute attr;
    Dwarf_Word offset = 0;
    if (!dwarf_attr_integrate(&child, DW_AT_data_member_location, &attr) || dwarf_formudata(&attr, &offset) != 0)
      continue;  // static members, and locations given as expressions (virtual bases)
    DwarfMember m;
    m.name = die_name(child);
    m.offset = offset;
    if (std::optional<Dwarf_Die> type = die_type(child)) {
      m.size = type_size(*type);
      m.type = qualified_name(*type);
    }
    out.push_back(std::move(m));
  } while (dwarf_siblingof(&child, &child) == 0);
  return out;
}

SourceLocation declaration_of(Dwarf_Die& die) {
  SourceLocation loc;
  int line = 0;
  if (dwarf_decl_line(&die, &line) == 0 && line > 0) loc.line = static_cast<std::uint64_t>(line);
  if (const char* file = dwarf_decl_file(&die)) {
    loc.file = file;
    return loc;
  }
  // DWARF 5 numbers the unit's primary source file 0, which libdw 0.188 does not resolve: take the unit's name.
  Dwarf_Attribute attr;
  Dwarf_Word index = 1;
  Dwarf_Die unit;
  if (dwarf_attr_integrate(&die, DW_AT_decl_file, &attr) && dwarf_formudata(&attr, &index) == 0 && index == 0 &&
      dwarf_diecu(&die, &unit, nullptr, nullptr))
    loc.file = die_name(unit);
  return loc;
}

}  // namespace heapscope
