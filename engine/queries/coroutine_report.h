// The coroutines command's analysis: frames per coroutine function and, on request, the async stacks the
// promises' continuation handles link them into.
#pragma once

#include "reports/coroutines_report.h"
#include "session/session.h"

namespace heapscope {

CoroutinesReport build_coroutines_report(Session& s, bool with_stacks, std::size_t limit);

}  // namespace heapscope
