#include "dwarf/dwarf_files.h"

#include "symbols/module_symbols.h"

namespace heapscope {

DwarfFiles::DwarfFiles(const Image& image, const SymbolIndex& symbols) : image_(image), symbols_(symbols) {
  opened_.resize(image.modules().size());
  for (auto& o : opened_) o = std::make_unique<Opened>();
}

std::shared_ptr<const DwarfFile> DwarfFiles::of(std::size_t module) const {
  if (module >= opened_.size()) return nullptr;
  Opened& o = *opened_[module];
  const std::lock_guard opening(o.opening);
  if (std::shared_ptr<const DwarfFile> held = o.file.lock()) return held;
  if (o.absent) return nullptr;
  const Module& m = image_.modules()[module];
  const ModuleSymbols* syms = m.file_on_disk.empty() ? nullptr : symbols_.symbols_for(m);
  std::shared_ptr<const DwarfFile> opened = syms ? DwarfFile::open(syms->dwarf_file(), nullptr) : nullptr;
  o.absent = !opened;
  o.file = opened;
  return opened;
}

std::unique_lock<std::mutex> DwarfFiles::lock(std::size_t module) const {
  if (module >= opened_.size()) return {};
  return std::unique_lock(opened_[module]->reading);
}

}  // namespace heapscope
