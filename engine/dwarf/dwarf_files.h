// DwarfFiles: the DWARF of each module of an image, opened once and shared by whoever reads it. The type
// index (types/dwarf_typing) and the unwinder's frame variables and source lines (frames/unwind) read the
// same file: a separate debug file's compressed sections (Debian's libc6-dbg) are inflated once, and the
// DIE offsets the unwinder gives a frame variable's type are those the type index knows.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "dwarf/dwarf_file.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

class DwarfFiles {
 public:
  DwarfFiles(const Image& image, const SymbolIndex& symbols);

  // The DWARF of image.modules()[module]: its separate debug file's when its symbols found one, else its
  // own file's; null when neither has DWARF. Opened on first use, once; safe from several threads.
  const DwarfFile* of(std::size_t module) const;

 private:
  const Image& image_;
  const SymbolIndex& symbols_;
  struct Opened {
    std::once_flag once;
    std::unique_ptr<DwarfFile> file;
  };
  std::vector<std::unique_ptr<Opened>> opened_;  // by module
};

}  // namespace heapscope
