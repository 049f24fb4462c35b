// The `report` command's result: the reports of summary, leaks, top and roots over one session, for one
// document (an HTML page with a section per part; text and JSON render each part with its own renderer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"
#include "reports/retention_reports.h"
#include "reports/summary_report.h"

namespace heapscope {

struct ReportBundle {
  SummaryReport summary;
  // Absent when the heap could not be analysed (summary.heap_error says why; so does a warning).
  std::optional<LeaksReport> leaks;
  std::optional<TopReport> top;
  std::optional<RootsReport> roots;
  std::vector<std::string> warnings;  // every part's warnings, each once
};

}  // namespace heapscope
