// Taking a heap snapshot of a session's current state (session/snapshot_store.h holds the data).
#pragma once

#include <string>

#include "session/session.h"
#include "session/snapshot_store.h"

namespace heapscope {

// The session's current state as a snapshot named `name`.
HeapSnapshot take_snapshot(Session& s, std::string name);

// For the commands over allocation sites (diff and evolution --by site): throws AnalysisError when the
// snapshot has none, naming it.
void require_sites(const HeapSnapshot& snapshot);

}  // namespace heapscope
