#include "frontends/common/target_keys.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace heapscope {

std::shared_ptr<SnapshotStore> snapshot_store_for(const std::string& target_key) {
  static auto* registry = new SnapshotRegistry();  // never destroyed: GDB may unload us at any time
  return registry->store_for(target_key);
}

std::string core_target_key(const std::string& core) {
  std::error_code ignored;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(core, ignored);
  return "core " + (canonical.empty() ? core : canonical.string());
}

// Field 22 of /proc/PID/stat, the process's start time: the command name before it may hold spaces, so
// the fields are counted from the last ')'.
std::string process_target_key(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::string start_time;
  if (const std::size_t close = text.rfind(')'); close != std::string::npos) {
    std::istringstream fields(text.substr(close + 1));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i)
      if (i == 22) start_time = field;
  }
  return "pid " + std::to_string(pid) + " started " + start_time;
}

}  // namespace heapscope
