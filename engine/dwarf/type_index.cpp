#include "dwarf/type_index.h"

#include <algorithm>

#include <dwarf.h>

#include "base/progress.h"
#include "dwarf/die_facts.h"
#include "dwarf/die_scanner.h"

namespace heapscope {

namespace {

// A base type's DW_AT_encoding; an enumeration's, or its underlying type's (signed when DWARF says neither).
std::uint8_t encoding_of(Dwarf_Die& die) {
  if (std::optional<Dwarf_Word> encoding = die_udata(die, DW_AT_encoding)) return static_cast<std::uint8_t>(*encoding);
  if (dwarf_tag(&die) != DW_TAG_enumeration_type) return 0;
  std::optional<Dwarf_Die> under = die_reference(die, DW_AT_type);
  for (int typedefs = 0; under && typedefs < 8; ++typedefs, under = die_reference(*under, DW_AT_type))
    if (std::optional<Dwarf_Word> encoding = die_udata(*under, DW_AT_encoding)) return static_cast<std::uint8_t>(*encoding);
  return DW_ATE_signed;
}

std::uint64_t array_count(Dwarf_Die& array) {
  std::uint64_t count = 1;
  bool any = false;
  Dwarf_Die child;
  if (dwarf_child(&array, &child) != 0) return 0;
  do {
    if (dwarf_tag(&child) != DW_TAG_subrange_type) continue;
    if (const std::optional<Dwarf_Word> n = die_udata(child, DW_AT_count)) {
      count *= *n;
    } else if (const std::optional<Dwarf_Word> upper = die_udata(child, DW_AT_upper_bound)) {
      count *= *upper + 1;
    } else {
      return 0;  // flexible or variable-length
    }
    any = true;
  } while (dwarf_siblingof(&child, &child) == 0);
  return any ? count : 0;
}

}  // namespace

// One pass over every DIE: scope-qualified names of types, variables and functions, structure
// definitions by name, and the variables with static storage. The DIEs come from the scanner
// (dwarf/die_scanner.h), each unit's in order, a scope's children right after it.
class TypeIndexBuilder {
 public:
  TypeIndexBuilder(DwarfTypeIndex& index, Dwarf* dwarf) : index_(index), dwarf_(dwarf) {}

  // The DIEs visit() reads, and the units' roots: of the others it needs nothing but to pass them.
  static bool reads(int tag) {
    switch (tag) {
      case DW_TAG_compile_unit: case DW_TAG_partial_unit: case DW_TAG_type_unit: case DW_TAG_skeleton_unit:
      case DW_TAG_namespace: case DW_TAG_structure_type: case DW_TAG_class_type: case DW_TAG_union_type:
      case DW_TAG_enumeration_type: case DW_TAG_typedef: case DW_TAG_base_type: case DW_TAG_subprogram:
      case DW_TAG_lexical_block: case DW_TAG_variable:
        return true;
      default:
        return false;
    }
  }

  // Each unit's root: its types and variables, in the unit's scopes.
  void walk_unit(DieScanner& unit) {
    ScannedDie root;
    if (!unit.next(root)) return;
    const int language = facts(root, unit).language();
    c_unit_ = language == DW_LANG_C89 || language == DW_LANG_C || language == DW_LANG_C99 || language == DW_LANG_C11;
    descend(unit, root, "", 0);
  }

 private:
  DwarfTypeIndex& index_;
  Dwarf* dwarf_;
  std::vector<std::pair<DwarfVariable, std::uint64_t>> pending_;  // variables and their type DIE offsets
  // A C unit's structures, unions and enumerations hold members, enumerators and unnamed types alone
  // (C has no nested scopes: GCC and Clang put every named type at the unit's level), none of which the
  // index keeps: they are not walked. A C library's every unit repeats its common structures, and their
  // members were a sixth of libc6-dbg's index time.
  bool c_unit_ = false;

