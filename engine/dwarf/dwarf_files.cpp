#include "dwarf/dwarf_files.h"

#include "symbols/module_symbols.h"

namespace heapscope {

DwarfFiles::DwarfFiles(const Image& image, const SymbolIndex& symbols) : image_(image), symbols_(symbols) {
  opened_.resize(image.modules().size());
  for (auto& o : opened_) o = std::make_unique<Opened>();
}

const DwarfFile* DwarfFiles::of(std::size_t module) const {
  if (module >= opened_.size()) return nullptr;
  Opened& o = *opened_[module];
  std::call_once(o.once, [&] {
    const Module& m = image_.modules()[module];
    const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : symbols_.symbols_for(m);
    if (!syms) return;
    o.file = DwarfFile::open(syms->dwarf_file(), nullptr);
  });
  return o.file.get();
}

std::unique_lock<std::mutex> DwarfFiles::lock(std::size_t module) const {
  if (module >= opened_.size()) return {};
  return std::unique_lock(opened_[module]->reading);
}

}  // namespace heapscope
