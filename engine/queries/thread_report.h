// The `threads` report: per live thread, what its stack, registers and TLS keep alive (the root nodes of
// the dominator tree that belong to it); then the exited threads glibc still holds, and every heap block
// or root word that holds one of their pthread_t values (the reason nobody joined them).
#pragma once

#include <cstddef>

#include "reports/threads_report.h"
#include "session/session.h"

namespace heapscope {

// `max_depth`: longest retainer path searched for each heap block holding pthread_t values.
ThreadsReport build_threads_report(Session& s, std::size_t max_depth);

}  // namespace heapscope