  DieFacts facts(const ScannedDie& die, DieScanner& unit) const { return DieFacts(die, unit, dwarf_); }

  // The children of `die` (the DIE the scanner gave last), in the scope `prefix`; skipped past too deep.
  void descend(DieScanner& unit, const ScannedDie& die, const std::string& prefix, int depth) {
    constexpr int kMaxDepth = 48;
    if (!die.has_children) return;
    if (depth > kMaxDepth) return unit.skip_children(die);
    ScannedDie child;
    while (unit.next(child)) visit(unit, child, prefix, depth);
  }

  // A DIE's scope-qualified name, and whether that is only its own name: what every lookup falls back to
  // (die_name), so it is not kept (most of a C library's names, a third of the time of its index).
  struct Qualified {
    std::string name;
    bool own = true;
  };
  Qualified qualified(const DieFacts& die, const std::string& prefix) const {
    if (const std::uint64_t spec = die.specification()) {
      auto it = index_.qualified_names_.find(spec);
      if (it != index_.qualified_names_.end()) return {it->second, false};
    }
    std::string name = die.name();  // a definition's DW_AT_specification gives it the declaration's
    if (name.empty() || prefix.empty()) return {std::move(name), true};
    return {prefix + name, false};
  }

  void remember(std::uint64_t offset, const Qualified& q) {
    if (!q.own && !q.name.empty()) index_.qualified_names_[offset] = q.name;
  }

  void visit(DieScanner& unit, const ScannedDie& die, const std::string& prefix, int depth) {
    const DieFacts f = facts(die, unit);
    switch (die.tag) {
      case DW_TAG_namespace: {
        const std::string name = f.name();
        return descend(unit, die, prefix + (name.empty() ? "(anonymous namespace)" : name) + "::", depth + 1);
      }
      case DW_TAG_structure_type:
      case DW_TAG_class_type:
      case DW_TAG_union_type:
      case DW_TAG_enumeration_type: {
        const Qualified q = qualified(f, prefix);
        const std::string& name = q.name;
        if (name.empty() || c_unit_) unit.skip_children(die);
        if (name.empty()) return;
        remember(die.offset, q);
        if (die.tag != DW_TAG_enumeration_type && !f.declaration() &&
            index_.definitions_.try_emplace(name, die.offset).second && die.tag != DW_TAG_union_type)
          if (const std::optional<std::uint64_t> size = f.byte_size(); size && *size > 0)
            index_.structure_sizes_.push_back({*size, die.offset});
        if (!c_unit_) descend(unit, die, name + "::", depth + 1);
        return;
      }
      case DW_TAG_typedef:
      case DW_TAG_base_type:
        remember(die.offset, qualified(f, prefix));
        return unit.skip_children(die);
      case DW_TAG_subprogram: {
        const Qualified q = qualified(f, prefix);
        remember(die.offset, q);
        return descend(unit, die, q.name.empty() ? prefix : q.name + "::", depth + 1);
      }
      case DW_TAG_lexical_block:
        return descend(unit, die, prefix, depth + 1);
      case DW_TAG_variable:
        add_variable(die.offset, f, prefix);
        return unit.skip_children(die);
      default:
        return unit.skip_children(die);
    }
  }

  // A variable with a static address is indexed; a declaration's qualified name is kept for the definition
  // that names it (DW_AT_specification). A function's locals are neither, and are most of a C library's
  // variables: no name is made for them (a third of libc's index time and most of its memory).
  void add_variable(std::uint64_t offset, const DieFacts& die, const std::string& prefix) {
    const std::optional<StaticLocation> where = die.location();
    if (!where && !die.declaration()) return;
    const Qualified q = qualified(die, prefix);
    const std::string& name = q.name;
    remember(offset, q);
    const std::uint64_t type = die.type();
    if (!where || !type || name.empty()) return;
    DwarfVariable v;
    v.name = name;
    v.tls = where->tls;
    v.address = where->address;
    pending_.push_back({std::move(v), type});
  }

