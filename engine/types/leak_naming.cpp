#include "types/leak_naming.h"

#include <algorithm>
#include <unordered_map>

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

// The rings libstdc++'s shapes could not tell from a program's own (ListOrRing), once layout inference
// has run. The program's own structure fits the ring too (inference named its blocks T?): both are said,
// "T or std::list node?". The main executable has DWARF and none of its structures fits: it is the list.
// No DWARF: the shape is certain, what it is not: "std::list node or ring node". A block claimed by two
// rings (a node whose value counts the others, besides the list object) leaves both unnamed.
void settle_lists_or_rings(const Image& image, const DwarfTypes& dwarf, std::vector<ListOrRing> rings,
                           const std::vector<bool>* within, BlockTypes& types) {
  std::unordered_map<BlockId, int> claims;
  for (const ListOrRing& ring : rings) {
    ++claims[ring.object];
    for (const BlockId b : ring.nodes) ++claims[b];
  }
  const Module* main = image.main_executable();
  const bool program_has_dwarf = main && dwarf.index(static_cast<std::size_t>(main - image.modules().data()));
  auto name = [&](BlockId b, std::uint32_t id) {
    if (!within || (*within)[b]) types.set(b, id);
  };
  for (const ListOrRing& ring : rings) {
    if (claims[ring.object] > 1) continue;
    const std::uint32_t guessed = types.type_id(ring.object);
    if (guessed != BlockTypes::kUnknown && types.naming_of(guessed) == Naming::inferred) {
      std::string program_type = types.name_of(guessed);
      if (program_type.ends_with('?')) program_type.pop_back();  // one mark of a guess, at the end
      name(ring.object, types.intern(program_type + " or std::list?", Naming::inferred));
      const std::uint32_t node = types.intern(program_type + " or std::list node?", Naming::inferred);
      for (const BlockId b : ring.nodes)
        if (types.type_id(b) == guessed) name(b, node);
    } else if (guessed == BlockTypes::kUnknown) {
      const char* either = program_has_dwarf ? "" : " or ring node";
      name(ring.object, types.intern(std::string("std::list") + either, Naming::pattern));
      const std::uint32_t node = types.intern(std::string("std::list node") + either, Naming::pattern);
      for (const BlockId b : ring.nodes)
        if (types.type_id(b) == BlockTypes::kUnknown) name(b, node);
    }
  }
}

// Gives `inference` the certain names of what the ties it met point to, asked of `known` once; false when
// it met none.
bool break_ties_by_known_names(LayoutInference& inference, const KnownNames& known) {
  std::vector<BlockId> pointees;
  for (const BlockId b : inference.tied_blocks()) {
    const std::vector<BlockId> more = inference.tie_pointees(b);
    pointees.insert(pointees.end(), more.begin(), more.end());
  }
  if (pointees.empty()) return false;
  std::sort(pointees.begin(), pointees.end());
  pointees.erase(std::unique(pointees.begin(), pointees.end()), pointees.end());
  const std::vector<std::string> names = known(pointees);
  std::unordered_map<BlockId, std::string> named;
  for (std::size_t i = 0; i < pointees.size() && i < names.size(); ++i)
    if (!names[i].empty()) named.emplace(pointees[i], names[i]);
  inference.know_names(std::move(named));
  return true;
}

}  // namespace

void name_unrooted_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                          std::span<const BlockId> order, BlockTypes& types, DwarfTypes& dwarf,
                          const std::vector<bool>* within, const KnownNames& known) {
  std::vector<ListOrRing> lists_or_rings;
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
    lists_or_rings = name_libstdcxx_shapes(image, heap, index, owners, targets, within, types);
  }
  {
    PhaseTimer step("leak names: layout inference");
    LayoutInference inference(image, heap, index, dwarf);
    const auto infer = [&](BlockId b) { return inference.infer(b); };
    type_from_inferred_blocks(image, heap, index, select(order, within, types, /*named=*/false), infer, types,
                              dwarf, within);
    // The ties met on the way, with what their pointees are certainly named: a second pass over what is
    // still unnamed, so that the names cost nothing when nothing tied.
    if (known && break_ties_by_known_names(inference, known))
      type_from_inferred_blocks(image, heap, index, select(order, within, types, /*named=*/false), infer, types,
                                dwarf, within);
    settle_lists_or_rings(image, dwarf, std::move(lists_or_rings), within, types);
  }
  PhaseTimer step("leak names: content");
  name_by_content(image, heap, index, select(order, within, types, /*named=*/false), types);
}

void name_leaked_blocks(const Image& image, const HeapModel& heap, const BlockIndex& index,
                        const LeakVerdicts& verdicts, BlockTypes& types, DwarfTypes& dwarf,
                        const std::vector<bool>* within, const std::vector<BlockId>* members,
                        const KnownNames& known) {
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
  name_unrooted_blocks(image, heap, index, order, types, dwarf, within, known);
}

}  // namespace heapscope
