// Fragmentation census of an arena heap: how full each page and 64 KiB region is, what trimming would
// give back to the system, and which live blocks stand in the way. One pass over the blocks; pages are
// counted with running counters (a heap of many GB has millions of them), never a per-page table.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/block_index.h"
#include "heap/heap_model.h"
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
  // Called for every block given to add_live whose first byte lies in a granule that ends up in bucket 0.
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

// What glibc's trimming returns from a top chunk of `top_bytes` keeping `pad` bytes (systrim, heap_trim):
// whole pages beyond pad + MINSIZE.
std::uint64_t trimmable_top_bytes(std::uint64_t top_bytes, std::uint64_t pad, std::uint64_t page_bytes);

// Whole pages malloc_trim(0) madvises inside one free chunk (glibc's mtrim: from the first page boundary
// past the chunk's bin pointers to the chunk's end).
std::uint64_t madvisable_bytes(Address chunk, std::uint64_t chunk_bytes, std::uint64_t page_bytes);

// One arena's numbers and trim blockers (types and paths left empty; `blockers` at most `max_blockers`).
// `trim` defaults to glibc's own defaults when the heap does not know it.
ArenaFragmentation arena_fragmentation(const HeapModel& heap, std::size_t arena, const TrimSettings& trim,
                                       std::size_t max_blockers, std::vector<BlockId>* blocker_ids);

// The page and region histograms of every arena heap; `sparse` gets each live block that starts in a page
// at most 10 % used.
void count_occupancy(const HeapModel& heap, OccupancyCounter& pages, OccupancyCounter& regions);

FragmentationReport build_fragmentation_report(Session& s, std::size_t type_rows, std::size_t samples,
                                               std::size_t max_blockers);

}  // namespace heapscope
