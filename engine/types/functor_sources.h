// Where the functor a std::function manages was defined. libstdc++'s manager function is a member of
// _Function_handler<Signature, _Functor> (or _Base_manager<_Functor>): its DWARF definition leads, through
// its declaration in that class, to the class's template parameter _Functor — for a lambda, the closure
// type, whose declaration is the lambda expression's file and line.
#pragma once

#include <map>
#include <vector>

#include "dwarf/dwarf_file.h"
#include "symbols/module_symbols.h"

namespace heapscope {

// For each manager function (by its link-time address, the symbol's value) that the module's DWARF
// describes: where its functor type is declared. Managers DWARF does not cover are absent.
std::map<Address, SourceLocation> functor_sources(const ModuleSymbols& module,
                                                  const std::vector<Address>& manager_values);

}  // namespace heapscope
