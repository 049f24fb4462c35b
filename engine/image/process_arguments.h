// The arguments a process was started with, read from its image (a core's, a live process's alike).
#pragma once

#include <string>

#include "image/image.h"

namespace heapscope {

// The process's arguments as its first stack holds them, joined by spaces: what /proc/PID/cmdline reads,
// untruncated where a core's process note keeps 80 bytes (and a gdb core's only the program's path). The
// argv pointers lie below the auxiliary vector (after envp's), argc below them; the stack is the mapping
// that holds the program's file name (AT_EXECFN). Empty when the image lacks that stack top or its auxv.
std::string command_line_in_memory(const Image& image);

}  // namespace heapscope
