// Files fetched by build-id from the debuginfod servers the environment names, through libdebuginfod
// (elfutils): separate debug files, and the executables and libraries of a core from another machine.
// libdebuginfod reads DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT and its other variables
// itself; a file fetched once comes from its cache afterwards, with no request.
//
// One client serves the whole process: when the servers cannot be reached (offline, a wrong URL, a
// timeout), that is said once and no further request is made while DEBUGINFOD_URLS stays the same, so a
// machine without network pays for one failed connection, not one per module.
#pragma once

#include <string>

namespace heapscope {

enum class DebuginfodFile { debuginfo, executable };

struct DebuginfodFetch {
  std::string path;     // the file in the cache; empty when nothing was fetched
  std::string warning;  // set (once per process) when the servers could not be asked
};

// True when DEBUGINFOD_URLS names at least one server (as gdb: no URLs, no lookups).
bool debuginfod_configured();

// Fetches `kind` for the hex `build_id`; `what` names the module in the progress line ("libfoo.so.1").
// While a download runs and stderr is a terminal, a progress line shows on it. Thread-safe. Throws
// Interrupted when the current thread's Progress (base/progress.h) is asked to stop while it runs.
DebuginfodFetch debuginfod_fetch(DebuginfodFile kind, const std::string& build_id, const std::string& what);

}  // namespace heapscope
