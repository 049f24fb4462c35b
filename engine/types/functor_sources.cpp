#include "types/functor_sources.h"

#include <dwarf.h>

#include <algorithm>
#include <cstdlib>

namespace heapscope {

namespace {

// The class that declares a member function DIE (its innermost enclosing scope).
std::optional<Dwarf_Die> enclosing_class(Dwarf_Die& declaration) {
  Dwarf_Die* scopes = nullptr;
  const int count = dwarf_getscopes_die(&declaration, &scopes);
  std::optional<Dwarf_Die> out;
  if (count > 1) {
    const int tag = dwarf_tag(&scopes[1]);
    if (tag == DW_TAG_class_type || tag == DW_TAG_structure_type) out = scopes[1];
  }
  std::free(scopes);
  return out;
}

std::optional<Dwarf_Die> template_type_argument(Dwarf_Die& class_die, const char* parameter) {
  Dwarf_Die child;
  if (dwarf_child(&class_die, &child) != 0) return std::nullopt;
  do {
    if (dwarf_tag(&child) == DW_TAG_template_type_parameter && die_name(child) == parameter) return die_type(child);
  } while (dwarf_siblingof(&child, &child) == 0);
  return std::nullopt;
}

// The out-of-line definition's declaration: through DW_AT_abstract_origin and DW_AT_specification.
std::optional<Dwarf_Die> declaration_of_definition(Dwarf_Die& definition) {
  std::optional<Dwarf_Die> die = definition;
  if (std::optional<Dwarf_Die> origin = die_reference(*die, DW_AT_abstract_origin)) die = origin;
  if (std::optional<Dwarf_Die> spec = die_reference(*die, DW_AT_specification)) return spec;
  return std::nullopt;
}

SourceLocation functor_location(Dwarf_Die& manager) {
  std::optional<Dwarf_Die> declaration = declaration_of_definition(manager);
  std::optional<Dwarf_Die> handler = declaration ? enclosing_class(*declaration) : std::nullopt;
  std::optional<Dwarf_Die> functor = handler ? template_type_argument(*handler, "_Functor") : std::nullopt;
  return functor ? declaration_of(*functor) : SourceLocation{};
}

}  // namespace

std::map<Address, SourceLocation> functor_sources(const ModuleSymbols& module,
                                                  const std::vector<Address>& manager_values) {
  std::map<Address, SourceLocation> out;
  const auto dwarf = DwarfFile::open(module.dwarf_file(), nullptr);
  if (!dwarf || manager_values.empty()) return out;
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
  const auto range = std::minmax_element(manager_values.begin(), manager_values.end());
  const Address lowest = *range.first, highest = *range.second;
  dwarf->for_each_die([&](Dwarf_Die& die, Dwarf_Die*) {
    const int tag = dwarf_tag(&die);
    if (tag != DW_TAG_subprogram) return tag == DW_TAG_compile_unit || tag == DW_TAG_namespace || tag == DW_TAG_partial_unit;
    Dwarf_Addr low = 0;
    if (dwarf_lowpc(&die, &low) != 0 || low < lowest || low > highest) return false;
    if (std::find(manager_values.begin(), manager_values.end(), low) == manager_values.end()) return false;
    if (SourceLocation loc = functor_location(die); loc.known()) out.emplace(low, loc);
    return false;
  });
  return out;
}

}  // namespace heapscope
