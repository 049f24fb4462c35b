#pragma once

#include <cstdint>
#include <string>

namespace heapscope {

// How much of what a report covers is named, and by which evidence (types/naming.h's names).
struct NamingShare {
  std::string naming;  // "dwarf", "symbol", "rtti", "vtable", "pattern", "inferred", "content", "none"
  std::uint64_t blocks = 0, bytes = 0;
};

}  // namespace heapscope
