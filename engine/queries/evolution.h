// Evolution: bytes and counts per type over a series of snapshots (cores taken over time, or snapshots
// saved in a debugger session, then the current state), with the types that grow steadily flagged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "queries/heap_snapshot.h"
#include "reports/snapshot_reports.h"

namespace heapscope {

inline constexpr std::size_t kEvolutionTypes = 10;  // -n default

enum class EvolutionOrder { final_bytes, growth };
const char* evolution_order_name(EvolutionOrder by);  // "final", "growth"

// A type grows steadily when the series has at least three points (two steps) and its bytes are larger
// at every point than at the one before: one flat or shrinking step, or a single step, is not steady.
bool grows_steadily(std::span<const std::uint64_t> bytes);

// The `count` types to show (0: all): every steady grower first, most growth first; then the others by
// bytes at the last point (final_bytes) or by growth from the first point to the last (growth).
// `by_site`: the series are allocation sites (HeapSnapshot::sites), ordered by growth.
EvolutionReport build_evolution(std::span<const HeapSnapshot* const> points, EvolutionOrder by, std::size_t count,
                                bool by_site = false);

// The evolution of a session: every snapshot saved in its store, then its current state (named after the
// session's state name, or "now"). Warns when nothing was saved.
EvolutionReport build_session_evolution(Session& s, EvolutionOrder by, std::size_t count, bool by_site = false);

// What reports call a session's current state: the session's state name (the CLI names it after the core),
// or "now".
std::string current_state_name(const Session& s);

}  // namespace heapscope
