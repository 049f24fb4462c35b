// DwarfTypeIndex: the types and variables of one module's DWARF, read once into compact arrays: every
// struct/class/union layout (members and base classes at their offsets), pointers, arrays, base types and
// enums (typedefs and cv-qualifiers resolved away), each with its name as the language spells it and where
// it was declared; and every variable with a static address (globals, statics, function-local statics) or a
// TLS offset. Heap typing (types/dwarf_typing) follows these layouts from typed roots to blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dwarf/dwarf_file.h"

namespace heapscope {

using DwarfTypeId = std::uint32_t;
inline constexpr DwarfTypeId kNoDwarfType = 0xffffffffu;

struct DwarfType {
  enum class Kind : std::uint8_t { base, structure, pointer, array, enumeration, function, other };
  Kind kind = Kind::other;
  bool declaration = false;   // a structure declared but not defined in this unit (no members)
  bool has_pointers = false;  // holds a pointer somewhere (members, elements): worth scanning
  bool flexible = false;      // a structure ending in an array of unknown length (C's `T items[]`)
  std::uint8_t encoding = 0;  // base types and enumerations: DW_ATE_signed, DW_ATE_float, ... (0 unknown)
  std::string name;           // "Client", "app::Registry", "char*", "int[4]", "void*"
  std::uint64_t size = 0;
  DwarfTypeId target = kNoDwarfType;  // array: element (a pointer's pointee: DwarfTypeIndex::pointee)
  std::uint64_t target_die = 0;       // pointer: its pointee's DIE offset, 0 for void*
  std::uint64_t count = 0;            // array: elements (0 when unknown)
  std::uint32_t member_list = 0, member_count = 0;  // structure: its members' list in the index
  std::uint64_t die = 0;  // structure, base type, enumeration: its DIE, where it was declared (declared())
  // The DIE it was resolved from (an anonymous structure's: the typedef that names it): type_of_die of it
  // gives this type again, in another process too, where ids are given in another order.
  std::uint64_t origin = 0;
};

struct DwarfTypeMember {
  std::string name;  // empty for a base class
  std::uint64_t offset = 0;
  DwarfTypeId type = kNoDwarfType;
  bool base_class = false;
  // A bit field: its width and its first bit counted from the least significant bit of the byte at
  // `offset` (little-endian); 0 for an ordinary member.
  std::uint16_t bit_size = 0, bit_offset = 0;
};

struct DwarfVariable {
  std::string name;  // qualified: "app::g_registry", "main::cache" for a function-local static
  bool tls = false;
  std::uint64_t address = 0;  // link-time address, or the offset in the module's TLS block when tls
  DwarfTypeId type = kNoDwarfType;
};

class DwarfTypeIndex {
 public:
  static std::unique_ptr<DwarfTypeIndex> build(const DwarfFile& dwarf);

  const DwarfType& type(DwarfTypeId id) const { return types_[id]; }
  std::size_t type_count() const { return types_.size(); }
  // Stays valid while the index grows (see types_).
  std::span<const DwarfTypeMember> members(DwarfTypeId id) const {
    if (types_[id].member_count == 0) return {};
    return member_lists_[types_[id].member_list];
  }
  const std::vector<DwarfVariable>& variables() const { return variables_; }
  // The type of the DIE at `offset` (a variable's or member's DW_AT_type target), resolved on demand.
  DwarfTypeId type_of_die(std::uint64_t die_offset) const;
  std::uint64_t origin_die(DwarfTypeId id) const { return types_[id].origin; }
  // A pointer's pointee (kNoDwarfType for void*), resolved on first use: resolving every pointer's
  // target eagerly would recurse through the whole type graph of a large program.
  DwarfTypeId pointee(DwarfTypeId pointer) const;
  // A structure's definition: itself, or the definition of the same name when it is only declared here.
  DwarfTypeId definition(DwarfTypeId id) const;
  // Where a structure, base type or enumeration was declared; unknown for other types. Read when asked:
  // libdw 0.188 reads a unit's whole line table for its file names (dwarf_getsrcfiles), and the types
  // resolved with libc's variables span hundreds of units, of which a heap names few (4.5 MiB, 1M blocks).
  SourceLocation declared(DwarfTypeId id) const;
  // A defined structure by its full name ("std::_Rb_tree_node<int>"), or kNoDwarfType.
  DwarfTypeId find_structure(const std::string& name) const;
  // The defined structures and classes (not unions) whose size is in [min, max], one per name, resolved
  // on demand: the candidates of layout inference for a block of that size.
  std::vector<DwarfTypeId> structures_sized(std::uint64_t min, std::uint64_t max) const;

 private:
  friend class TypeIndexBuilder;
  const DwarfFile* dwarf_ = nullptr;
  // Types are resolved on demand, so the index grows while callers hold a type or walk a member list and
  // ask for more (a member's pointee, a declaration's definition): deques, whose elements never move.
  mutable std::deque<DwarfType> types_;
  mutable std::deque<std::vector<DwarfTypeMember>> member_lists_;
  mutable std::unordered_map<std::uint64_t, DwarfTypeId> by_die_;
  std::unordered_map<std::uint64_t, std::string> qualified_names_;  // DIE offset → scope-qualified name
  std::unordered_map<std::string, std::uint64_t> definitions_;      // structure name → defining DIE offset
  std::vector<std::pair<std::uint64_t, std::uint64_t>> structure_sizes_;  // (size, defining DIE offset), sorted
  std::vector<DwarfVariable> variables_;
  DwarfTypeId resolve(Dwarf_Die die) const;
  std::string type_name(Dwarf_Die die, int depth = 0) const;  // without resolving layouts
  DwarfTypeId add_structure(Dwarf_Die& die, const std::string& name) const;
};

}  // namespace heapscope
