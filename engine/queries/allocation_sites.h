// Allocation sites in reports: a block's "allocated at", and the heap's blocks tallied by site (histogram
// --by site, leaks --by site), from the session's provenance (model/provenance.h).
#pragma once

#include <optional>

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

// How many of a site's frames a report shows unless asked for the whole stack (--stack).
inline constexpr std::size_t kSiteFramesShown = 5;

// The block's site, with its first `max_frames` frames (all when 0); none when it was not sampled.
std::optional<AllocatedAt> allocated_at(Session& s, BlockId block, std::size_t max_frames = kSiteFramesShown);
AllocatedAt site_ref(const Provenance& p, std::uint32_t site, std::size_t max_frames = kSiteFramesShown);

// Where the sites come from and how they count, with one sentence for text output.
SitesNote sites_note(const Provenance& p);
// Why a block has no site: sampling is off, the allocator records none, or this block was not sampled.
std::string no_site_reason(const Provenance& p, const Block& block);

// Allocated blocks by allocation site (the blocks without one in a row of their own). Throws AnalysisError
// saying how to turn sampling on when no block has a site.
HistogramReport histogram_by_site(Session& s, std::size_t examples);
// Leaked blocks by allocation site, likewise.
LeaksReport leaks_by_site(Session& s, std::size_t examples);

}  // namespace heapscope
