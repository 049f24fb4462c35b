// Leak verdicts over the reference graph, in LeakSanitizer's and valgrind's terms.
#pragma once

#include <cstdint>
#include <vector>

#include "base/viewed_array.h"
#include "model/interior_idioms.h"
#include "model/reference_graph.h"

namespace heapscope {

enum class Verdict : std::uint8_t {
  not_allocated,  // free, cached or top: not a candidate
  reachable,      // some chain of pointers from a root reaches it
  direct_leak,    // unreachable, and no other leaked block points to it (the place the leak starts)
  indirect_leak,  // unreachable, but reached from a direct leak (lost along with it)
  cycle_leak,     // unreachable, in or under a cycle of leaked blocks that no direct leak reaches
};
inline const char* verdict_name(Verdict v) {  // the names JSON and text output use
  constexpr const char* kNames[] = {"not_allocated", "reachable", "direct", "indirect", "cycle"};
  return kNames[static_cast<int>(v)];
}
inline bool is_leaked(Verdict v) { return v >= Verdict::direct_leak; }

// The per-block arrays are owned, or views of an index file's mapping (session/index_cache.h).
struct LeakVerdicts {
  ViewedArray<Verdict> verdict;        // per block id
  ViewedArray<std::uint8_t> possibly;  // reachable, but only through pointers into block interiors
  // Reachable through an interior-pointer idiom alone (model/interior_idioms.h; valgrind's "reachable via
  // heuristic"): which idiom, a byte per block. Empty when no block is.
  ViewedArray<HeldBy> held_by;
  std::vector<BlockId> leaked;         // the leaked blocks, in block order (a tenth of the heap or so)
};

// The leaked blocks of `verdict`, in block order: what `leaked` holds, for verdicts from elsewhere.
std::vector<BlockId> leaked_blocks(std::span<const Verdict> verdict);

// A pointer into a block's interior that one of `idioms` explains counts as a pointer to its start, as
// memcheck's --leak-check-heuristics does (all of them by default).
LeakVerdicts compute_verdicts(const ReferenceGraph& graph, const HeapModel& heap, IdiomSet idioms = kAllIdioms);

}  // namespace heapscope
