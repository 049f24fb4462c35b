// DwarfFiles: the DWARF of each module of an image, shared by whoever reads it while they do. The type
// index (types/dwarf_typing) and the unwinder's frame variables and source lines (frames/unwind) read the
// same file: a separate debug file's compressed sections (Debian's libc6-dbg) are inflated once, and the
// DIE offsets the unwinder gives a frame variable's type are those the type index knows. A file lives as
// long as someone holds it: a type index for the session, the unwinder for the unwind. So `roots`, which
// builds no index, gives the inflated sections back once the stacks are unwound (11 MiB at 1M blocks).
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
  // own file's; null when neither has DWARF. The one open while anyone holds it, opened again after;
  // safe from several threads.
  std::shared_ptr<const DwarfFile> of(std::size_t module) const;
  // The module's read lock (see above); an unowned lock for a module the image does not have.
  std::unique_lock<std::mutex> lock(std::size_t module) const;

 private:
  const Image& image_;
  const SymbolIndex& symbols_;
  struct Opened {
    std::mutex opening;
    std::weak_ptr<const DwarfFile> file;
    bool absent = false;  // no DWARF to open: not tried again
    std::mutex reading;
  };
  std::vector<std::unique_ptr<Opened>> opened_;  // by module
};

}  // namespace heapscope
