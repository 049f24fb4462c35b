// Names for leaked blocks. DWARF typing follows pointers from roots, and a leak has no root: without this
// pass every leaked block whose class has no vtable stays "unknown". The namers run most reliable first,
// each on what the ones before left unnamed:
//   1. blocks named by a symbol or RTTI are followed by their class's DWARF layout, as from a root
//      (what they lead to is certain: Naming::dwarf);
//   2. libstdc++'s shapes (libstdcxx_shapes.h) name string bodies, vector bodies and container nodes by
//      their owners and neighbours, debug info or not;
//   3. layout inference (layout_inference.h) names a block by the one structure that fits it, "T?", and
//      what it leads to is followed with inferred names;
//   4. the content namer names what is left by its bytes (content_naming.h).
// Only leaked blocks (and, through their pointers, the blocks they lead to) are named here: the cost is
// that of the leaks, not of the heap.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "model/block_index.h"
#include "model/leak_verdicts.h"
#include "types/block_types.h"
#include "types/dwarf_typing.h"

namespace heapscope {

// Certain names (DWARF from the roots, a symbol, RTTI; "" when none) of `blocks`, in order: what layout
// inference asks of the blocks a tie points to (LayoutInference::tie_pointees), most of them reachable.
using KnownNames = std::function<std::vector<std::string>(std::span<const BlockId> blocks)>;

// The namers above, on the blocks of `order` (taken in that order: a structure inferred at a block names
// what the block leads to), as if no root reached them. name_leaked_blocks runs them on the leaks; the
// precision benchmark (frontends/cli/naming_precision.cpp) on reachable blocks DWARF types, to count
// where they disagree with DWARF.
void name_unrooted_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                          std::span<const BlockId> order, BlockTypes& types, DwarfTypes& dwarf,
                          const std::vector<bool>* within = nullptr, const KnownNames& known = {});

// With `within` (closed under predecessors, as infer_types takes it), only the leaked blocks in it are
// named, with the names the whole-heap pass gives them: every name here comes from the block's own
// bytes or from a leaked block pointing to it, which `within` holds too.
// `members`, when given (with `within`), lists the blocks `within` flags, in order: the leaks are looked for
// among them alone.
void name_leaked_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                        const LeakVerdicts& verdicts, BlockTypes& types, DwarfTypes& dwarf,
                        const std::vector<bool>* within = nullptr, const std::vector<BlockId>* members = nullptr,
                        const KnownNames& known = {});

}  // namespace heapscope
