// Which distribution package would give a module its debug information, for the hint `summary` prints
// next to a module without DWARF. Debian only: dpkg names the package that installed the module's file;
// glibc's libraries have theirs in libc6-dbg, every other package's are in <package>-dbgsym (Debian's
// debug archive).
#pragma once

#include <string>

namespace heapscope {

// "apt install libc6-dbg", "apt install libstdc++6-dbgsym", or empty when no package owns `module_path`
// on this machine (or dpkg is not there). Cached per path; thread-safe.
std::string debug_package_hint(const std::string& module_path);

}  // namespace heapscope
