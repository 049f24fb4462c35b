// Which distribution package would give a module its debug information, for the hint `summary` prints
// next to a module without DWARF. Debian only: dpkg names the package that installed the module's file;
// glibc's libraries have theirs in libc6-dbg, every other package's are in <package>-dbgsym (Debian's
// debug archive).
#pragma once

#include <string>
#include <vector>

namespace heapscope {

// For each of `module_paths`: "apt install libc6-dbg", "apt install libstdc++6-dbgsym", or empty when no
// package owns it on this machine (or dpkg is not there). Runs `dpkg -S` at most once per call, for the
// paths not asked about before (cached per path); thread-safe.
std::vector<std::string> debug_package_hints(const std::vector<std::string>& module_paths);

}  // namespace heapscope
