// /proc/PID/maps, line by line: what a live process's image lists as its regions, and where the LLDB
// plugin finds the core file LLDB has mapped (its own /proc/self/maps).
#pragma once

#include <optional>
#include <string>

#include "image/image.h"

namespace heapscope {

struct MapsLine {
  MemoryRegion region;
  std::string name;  // path, "[heap]", "[vdso]"..., or empty for anonymous memory
};

// One line of /proc/PID/maps: "start-end perms offset dev inode [name]". The name may contain spaces.
// Nullopt for a line that does not read so.
std::optional<MapsLine> parse_maps_line(const std::string& line);

}  // namespace heapscope
