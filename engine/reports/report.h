// Every report a command can produce. A new command with a new kind of result adds its report type here
// and a renderer per format in formatters/.
#pragma once

#include <variant>

#include "reports/blocks_report.h"
#include "reports/chains_report.h"
#include "reports/coroutines_report.h"
#include "reports/finalizers_report.h"
#include "reports/fragmentation_report.h"
#include "reports/graph_reports.h"
#include "reports/report_bundle.h"
#include "reports/retention_reports.h"
#include "reports/snapshot_reports.h"
#include "reports/summary_report.h"
#include "reports/threads_report.h"
#include "reports/verify_report.h"

namespace heapscope {

using Report = std::variant<SummaryReport, BlocksReport, LeaksReport, RetainersReport, RefsReport, DescribeReport,
                            HistogramReport, TopReport, RootsReport, ThreadsReport, ChainsReport, CoroutinesReport,
                            FinalizersReport, ReportBundle, VerifyReport, FragmentationReport, SnapshotReport,
                            DiffReport, EvolutionReport>;

}  // namespace heapscope
