// The `report` command's result: the reports of summary, leaks, top, roots, fragmentation (and evolution
// when snapshots were saved) over one session, for one
// document (an HTML page with a section per part; text and JSON render each part with its own renderer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"
#include "reports/fragmentation_report.h"
#include "reports/retention_reports.h"
#include "reports/snapshot_reports.h"
#include "reports/summary_report.h"

namespace heapscope {

struct ReportBundle {
  SummaryReport summary;
  // Absent when the heap could not be analysed (summary.heap_error says why; so does a warning).
  std::optional<LeaksReport> leaks;
  std::optional<TopReport> top;
  std::optional<RootsReport> roots;
  std::optional<FragmentationReport> fragmentation;
  // Present when the session has saved snapshots (a debugger session's `snapshot save`, or the CLI's
  // `report CORE --earlier OLD…`): bytes per type over them and now.
  std::optional<EvolutionReport> evolution;
  // Present when the allocator's own sampling gave the blocks allocation sites: histogram --by site.
  std::optional<HistogramReport> sites;
  std::vector<std::string> warnings;  // every part's warnings, each once
};

}  // namespace heapscope
