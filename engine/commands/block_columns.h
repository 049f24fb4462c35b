// The blocks a `blocks` command line selects, as columns rather than a report: for a frontend that hands
// the heap to a program (the Python module's Session.blocks) instead of printing it. The selection and the
// names are the `blocks` command's own (blocks_command.cpp): the same options, the same blocks, the same
// type names; only the output differs. Nothing here costs per block more than the column it fills: types
// and sites are computed only when asked for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/block_index.h"
#include "session/session.h"

namespace heapscope {

struct BlockSelection {
  std::vector<BlockId> blocks;  // indices into Session::heap().blocks, in address order
  std::uint64_t matched = 0;    // more than blocks.size() when --limit cut the list
  // Filled when the selection is by leak verdict (--state leaked|reachable|…): per block, its verdict
  // name and whether it is reachable only through interior pointers.
  std::vector<const char*> verdicts;
  std::vector<bool> possibly;
};

// `options` are the words after "blocks" (`--state used --min-size 64`); a bad option throws
// AnalysisError with the message the command would give.
BlockSelection select_blocks(Session& session, const std::vector<std::string>& options);

// Per block, an index into `names` (0: unknown, as `blocks` shows "unknown (N bytes)"); `namings[i]` is the
// evidence behind names[i]. Free blocks are unknown. The names are those `blocks` prints.
struct TypeColumn {
  std::vector<std::uint32_t> ids;
  std::vector<std::string> names{""};
  std::vector<std::string> namings;
};
TypeColumn block_type_column(Session& session, std::span<const BlockId> blocks);

// Per block, an index into `labels` (the allocation site's label as `histogram --by site` shows it), or -1
// for a block the allocator did not sample. Empty labels when the heap has no sites.
struct SiteColumn {
  std::vector<std::int32_t> ids;
  std::vector<std::string> labels;
};
SiteColumn block_site_column(Session& session, std::span<const BlockId> blocks);

}  // namespace heapscope
