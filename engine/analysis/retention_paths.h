#pragma once

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

// Shortest paths from roots to block `target`, at most `max_paths` of them (each from a different root
// or through a different first block), none longer than `max_depth` blocks.
RetainersReport find_retainers(Session& s, BlockId target, Address query, std::size_t max_paths,
                               std::size_t max_depth);

// Every block and root that points into `target`.
RefsReport find_referrers(Session& s, BlockId target, Address query);

// The block, its state and verdict, its first bytes and the pointers it holds.
DescribeReport describe_block(Session& s, BlockId target, Address query, std::size_t dump_bytes);

}  // namespace heapscope
