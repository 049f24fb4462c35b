// Report of the verify command: problems found in the allocator's own structures (heap/heap_check.h).
#pragma once

#include <string>
#include <vector>

#include "heap/heap_check.h"

namespace heapscope {

struct VerifyReport {
  std::string allocator;  // "glibc"
  std::string version;    // "2.36", or empty when unknown
  HeapVerification result;
  std::vector<std::string> warnings;
};

}  // namespace heapscope
