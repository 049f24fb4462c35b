#include "types/leak_naming.h"

#include <algorithm>

#include "base/phase_timer.h"
#include "types/content_naming.h"
#include "types/layout_inference.h"
#include "types/libstdcxx_shapes.h"

namespace heapscope {

namespace {

std::vector<BlockId> leaked_blocks(const HeapModel& heap, const LeakVerdicts& verdicts, const std::vector<bool>* within,
                                   const BlockTypes& types, bool named) {
  std::vector<BlockId> out;
  for (BlockId b = 0; b < heap.blocks.size(); ++b)
    if (is_leaked(verdicts.verdict[b]) && (!within || (*within)[b]) &&
        (types.type_id(b) != BlockTypes::kUnknown) == named)
      out.push_back(b);
  return out;
}

}  // namespace

void name_leaked_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                        const LeakVerdicts& verdicts, BlockTypes& types, DwarfTypes& dwarf,
                        const std::vector<bool>* within) {
  PhaseTimer timer("leak names");
  {
    PhaseTimer step("leak names: from vtables");
    std::vector<BlockId> certain;
    for (const BlockId b : leaked_blocks(heap, verdicts, within, types, /*named=*/true)) {
      const Naming n = types.naming(b);
      if (n == Naming::symbol || n == Naming::rtti) certain.push_back(b);
    }
    type_from_symbol_typed_blocks(image, heap, index, certain, types, dwarf, within);
  }
  {
    PhaseTimer step("leak names: libstdc++ shapes");
    // Shapes are checked over every leaked block (a hash chain's later nodes are no ancestors of its
    // first), named only within `within`.
    std::vector<bool> leaked(heap.blocks.size(), false);
    std::vector<BlockId> owners;
    for (BlockId b = 0; b < heap.blocks.size(); ++b)
      if (is_leaked(verdicts.verdict[b])) {
        leaked[b] = true;
        owners.push_back(b);
      }
    name_libstdcxx_shapes(image, heap, index, owners, leaked, within, types);
  }
  {
    PhaseTimer step("leak names: layout inference");
    // Where lost structures start first (direct leaks, then cycles): what they lead to is named from them.
    std::vector<BlockId> unnamed = leaked_blocks(heap, verdicts, within, types, /*named=*/false);
    std::stable_partition(unnamed.begin(), unnamed.end(),
                          [&](BlockId b) { return verdicts.verdict[b] == Verdict::direct_leak; });
    std::stable_partition(unnamed.begin(), unnamed.end(), [&](BlockId b) {
      return verdicts.verdict[b] == Verdict::direct_leak || verdicts.verdict[b] == Verdict::cycle_leak;
    });
    LayoutInference inference(image, heap, index, dwarf);
    type_from_inferred_blocks(image, heap, index, unnamed, [&](BlockId b) { return inference.infer(b); }, types,
                              dwarf, within);
  }
  PhaseTimer step("leak names: content");
  const std::vector<BlockId> unnamed = leaked_blocks(heap, verdicts, within, types, /*named=*/false);
  name_by_content(image, heap, index, unnamed, types);
}

}  // namespace heapscope
