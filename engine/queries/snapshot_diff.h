// The difference between a heap snapshot and a later one: per type and per root, count and bytes before,
// after and the change, most growth first; and, when both are of one process, a comparison address by
// address: which blocks are new since the earlier snapshot and which are gone.
//
// Same-address rule: a block of the later snapshot is the same block as one of the earlier snapshot only
// when both are at the same address with the same chunk size and the same type name. An address freed and
// reused for something else (another size or type) holds a new block, and the old one counts as gone.
#pragma once

#include <cstddef>
#include <vector>

#include "queries/heap_snapshot.h"
#include "reports/snapshot_reports.h"
#include "session/session.h"

namespace heapscope {

inline constexpr std::size_t kDiffRows = 20;         // -n default
inline constexpr std::size_t kDiffSamplesPerType = 3;  // --sample default
inline constexpr std::size_t kSampledTypes = 3;       // new blocks are sampled from this many top types

struct DiffOptions {
  bool compare_addresses = false;  // both snapshots are of one process
  std::size_t count = kDiffRows;   // rows per table; 0: all
  std::size_t samples_per_type = kDiffSamplesPerType;
  bool by_site = false;  // the first table per allocation site (HeapSnapshot::sites) rather than per type
};

SnapshotInfo snapshot_info(const HeapSnapshot& s);

// The diff of two snapshots. With addresses compared, `sample_addresses` (may be null) receives up to
// samples_per_type new blocks of each of the kSampledTypes types with the most new bytes, in that order.
DiffReport diff_snapshots(const HeapSnapshot& before, const HeapSnapshot& after, const DiffOptions& options,
                          std::vector<Address>* sample_addresses);

// A saved snapshot against the session's current state (`now`, a snapshot of it): addresses are compared
// when both are of one process (same non-zero pid), and the sampled new blocks come with their shortest
// retainer path in the session.
DiffReport diff_with_current(Session& s, const HeapSnapshot& before, const HeapSnapshot& now, DiffOptions options);

}  // namespace heapscope
