#include "frontends/common/cache_settings.h"

#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "base/cache_directory.h"
#include "dwarf/debug_file_cache.h"

namespace heapscope {

bool turned_off(const char* name) {
  const char* value = std::getenv(name);
  return value && *value && std::string_view(value) != "0";
}

void use_debug_file_cache() {
  // Once: a debugger's later sessions read debug files (on worker threads) while a new one would set it.
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string dir = default_cache_dir();
    if (turned_off("HEAPSCOPE_NO_DEBUG_CACHE") || dir.empty()) return;
    DebugFileCache::set_process_dir(dir + "/debug");
  });
}

}  // namespace heapscope
