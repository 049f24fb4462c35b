// ADDR arguments of `heap` commands as LLDB expressions: `heap retainers g_cache->head`,
// `heap refs (void*)0x55d0c0a012a0`, `heap describe &g_table[2]`, evaluated in the selected frame.
#pragma once

#include <lldb/API/LLDB.h>

#include <string>

#include "image/image.h"
#include "base/serving_thread.h"

namespace heapscope::lldb_plugin {

// A plain number (0x hex or decimal) is taken as is. Otherwise the expression's value: a pointer's or
// an integer's value, an object's (array, struct) address. Throws AnalysisError with LLDB's reason
// when the expression has no such value. Callable from any thread: LLDB runs on lldb_thread.
Address evaluate_address_expression(ServingThread& lldb_thread, lldb::SBFrame frame, lldb::SBTarget target,
                                    const std::string& text);

}  // namespace heapscope::lldb_plugin
