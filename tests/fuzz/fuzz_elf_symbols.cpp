// Fuzz target: a module file as heapscope reads it for symbols and types — libelf through ElfFile and
// ModuleSymbols (.symtab, .dynsym, relocations, notes), then libdw through DwarfFile and the type index
// (every structure's members, pointees and definitions resolved on demand).
#include <algorithm>
#include <cstdint>
#include <string>

#include "dwarf/dwarf_file.h"
#include "dwarf/type_index.h"
#include "input_file.h"
#include "symbols/module_symbols.h"

using namespace heapscope;

namespace {

constexpr std::size_t kMaxTypesVisited = 2000;

void use_symbols(const ModuleSymbols& symbols) {
  (void)symbols.build_id();
  const std::vector<Symbol>& all = symbols.symbols();
  for (std::size_t i = 0; i < std::min<std::size_t>(all.size(), 200); ++i) {
    (void)symbols.find(all[i].name);
    (void)symbols.covering(all[i].value);
  }
  (void)symbols.relative_relocations();
  (void)symbols.tls_relocations();
  (void)symbols.find_bytes("GNU C Library");
}

void use_types(const DwarfTypeIndex& index) {
  for (const DwarfVariable& v : index.variables()) (void)index.definition(v.type);
  for (DwarfTypeId id = 0; id < index.type_count() && id < kMaxTypesVisited; ++id) {
    (void)index.definition(id);
    (void)index.pointee(id);
    for (const DwarfTypeMember& m : index.members(id)) (void)index.definition(m.type);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::InputFile file(data, size);
  if (!file.ok()) return 0;
  std::string error;
  SymbolSearchOptions no_debug_files;
  no_debug_files.use_debug_files = false;  // the fuzzed file's build-id must not pull in the system's files
  if (const auto symbols = ModuleSymbols::load(file.path(), no_debug_files, &error)) use_symbols(*symbols);
  if (const auto dwarf = DwarfFile::open(file.path(), &error))
    if (const auto index = DwarfTypeIndex::build(*dwarf)) use_types(*index);
  return 0;
}
