// Heap snapshots as JSON files (`snapshot save NAME --file PATH`, `snapshot load NAME PATH`): cores
// analysed on different machines, or debugger sessions on different days, become comparable.
// The format is documented in docs/json.md ("Snapshot files").
#pragma once

#include <string>

#include "queries/heap_snapshot.h"

namespace heapscope {

inline constexpr int kSnapshotFileVersion = 1;

// Throw AnalysisError naming the file and what is wrong with it.
void write_snapshot_file(const std::string& path, const HeapSnapshot& snapshot);
HeapSnapshot read_snapshot_file(const std::string& path);

}  // namespace heapscope
