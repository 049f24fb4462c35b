// Fragmentation census of an arena heap: how full each page and 64 KiB region is, what trimming would
// give back to the system, and which live blocks stand in the way. One pass over the blocks; pages are
// counted with running counters (a heap of many GB has millions of them), never a per-page table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/block_index.h"
#include "heap/heap_model.h"
#include "heap/trim_model.h"
#include "reports/fragmentation_report.h"
#include "session/session.h"

namespace heapscope {

inline constexpr std::uint64_t kFragmentationPageBytes = 4096;
inline constexpr std::uint64_t kFragmentationRegionBytes = 64 * 1024;
inline constexpr std::size_t kDefaultFragmentationSamples = 3;
inline constexpr std::size_t kDefaultTrimBlockers = 5;
inline constexpr std::size_t kDefaultFragmentationTypeRows = 10;

// The bucket of a granule `live` of whose `bytes` bytes are used: 0 for 0–10 % (10 % included), k for
// (10k %, 10(k+1) %].
int fill_bucket(std::uint64_t live, std::uint64_t bytes);

// Counts the granules (pages or regions) of address ranges by how full live blocks make them. Ranges are
// fed in increasing address order, live pieces in increasing order within their range; granules no live
// piece touches are counted in bulk, whole granules inside one block too, so the cost is per block.
class OccupancyCounter {
 public:
  // Called for every block smaller than a granule given to add_live whose first byte lies in a granule that
  // ends up in bucket 0 (a larger block's ends are its own placement, not a small block among free ones).
  using SparseSink = std::function<void(BlockId)>;

  explicit OccupancyCounter(std::uint64_t granule_bytes, SparseSink sparse = nullptr);

  void begin_range(Address start, Address end);
  void add_live(Address start, Address end, BlockId block = kNoBlock);
  void end_range();

  const FillBuckets& buckets() const { return buckets_; }
  std::uint64_t granules() const;

 private:
  std::uint64_t index_of(Address a) const { return a / granule_; }
  void move_to(std::uint64_t granule);  // closes the current granule and counts untouched ones before `granule`
  void close_current();

  std::uint64_t granule_;
  SparseSink sparse_;
  Address range_start_ = 0, range_end_ = 0;
  std::uint64_t current_ = 0;      // granule index being filled
  std::uint64_t current_live_ = 0;
  std::vector<BlockId> current_blocks_;  // blocks starting in the current granule (only with a sink)
  bool open_ = false;
  FillBuckets buckets_{};
};

// One arena's numbers, and what its allocator's trimming would return (`trim`, the allocator's
// arena_trim: absent when it has no trimming rules) with the blockers' block ids in `blocker_ids`; the
// blockers' types and paths are left empty.
ArenaFragmentation arena_fragmentation(const HeapModel& heap, std::size_t arena, const std::optional<ArenaTrim>& trim,
                                       std::vector<BlockId>* blocker_ids);

// The page and region histograms of every arena heap; `sparse` gets each live block that starts in a page
// at most 10 % used.
void count_occupancy(const HeapModel& heap, OccupancyCounter& pages, OccupancyCounter& regions);

FragmentationReport build_fragmentation_report(Session& s, std::size_t type_rows, std::size_t samples,
                                               std::size_t max_blockers);

}  // namespace heapscope
