#pragma once

#include "reports/graph_reports.h"
#include "session/session.h"

namespace heapscope {

// Leaked blocks grouped by type, then usable size; groups sorted by bytes. `examples` per group at most.
LeaksReport build_leaks_report(Session& s, std::size_t examples);

// Allocated blocks by type: count and bytes, live and leaked.
// Allocated blocks grouped by type name, or (`by` "source") by where DWARF says their type was declared;
// each row with the addresses of its first `examples` blocks.
HistogramReport build_histogram(Session& s, const std::string& by = "type", std::size_t examples = 3);

}  // namespace heapscope
