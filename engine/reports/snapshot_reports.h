// Reports of the snapshot commands: saved snapshots (snapshot save/list/drop/load), the difference
// between a snapshot and a later state (snapshot diff, heapscope diff), and the bytes per type over a
// series of snapshots (evolution, heapscope evolution).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope {

// Which snapshot a row of a report is about.
struct SnapshotInfo {
  std::string name;
  std::string target;  // the image's description: "core file c1.core (pid 42, server)"
  int pid = 0;
  std::int64_t capture_time_ns = 0;  // since the Unix epoch: a core's file time, a live process's stop
  std::uint64_t in_use_blocks = 0, in_use_bytes = 0;
  std::uint64_t types = 0, roots = 0;  // how many of each it has totals for
};

struct SnapshotReport {
  std::string action;  // "save", "load", "drop" or "list"
  std::string file;    // save --file, load: the JSON file written or read
  std::vector<SnapshotInfo> snapshots;  // the one saved, loaded or dropped; list: all, oldest first
  std::vector<std::string> warnings;
};

// Count and usable bytes of one type or root before and after, and the change.
struct DiffRow {
  std::string name;  // type name, or root label
  std::string kind;  // roots: root_kind_name(); empty for types
  std::uint64_t before_count = 0, before_bytes = 0, after_count = 0, after_bytes = 0;
  std::int64_t delta_count = 0, delta_bytes = 0;
};

// Blocks of one type that are at an address where the earlier snapshot had no block of that type and
// size (new), or that the earlier snapshot had and the later one has not (gone).
struct AddressDiffRow {
  std::string type;
  std::uint64_t new_count = 0, new_bytes = 0, gone_count = 0, gone_bytes = 0;
};

// A block new since the snapshot, with how it is held now.
struct NewBlockSample {
  BlockRef block;
  std::optional<RetainerPath> path;  // shortest path from a root; none for a block no root reaches
};

struct DiffReport {
  SnapshotInfo before, after;
  std::string by = "type";     // what `types` is by: "type", or "site" (allocation sites, estimated)
  std::vector<DiffRow> types;  // most byte growth first; at most -n of them
  std::vector<DiffRow> roots;  // likewise
  std::uint64_t type_count = 0, root_count = 0;  // rows before the -n cut
  // Same-address comparison, made when both states are of one process (same pid).
  bool addresses_compared = false;
  std::uint64_t new_blocks = 0, new_bytes = 0, gone_blocks = 0, gone_bytes = 0, kept_blocks = 0;
  std::vector<AddressDiffRow> new_by_type;  // most new bytes first; at most -n of them
  std::vector<NewBlockSample> samples;      // new blocks of the types with the largest net growth (--sample per type)
  std::vector<std::string> warnings;
};

// One type's bytes and counts at each point of an evolution.
struct EvolutionSeries {
  std::string type;
  std::vector<std::uint64_t> bytes, counts;  // one per point (0 where the type had no block)
  std::int64_t growth_bytes = 0;             // last point minus first
  bool steady = false;                       // grew at every step (docs/usage.md, evolution)
};

struct EvolutionReport {
  std::vector<SnapshotInfo> points;     // oldest first; the last is the current state
  std::string by;                       // "final" or "growth": how non-steady types were chosen; "site":
                                        // allocation sites (estimated bytes) rather than types, by growth
  std::vector<EvolutionSeries> series;  // steady growers first, then by `by`; at most -n of them
  std::uint64_t type_count = 0;         // types seen at any point
  std::vector<std::string> warnings;
};

}  // namespace heapscope
