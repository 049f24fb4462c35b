// heapscope's directory under the user's cache directory, and the bounds its caches keep: the index
// cache (session/index_cache.h) and the debug file cache (dwarf/debug_file_cache.h) each keep their files
// in a directory of their own, the newest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace heapscope {

// $HEAPSCOPE_CACHE_DIR if set, else $XDG_CACHE_HOME/heapscope, else ~/.cache/heapscope (empty when none of
// them can be made out).
std::string default_cache_dir();

// Removes the files of `dir` named *`extension` but the newest (by when they were last written) that fit
// `max_files` and `max_bytes`; `keep` (the one just written) stays whatever it takes. Temporary files
// (*`extension`.tmp.*) an hour old go too: writers that died left them.
void evict_cache_files(const std::string& dir, std::string_view extension, std::size_t max_files,
                       std::uint64_t max_bytes, const std::string& keep);

// Writes all of `bytes` to `fd`, again after an interrupted write; false (errno says why) when it cannot.
bool write_all(int fd, std::span<const std::byte> bytes);

}  // namespace heapscope
