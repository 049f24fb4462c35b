#include "types/leak_naming.h"

#include <algorithm>

#include "base/phase_timer.h"
#include "types/content_naming.h"
#include "types/layout_inference.h"
#include "types/libstdcxx_shapes.h"

namespace heapscope {

namespace {

// The blocks of `order` that are in `within` and named (or unnamed), in order.
std::vector<BlockId> select(std::span<const BlockId> order, const std::vector<bool>* within, const BlockTypes& types,
                            bool named) {
  std::vector<BlockId> out;
  for (const BlockId b : order)
    if ((!within || (*within)[b]) && (types.type_id(b) != BlockTypes::kUnknown) == named) out.push_back(b);
  return out;
}

}  // namespace

void name_unrooted_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                          std::span<const BlockId> order, BlockTypes& types, DwarfTypes& dwarf,
                          const std::vector<bool>* within) {
  {
    PhaseTimer step("leak names: from vtables");
    std::vector<BlockId> certain;
    for (const BlockId b : select(order, within, types, /*named=*/true)) {
      const Naming n = types.naming(b);
      if (n == Naming::symbol || n == Naming::rtti) certain.push_back(b);
    }
    type_from_symbol_typed_blocks(image, heap, index, certain, types, dwarf, within);
  }
  {
    PhaseTimer step("leak names: libstdc++ shapes");
    // Shapes are checked over all of `order` (a hash chain's later nodes are no ancestors of its first),
    // named only within `within`; a container that holds a block leads to it, so only the owners within
    // are searched.
    std::vector<bool> targets(heap.blocks.size(), false);
    std::vector<BlockId> owners;
    for (const BlockId b : order) {
      targets[b] = true;
      if (!within || (*within)[b]) owners.push_back(b);
    }
    name_libstdcxx_shapes(image, heap, index, owners, targets, within, types);
  }
  {
    PhaseTimer step("leak names: layout inference");
    LayoutInference inference(image, heap, index, dwarf);
    type_from_inferred_blocks(image, heap, index, select(order, within, types, /*named=*/false),
                              [&](BlockId b) { return inference.infer(b); }, types, dwarf, within);
  }
  PhaseTimer step("leak names: content");
  name_by_content(image, heap, index, select(order, within, types, /*named=*/false), types);
}

void name_leaked_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                        const LeakVerdicts& verdicts, BlockTypes& types, DwarfTypes& dwarf,
                        const std::vector<bool>* within, const std::vector<BlockId>* members) {
  PhaseTimer timer("leak names");
  // Where lost structures start first (direct leaks, then cycles, then what they lead to): a structure
  // inferred at its start names what it leads to.
  std::vector<BlockId> order, cycles, indirect;  // one pass over the verdicts
  auto sort_in = [&](BlockId b) {
    const Verdict v = verdicts.verdict[b];
    if (v == Verdict::direct_leak) order.push_back(b);
    else if (v == Verdict::cycle_leak) cycles.push_back(b);
    else if (v == Verdict::indirect_leak) indirect.push_back(b);
  };
  if (members) {
    for (const BlockId b : *members) sort_in(b);
  } else {
    for (BlockId b = 0; b < heap.blocks.size(); ++b) sort_in(b);
  }
  order.insert(order.end(), cycles.begin(), cycles.end());
  order.insert(order.end(), indirect.begin(), indirect.end());
  name_unrooted_blocks(image, heap, index, order, types, dwarf, within);
}

}  // namespace heapscope