 public:
  void resolve_variables() {
    for (auto& [variable, type_die] : pending_) {
      variable.type = index_.type_of_die(type_die);
      if (variable.type != kNoDwarfType) index_.variables_.push_back(std::move(variable));
    }
  }
};

std::unique_ptr<DwarfTypeIndex> DwarfTypeIndex::build(const DwarfFile& dwarf) {
  auto index = std::make_unique<DwarfTypeIndex>();
  index->dwarf_ = &dwarf;
  TypeIndexBuilder builder(*index, dwarf.dwarf());
  // A unit whose bytes do not decode is left where the scanner stopped, as libdw's walk would stop.
  if (const std::optional<DieSections> sections = DieSections::of(dwarf.dwarf()))
    DieScanner::for_each_unit(dwarf.dwarf(), *sections, TypeIndexBuilder::reads, [&](DieScanner& unit) {
      progress_check();  // a big program's DWARF takes seconds: Ctrl-C between its units (base/progress.h)
      builder.walk_unit(unit);
    });
  builder.resolve_variables();
  std::sort(index->structure_sizes_.begin(), index->structure_sizes_.end());
  return index;
}

std::vector<DwarfTypeId> DwarfTypeIndex::structures_sized(std::uint64_t min, std::uint64_t max) const {
  std::vector<DwarfTypeId> out;
  auto it = std::lower_bound(structure_sizes_.begin(), structure_sizes_.end(), std::pair<std::uint64_t, std::uint64_t>{min, 0});
  for (; it != structure_sizes_.end() && it->first <= max; ++it)
    if (const DwarfTypeId id = type_of_die(it->second); id != kNoDwarfType) out.push_back(id);
  return out;
}

DwarfTypeId DwarfTypeIndex::type_of_die(std::uint64_t die_offset) const {
  const std::optional<Dwarf_Die> die = dwarf_->die_at(die_offset);
  return die ? resolve(*die) : kNoDwarfType;
}

DwarfTypeId DwarfTypeIndex::pointee(DwarfTypeId pointer) const {
  if (pointer == kNoDwarfType || types_[pointer].kind != DwarfType::Kind::pointer) return kNoDwarfType;
  if (types_[pointer].target == kNoDwarfType && types_[pointer].target_die)
    types_[pointer].target = type_of_die(types_[pointer].target_die);
  return types_[pointer].target;
}

// The name resolve() would give the type, found from names alone: typedefs and cv-qualifiers see through
// to a named type (an anonymous one is known by its typedef), pointers and arrays add "*" and "[N]".
std::string DwarfTypeIndex::type_name(Dwarf_Die die, int depth) const {
  constexpr int kMaxDepth = 16;
  const int tag = dwarf_tag(&die);
  std::optional<Dwarf_Die> target = die_reference(die, DW_AT_type);
  auto own_name = [&] {
    auto it = qualified_names_.find(dwarf_dieoffset(&die));
    return it != qualified_names_.end() ? it->second : die_name(die);
  };
  if (depth > kMaxDepth) return own_name();
  switch (tag) {
    case DW_TAG_typedef: {
      if (!target) return own_name();
      const std::string underlying = type_name(*target, depth + 1);
      return underlying.empty() ? own_name() : underlying;
    }
    case DW_TAG_const_type:
    case DW_TAG_volatile_type:
    case DW_TAG_restrict_type:
    case DW_TAG_atomic_type:
      return target ? type_name(*target, depth + 1) : std::string("void");
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
      return (target ? type_name(*target, depth + 1) : std::string("void")) + "*";
    case DW_TAG_array_type: {
      const std::uint64_t count = array_count(die);
      return (target ? type_name(*target, depth + 1) : std::string("void")) +
             (count ? "[" + std::to_string(count) + "]" : "[]");
    }
    case DW_TAG_subroutine_type:
      return "function";
    default:
      return own_name();
  }
}

SourceLocation DwarfTypeIndex::declared(DwarfTypeId id) const {
  if (id == kNoDwarfType || !types_[id].die) return {};
  std::optional<Dwarf_Die> die = dwarf_->die_at(types_[id].die);
  return die ? declaration_of(*die) : SourceLocation{};
}

DwarfTypeId DwarfTypeIndex::definition(DwarfTypeId id) const {
  if (id == kNoDwarfType || !types_[id].declaration) return id;
  const DwarfTypeId found = find_structure(types_[id].name);
  return found == kNoDwarfType ? id : found;
}

DwarfTypeId DwarfTypeIndex::find_structure(const std::string& name) const {
  const auto it = definitions_.find(name);
  return it == definitions_.end() ? kNoDwarfType : type_of_die(it->second);
}

DwarfTypeId DwarfTypeIndex::add_structure(Dwarf_Die& die, const std::string& name) const {
  const DwarfTypeId id = static_cast<DwarfTypeId>(types_.size());
  by_die_[dwarf_dieoffset(&die)] = id;
  DwarfType t;
  t.kind = DwarfType::Kind::structure;
  t.name = name;
  t.declaration = die_flag(die, DW_AT_declaration);
  t.size = type_size(die);
  t.die = dwarf_dieoffset(&die);
  t.origin = t.die;
  types_.push_back(std::move(t));
  std::vector<DwarfTypeMember> members;
  bool has_pointers = false;
  Dwarf_Die child;
  if (dwarf_child(&die, &child) == 0) do {
      const int tag = dwarf_tag(&child);
      if (tag != DW_TAG_member && tag != DW_TAG_inheritance) continue;
      Dwarf_Attribute attr;
      Dwarf_Word offset = 0;
      // A bit field's first bit from the start of the structure, when it is one.
      std::optional<std::uint64_t> first_bit;
      const Dwarf_Word bit_size = die_udata(child, DW_AT_bit_size).value_or(0);
      if (dwarf_attr(&child, DW_AT_data_member_location, &attr)) {
        if (dwarf_formudata(&attr, &offset) != 0) continue;  // an expression: a virtual base
        // DWARF 2-4 bit fields count DW_AT_bit_offset from the most significant bit of the storage unit.
        const std::optional<Dwarf_Word> msb_offset = die_udata(child, DW_AT_bit_offset);
        const Dwarf_Word unit = die_udata(child, DW_AT_byte_size).value_or(0);
        if (bit_size && msb_offset && unit * 8 >= *msb_offset + bit_size)
          first_bit = offset * 8 + unit * 8 - *msb_offset - bit_size;
      } else if (const std::optional<Dwarf_Word> bit = die_udata(child, DW_AT_data_bit_offset); bit && bit_size) {
        first_bit = *bit;  // DWARF 4-5 bit fields
      } else if (dwarf_tag(&die) != DW_TAG_union_type) {
        continue;  // a static member
      }
      std::optional<Dwarf_Die> type = die_reference(child, DW_AT_type);
      DwarfTypeMember m;
      m.name = die_name(child);
      m.offset = offset;
      if (first_bit && bit_size <= 64) {
        m.offset = *first_bit / 8;
        m.bit_offset = static_cast<std::uint16_t>(*first_bit % 8);
        m.bit_size = static_cast<std::uint16_t>(bit_size);
      }
      m.base_class = tag == DW_TAG_inheritance;
      m.type = type ? resolve(*type) : kNoDwarfType;
      if (m.type != kNoDwarfType && types_[m.type].has_pointers) has_pointers = true;
      members.push_back(std::move(m));
    } while (dwarf_siblingof(&child, &child) == 0);
  if (!members.empty() && members.back().type != kNoDwarfType) {
    const DwarfType& last = types_[members.back().type];
    types_[id].flexible = last.kind == DwarfType::Kind::array && last.count == 0;
  }
  types_[id].member_list = static_cast<std::uint32_t>(member_lists_.size());
  types_[id].member_count = static_cast<std::uint32_t>(members.size());
  // libstdc++ keeps a node's value in raw storage (__gnu_cxx::__aligned_membuf<T>, __aligned_buffer<T>):
  // bytes to DWARF, a T to heap typing, which may find pointers there.
  types_[id].has_pointers = has_pointers || name.rfind("__gnu_cxx::__aligned_", 0) == 0;
  member_lists_.push_back(std::move(members));
  return id;
}

DwarfTypeId DwarfTypeIndex::resolve(Dwarf_Die die) const {
  const std::uint64_t offset = dwarf_dieoffset(&die);
  if (auto it = by_die_.find(offset); it != by_die_.end()) return it->second;
  const int tag = dwarf_tag(&die);
  auto name_of = [&](Dwarf_Die& d) {
    auto it = qualified_names_.find(dwarf_dieoffset(&d));
    return it != qualified_names_.end() ? it->second : die_name(d);
  };
  auto add = [&](DwarfType t) {
    t.origin = offset;
    const DwarfTypeId id = static_cast<DwarfTypeId>(types_.size());
    types_.push_back(std::move(t));
    by_die_[offset] = id;
    return id;
  };
  switch (tag) {
    case DW_TAG_typedef:
    case DW_TAG_const_type:
    case DW_TAG_volatile_type:
    case DW_TAG_restrict_type:
    case DW_TAG_atomic_type: {
      std::optional<Dwarf_Die> target = die_reference(die, DW_AT_type);
      by_die_[offset] = kNoDwarfType;  // a cycle through typedefs ends as void
      const DwarfTypeId id = target ? resolve(*target) : kNoDwarfType;
      // An anonymous structure is known by its typedef's name ("typedef struct {...} record;").
      if (id != kNoDwarfType && tag == DW_TAG_typedef && types_[id].name.empty()) {
        types_[id].name = name_of(die);
        types_[id].origin = offset;
      }
      by_die_[offset] = id;
      return id;
    }
    case DW_TAG_base_type:
    case DW_TAG_enumeration_type: {
      DwarfType t;
      t.kind = tag == DW_TAG_base_type ? DwarfType::Kind::base : DwarfType::Kind::enumeration;
      t.name = name_of(die);
      t.size = type_size(die);
      t.encoding = encoding_of(die);
      t.die = offset;
      return add(std::move(t));
    }
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type: {
      DwarfType t;
      t.kind = DwarfType::Kind::pointer;
      t.size = 8;
      t.has_pointers = true;
      std::optional<Dwarf_Die> target = die_reference(die, DW_AT_type);
      t.target_die = target ? dwarf_dieoffset(&*target) : 0;
      t.name = (target ? type_name(*target) : std::string("void")) + "*";
      return add(std::move(t));
    }
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type:
      return add_structure(die, name_of(die));
    case DW_TAG_array_type: {
      DwarfType t;
      t.kind = DwarfType::Kind::array;
      const DwarfTypeId id = add(std::move(t));
      std::optional<Dwarf_Die> element = die_reference(die, DW_AT_type);
      const DwarfTypeId e = element ? resolve(*element) : kNoDwarfType;
      const std::uint64_t count = array_count(die);
      types_[id].target = e;
      types_[id].count = count;
      if (e != kNoDwarfType) {
        types_[id].size = count * types_[e].size;
        types_[id].has_pointers = types_[e].has_pointers;
        types_[id].name = types_[e].name + (count ? "[" + std::to_string(count) + "]" : "[]");
      }
      return id;
    }
    case DW_TAG_subroutine_type: {
      DwarfType t;
      t.kind = DwarfType::Kind::function;
      t.name = "function";
      return add(std::move(t));
    }
    default: {
      DwarfType t;
      t.name = name_of(die);
      t.size = type_size(die);
      return add(std::move(t));
    }
  }
}

}  // namespace heapscope
