// The retention commands' reports, from the session's dominator tree (model/retention.h).
#pragma once

#include <cstddef>

#include "reports/retention_reports.h"
#include "session/session.h"

namespace heapscope {

enum class TopBy { block, type, site, root };
const char* top_by_name(TopBy by);  // "block", "type", "site", "root"

// Suspects, in the manner of Eclipse MAT's leak suspects:
//   - big retainers: the outermost roots and blocks retaining at least this share of the in-use heap
//     (outermost: a block under a root that retains as much is not listed again);
//   - accumulations: blocks of one type whose nearest dominator of another type is the same node, at
//     least kAccumulationInstances of them, or kBigRetainerShare of the heap's bytes in at least
//     kAccumulationMinInstances of them (one big buffer is a big retainer, not a pile).
inline constexpr double kBigRetainerShare = 0.10;
inline constexpr std::uint64_t kAccumulationInstances = 1000;
inline constexpr std::uint64_t kAccumulationMinInstances = 10;
inline constexpr std::size_t kMaxAccumulationSuspects = 10;
inline constexpr std::size_t kRetainedTypesPerSuspect = 5;

// A node's retained bytes and blocks, and their share of the in-use heap.
Retained retained_of(const Retention& r, std::uint32_t node);
// A retained size made of `bytes` in `blocks` (a sum of nodes, or what is left of one), with its share of
// the in-use heap.
Retained retained_total(const Retention& r, std::uint64_t bytes, std::uint64_t blocks);
// In-use and reachable totals of the heap.
HeapTotals heap_totals(const Retention& r);

// The `count` largest retainers by block, by type, by allocation site or by root, and the suspects.
TopReport build_top_report(Session& s, TopBy by, std::size_t count);

// Retained bytes per root kind, then per root (the `count` largest; 0: all).
RootsReport build_roots_report(Session& s, std::size_t count);

}  // namespace heapscope
