// The environment's say over heapscope's caches, the same in every frontend.
#pragma once

#include <memory>
#include <string>

namespace heapscope {

// Whether environment variable `name` turns something off: set, and to anything but "0".
bool turned_off(const char* name);

// Compressed debug files are read from uncompressed copies in the cache directory, made on first use
// (dwarf/debug_file_cache.h; docs/usage.md, "Debug file cache"), unless HEAPSCOPE_NO_DEBUG_CACHE=1 or no
// cache directory can be made out; so are compressed cores (sources/compressed_core.h; docs/usage.md,
// "Compressed cores"), in a directory of their own bounded by HEAPSCOPE_CORE_CACHE_SIZE, unless
// HEAPSCOPE_NO_CORE_CACHE=1 (then each is decompressed into a temporary file). Each frontend calls it
// before its first session (the CLI at start, the LLDB plugin when loaded, the C API when it opens a
// session); the first call decides for the process. False with *error when HEAPSCOPE_CORE_CACHE_SIZE is
// no size (the caches are set up as without it).
bool use_file_caches(std::string* error = nullptr);

class IndexCache;
// The index cache of a core (docs/usage.md, "Index cache"), unless the frontend was told not to use one
// (`wanted` false: --no-cache, cache=False), HEAPSCOPE_NO_CACHE=1, or no cache directory can be made out.
std::shared_ptr<IndexCache> index_cache_for(const std::string& core, bool wanted);

}  // namespace heapscope
