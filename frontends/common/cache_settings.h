// The environment's say over heapscope's caches, the same in every frontend.
#pragma once

namespace heapscope {

// Whether environment variable `name` turns something off: set, and to anything but "0".
bool turned_off(const char* name);

// Compressed debug files are read from uncompressed copies in the cache directory, made on first use
// (dwarf/debug_file_cache.h; docs/usage.md, "Debug file cache"), unless HEAPSCOPE_NO_DEBUG_CACHE=1 or no
// cache directory can be made out. Each frontend calls it before its first session (the CLI at start, the
// LLDB plugin when loaded, the C API when it opens a session); the first call decides for the process.
void use_debug_file_cache();

}  // namespace heapscope
