// SymbolIndex: symbols of every module of an Image, loaded lazily, in runtime addresses.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "symbols/module_symbols.h"

namespace heapscope {

struct ResolvedSymbol {
  const Module* module = nullptr;
  const Symbol* symbol = nullptr;  // null when only the module is known
  // From the symbol's start; when symbol is null, the file vaddr (address - load_bias), the number
  // addr2line and objdump take.
  std::uint64_t offset = 0;
};

class SymbolIndex {
 public:
  SymbolIndex(const Image& image, SymbolSearchOptions options);
  ~SymbolIndex();

  // Symbols of a module, loaded on first use from Module::file_on_disk; null when that file is
  // unusable (the reason is added to warnings()).
  const ModuleSymbols* symbols_for(const Module& module) const;
  // First module whose file name (basename) starts with `prefix`, e.g. "libc.so" or "libc-".
  const Module* find_module(std::string_view basename_prefix) const;
  // Whether the module's file exports `name` in its dynamic symbol table, read without loading the
  // module's symbols (ModuleSymbols::exports).
  bool exports(const Module& module, std::string_view name) const;
  // Runtime address of a named symbol in a module.
  std::optional<Address> address_of(const Module& module, std::string_view name) const;
  ResolvedSymbol resolve(Address addr) const;
  // "g_cache+0x10 in libfoo.so", "libfoo.so+0x1234", or "0x7f..." when nothing is known.
  std::string describe(Address addr) const;

  // Modules whose file could not be loaded, rejected debug files. Read it once loading is over: the
  // vector grows while symbols_for() runs on other threads.
  const std::vector<std::string>& warnings() const;
  const SymbolSearchOptions& options() const { return options_; }

 private:
  const Image& image_;
  SymbolSearchOptions options_;
  mutable std::mutex mutex_;
  mutable std::map<const Module*, std::unique_ptr<ModuleSymbols>> loaded_;
  mutable std::map<std::pair<const Module*, std::string>, bool, std::less<>> exported_;  // exports()' answers
  mutable std::vector<std::string> warnings_;
};

}  // namespace heapscope
