#pragma once

#include "reports/summary_report.h"
#include "session/session.h"

namespace heapscope {

// The process and heap overview of `summary` (and of `report`'s first part): threads, modules and where
// their symbols come from, the heap walk's arenas and totals, and how much of the heap carries a type.
// A heap that cannot be walked leaves heap_error set and the process part filled.
// `count_names`: also name every block and count the names by evidence (the "Typed" share) — the cost of
// naming the whole heap (a pointer scan and DWARF typing from the roots), which the rest of the summary,
// a walk of the heap, does not have.
SummaryReport build_summary_report(Session& s, bool count_names);

// The writable anonymous memory no walk accounts for (another allocator's arenas, a pool), per mapping.
OutsideMalloc outside_malloc(Session& s);

}  // namespace heapscope
