#include "symbols/symbol_index.h"

#include <fmt/format.h>

namespace heapscope {


SymbolIndex::SymbolIndex(const Image& image, SymbolSearchOptions options)
    : image_(image), options_(std::move(options)) {}

SymbolIndex::~SymbolIndex() = default;

const ModuleSymbols* SymbolIndex::symbols_for(const Module& module) const {
  std::lock_guard lock(mutex_);
  if (auto it = loaded_.find(&module); it != loaded_.end()) return it->second.get();
  std::unique_ptr<ModuleSymbols> symbols;
  // No file on disk ([vdso], deleted libraries the image source could not replace) is ordinary and
  // already reported by the image; say nothing more here.
  if (!module.file_on_disk.empty()) {
    std::string error;
    symbols = ModuleSymbols::load(module.file_on_disk, options_, &error);
    if (!symbols) {
      warnings_.push_back("no symbols for " + module.path + ": " + error);
    } else {
      warnings_.insert(warnings_.end(), symbols->warnings().begin(), symbols->warnings().end());
    }
  }
  return loaded_.emplace(&module, std::move(symbols)).first->second.get();
}

const Module* SymbolIndex::find_module(std::string_view basename_prefix) const {
  for (const Module& module : image_.modules())
    if (module.name().substr(0, basename_prefix.size()) == basename_prefix) return &module;
  return nullptr;
}

// Asked of every module by each look for a collector (the allocator's, the finalizers'): answered once.
bool SymbolIndex::exports(const Module& module, std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(&module, std::string(name));
  if (auto it = exported_.find(key); it != exported_.end()) return it->second;
  const bool answer = !module.file_on_disk.empty() && ModuleSymbols::exports(module.file_on_disk, name);
  exported_.emplace(std::move(key), answer);
  return answer;
}

std::optional<Address> SymbolIndex::address_of(const Module& module, std::string_view name) const {
  const ModuleSymbols* symbols = symbols_for(module);
  const Symbol* symbol = symbols ? symbols->find(name) : nullptr;
  // A TLS symbol's value is an offset in each thread's TLS block, not an address.
  if (!symbol || symbol->kind == SymbolKind::tls) return std::nullopt;
  return module.load_bias + symbol->value;
}

ResolvedSymbol SymbolIndex::resolve(Address addr) const {
  ResolvedSymbol out;
  out.module = image_.module_at(addr);
  if (!out.module) return out;
  const Address file_vaddr = addr - out.module->load_bias;
  out.offset = file_vaddr;
  if (const ModuleSymbols* symbols = symbols_for(*out.module)) {
    if ((out.symbol = symbols->covering(file_vaddr))) out.offset = file_vaddr - out.symbol->value;
  }
  return out;
}

std::string SymbolIndex::describe(Address addr) const {
  const ResolvedSymbol resolved = resolve(addr);
  if (!resolved.module) return fmt::format("{:#x}", addr);
  const std::string_view module = resolved.module->name();
  if (!resolved.symbol) return fmt::format("{}+{:#x}", module, resolved.offset);
  const std::string name = demangle(resolved.symbol->name);
  if (resolved.offset == 0) return fmt::format("{} in {}", name, module);
  return fmt::format("{}+{:#x} in {}", name, resolved.offset, module);
}

const std::vector<std::string>& SymbolIndex::warnings() const { return warnings_; }

}  // namespace heapscope
