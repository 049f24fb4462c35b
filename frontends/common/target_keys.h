// What outlives each stop's session, kept per target by the frontends that open sessions themselves (the C
// API, the Python module): named snapshots, found again by a key naming the target — a core by its
// canonical path, a live process by its pid and start time (so that a later process reusing the pid
// starts empty).
#pragma once

#include <memory>
#include <string>

#include "session/snapshot_store.h"

namespace heapscope {

std::string core_target_key(const std::string& core);
std::string process_target_key(int pid);

// The one store of the process for `target_key`, never destroyed (a debugger may unload its frontend's
// library at any time).
std::shared_ptr<SnapshotStore> snapshot_store_for(const std::string& target_key);

}  // namespace heapscope
