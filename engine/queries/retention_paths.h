#pragma once

#include <functional>
#include <optional>

#include "queries/block_refs.h"
#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

// The longest retainer path reports look for, in blocks.
inline constexpr std::size_t kDefaultPathDepth = 10000;

// Shortest paths from roots to block `target` — a pointer into a block's middle, a root's too, counting two
// and a half steps, so that paths through pointers to block starts are preferred — at most `max_paths` of
// them (each from a different root or through a different first block), none longer than `max_depth` blocks, their
// blocks named by `names`
// (every block on a path leads to the target: Session::names_for({target}) names them all).
RetainersReport find_retainers(Session& s, const BlockNames& names, RetainedSizes sizes, BlockId target,
                               Address query, std::size_t max_paths, std::size_t max_depth);

// Which root ranges a path may start at (all, when empty).
using RootFilter = std::function<bool(std::size_t root)>;

// One shortest path from a root (one `roots` allows) to `target` (as find_retainers chooses it); none when
// no such root reaches it within kDefaultPathDepth blocks. Its blocks are named by `names` (every block on
// it is reachable: Session::reachable_names() will do), or by Session::names().
std::optional<RetainerPath> shortest_retainer_path(Session& s, const BlockNames& names, BlockId target,
                                                  const RootFilter& roots = {});
std::optional<RetainerPath> shortest_retainer_path(Session& s, BlockId target);

// Every block and root that points into `target`.
RefsReport find_referrers(Session& s, BlockId target, Address query);

// The block, its state and verdict, its first bytes, the pointers it holds and, when DWARF types it, its
// first `max_fields` fields with their values.
DescribeReport describe_block(Session& s, BlockId target, Address query, std::size_t dump_bytes,
                              std::size_t max_fields);

}  // namespace heapscope
