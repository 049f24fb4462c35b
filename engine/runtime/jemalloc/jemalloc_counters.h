// jemalloc's own counters, summed over its arenas: what mallctl's stats.* report after an epoch bump, read
// from the arenas' statistics (a statistics build: Debian's). `summary` shows them beside the walk's
// counts of the same (docs/architecture.md, "Reconciling with jemalloc's own figures").
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "image/image.h"
#include "runtime/jemalloc/jemalloc_runtime.h"

namespace heapscope::jemalloc {

struct OwnCounters {
  std::uint64_t allocated = 0;  // stats.allocated: small regions handed out and large extents, at class sizes
  std::uint64_t slabs = 0;      // the bins' curslabs
  std::uint64_t dirty_pages = 0, muzzy_pages = 0, retained_pages = 0;
};

// Over `arenas` (index, arena_t), or nothing when an arena's statistics cannot be read.
std::optional<OwnCounters> read_own_counters(const Image& image, const Runtime& rt,
                                             const std::vector<std::pair<std::uint32_t, Address>>& arenas);

}  // namespace heapscope::jemalloc
