// Questions about a few blocks that need only part of the graph: what leads to them, and what removing
// one would free. A command about one block asks these instead of naming every block or building the
// whole dominator tree.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "heap/heap_model.h"
#include "model/leak_verdicts.h"
#include "model/reference_graph.h"
#include "model/retention_edges.h"

namespace heapscope {

// The blocks from which some chain of pointers reaches one of `blocks`, those blocks included, as a
// flag per block id. Closed under predecessors: whatever points into a member is a member, so a pass
// that only follows pointers (typing from roots) gives a member the same result restricted to the set
// as over the whole graph.
std::vector<bool> ancestors_of(const ReferenceGraph& graph, std::span<const BlockId> blocks);

// What freeing block `b` would free: its usable bytes and those of every block no root reaches without
// passing through it, over the edges that hold (`edges`: borrowed pointers and bookkeeping slots keep
// nothing alive) — Retention::retained_bytes(b), found from b's descendants alone (those reached another
// way are marked alive and the mark spread among them). The work grows with what b reaches, so it stops
// and gives nothing once it has visited `*budget` edges and blocks (the budget is spent across calls);
// the dominator tree is the cheaper way then.
std::optional<std::uint64_t> retained_by_removal(const ReferenceGraph& graph, const RetentionEdges& edges,
                                                 const HeapModel& heap, const LeakVerdicts& verdicts, BlockId b,
                                                 std::uint64_t* budget);

}  // namespace heapscope
