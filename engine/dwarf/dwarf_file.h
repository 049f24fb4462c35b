// DwarfFile: the DWARF of one module (its separate debug file when there is one), read with libdw's DIE
// API. A walk over every DIE, and the few questions the runtime-structure analyses ask of a DIE: its name,
// its scope-qualified name, its type, size, members and where it was declared.
//
// Why libdw and not libdwarf: both libraries export the same symbol names (dwarf_child, dwarf_tag,
// dwarf_diename, ...) with different signatures, and the unwinder (frames/unwind.cpp) already uses libdw,
// so one process cannot use libdwarf's DIE functions safely beside it.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dwarf/debug_image.h"

namespace heapscope {

struct DwarfMember {
  std::string name;
  std::uint64_t offset = 0;  // DW_AT_data_member_location
  std::uint64_t size = 0;    // of its type; 0 when unknown
  std::string type;          // the type's qualified name ("Task<int>::promise_type"), may be empty
};

struct SourceLocation {
  std::string file;  // as DWARF names it (often absolute)
  std::uint64_t line = 0;
  bool known() const { return line != 0; }
  std::string describe() const;  // "pipeline.cpp:42" (file's base name), empty when unknown
};

class DwarfFile {
 public:
  // Null (with a reason in *error) when the file cannot be opened or has no DWARF.
  static std::unique_ptr<DwarfFile> open(const std::string& path, std::string* error);
  ~DwarfFile();
  DwarfFile(const DwarfFile&) = delete;
  DwarfFile& operator=(const DwarfFile&) = delete;

  // Calls `visit(die, parent)` for every DIE of every compilation unit, parents before children;
  // `parent` is null for a unit's root. Return false from `visit` to skip the DIE's children.
  using Visitor = std::function<bool(Dwarf_Die& die, Dwarf_Die* parent)>;
  void for_each_die(const Visitor& visit) const;

  // Finds the DIE at a .debug_info offset.
  std::optional<Dwarf_Die> die_at(Dwarf_Off offset) const;
  // libdw's handle, for what the DIE questions below do not cover (the unwinder's address lookups).
  Dwarf* dwarf() const { return dwarf_; }

 private:
  DwarfFile(int fd, Dwarf* dwarf, Elf* image_elf, DebugImage image)
      : fd_(fd), dwarf_(dwarf), image_elf_(image_elf), image_(std::move(image)) {}
  int fd_;         // -1 when libdw reads an inflated image
  Dwarf* dwarf_;
  Elf* image_elf_;  // over image_ (dwarf/debug_image.h), or null: libdw reads the file at fd_
  DebugImage image_;
};

// Small questions about one DIE.
std::string die_name(Dwarf_Die& die);          // DW_AT_name, empty when none
std::string die_linkage_name(Dwarf_Die& die);  // DW_AT_linkage_name (or the MIPS spelling), empty when none
std::optional<Dwarf_Die> die_type(Dwarf_Die& die);  // DW_AT_type's DIE, following typedefs and cv-qualifiers
std::optional<Dwarf_Die> die_reference(Dwarf_Die& die, int attribute);  // a reference attribute's DIE
bool die_flag(Dwarf_Die& die, int attribute);  // a flag, the DIE's own or its origin's (dwarf_attr_integrate)
std::optional<Dwarf_Word> die_udata(Dwarf_Die& die, int attribute);  // the DIE's own unsigned constant
// "Task<int>::promise_type": the name inside its enclosing namespaces and classes.
std::string qualified_name(Dwarf_Die& die);
std::uint64_t type_size(Dwarf_Die& type);
std::vector<DwarfMember> data_members(Dwarf_Die& structure);
SourceLocation declaration_of(Dwarf_Die& die);  // DW_AT_decl_file / DW_AT_decl_line

}  // namespace heapscope
