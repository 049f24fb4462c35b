#include "frontends/common/cache_settings.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>

#include "base/cache_directory.h"
#include "dwarf/debug_file_cache.h"
#include "session/index_cache.h"
#include "sources/compressed_core.h"

#include <fmt/format.h>

namespace heapscope {

bool turned_off(const char* name) {
  const char* value = std::getenv(name);
  return value && *value && std::string_view(value) != "0";
}

bool use_file_caches(std::string* error) {
  // Once: a debugger's later sessions read debug files (on worker threads) while a new one would set it.
  static std::once_flag once;
  static std::string size_error;
  std::call_once(once, [] {
    const std::string dir = default_cache_dir();
    if (!turned_off("HEAPSCOPE_NO_DEBUG_CACHE") && !dir.empty()) DebugFileCache::set_process_dir(dir + "/debug");
    std::uint64_t max_bytes = CoreCopyCache::kDefaultMaxBytes;
    if (const char* size = std::getenv("HEAPSCOPE_CORE_CACHE_SIZE"); size && *size) {
      if (std::optional<std::uint64_t> parsed = parse_byte_size(size))
        max_bytes = *parsed;
      else
        size_error = fmt::format("HEAPSCOPE_CORE_CACHE_SIZE={} is no size (say 32G, 500M or a number of bytes); "
                                 "the core copy cache keeps its default bound", size);
    }
    const bool copies = !turned_off("HEAPSCOPE_NO_CORE_CACHE") && !dir.empty();
    CoreCopyCache::set_process(CoreCopyCache(copies ? dir + "/cores" : std::string(), max_bytes));
  });
  if (error) *error = size_error;
  return size_error.empty();
}

std::shared_ptr<IndexCache> index_cache_for(const std::string& core, bool wanted) {
  const std::string dir = default_cache_dir();
  if (!wanted || turned_off("HEAPSCOPE_NO_CACHE") || dir.empty()) return nullptr;
  return std::make_shared<IndexCache>(core, dir);
}

}  // namespace heapscope
