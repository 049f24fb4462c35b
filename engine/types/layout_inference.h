// Layout inference: names a block nothing else names by the one DWARF structure whose layout fits it.
// A candidate is a structure (not a library's: std::, __gnu_cxx::, reserved names) whose size fits the
// block as its allocator would have sized it, and every pointer-bearing member of which holds what its
// type allows: a data pointer null or pointing where its pointee fits (the start of a block with room for
// it, a module's data, a stack), a function pointer null or into a module's code, a std::string member a
// consistent pointer/length/capacity (or its own SSO buffer), a std::vector member an ordered begin/end/
// capacity triple around one body. A pointer to a structure is followed one step: the block it points to
// must not rule out that structure's own layout. Each member that checks out positively is evidence. The
// program's own structures (the main executable's) are tried first, and name a block when one of them has
// strictly more evidence than the others; only when none has any are the libraries' structures tried,
// which need two members of evidence — never the C library's, the dynamic linker's or an allocator's, whose
// structures are their own bookkeeping. The name is marked inferred.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "model/block_index.h"
#include "types/dwarf_typing.h"

namespace heapscope {

// Candidates are gathered once per block size and each block's own bytes decide: what a block is
// inferred to be does not depend on what else was inferred.
class LayoutInference {
 public:
  LayoutInference(const Image& image, const HeapModel& heap, const BlockIndex& index, const DwarfTypes& dwarf);
  ~LayoutInference();
  // The structure that clearly wins for allocated block `b`; nullopt when none does (or no DWARF).
  std::optional<DwarfTypeRef> infer(BlockId b);
  // The blocks infer met where the program's structures tied (it said nullopt), in order; for each, the
  // blocks the tied structures' pointer members lead to. Certain names of some of those (DWARF from the
  // roots, a symbol, RTTI), given to know_names, break such ties from then on: a lost list node whose
  // `next` leads to a live `conn` is a conn, not the `request` laid out alike — the one structure whose
  // members' pointees are named as its members' types say.
  std::vector<BlockId> tied_blocks() const;
  std::vector<BlockId> tie_pointees(BlockId b);
  void know_names(std::unordered_map<BlockId, std::string> names);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The structure sizes a block of `usable` bytes may have been allocated for: [first, second].
std::pair<std::uint64_t, std::uint64_t> fitting_sizes(const Block& block);

}  // namespace heapscope
