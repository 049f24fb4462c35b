// DwarfFiles: the DWARF of each module of an image, opened once and shared by whoever reads it. The type
// index (types/dwarf_typing) and the unwinder's frame variables and source lines (frames/unwind) read the
// same file: a separate debug file's compressed sections (Debian's libc6-dbg) are inflated once, and the
// DIE offsets the unwinder gives a frame variable's type are those the type index knows.
//
// libdw (0.188) does not take one file's reads from two threads at once: `top` builds the type indexes
// on a thread of its own while another may unwind the stacks. Each builder of an index and the unwinder
// hold the module's lock (lock()) while they read. An index's later lookups take none: they come from
// the naming of blocks, which asks for the call stacks first (Session::name_blocks), so no unwind runs
// beside them.
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
  // The module's read lock (see above); an unowned lock for a module the image does not have.
  std::unique_lock<std::mutex> lock(std::size_t module) const;

 private:
  const Image& image_;
  const SymbolIndex& symbols_;
  struct Opened {
    std::once_flag once;
    std::unique_ptr<DwarfFile> file;
    std::mutex reading;
  };
  std::vector<std::unique_ptr<Opened>> opened_;  // by module
};

}  // namespace heapscope
