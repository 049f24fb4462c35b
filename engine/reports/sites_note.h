// What the blocks' allocation sites are worth in a report: where they come from (the allocator's own
// sampling), at what rate, and, when there are none, how to have them.
#pragma once

#include <cstdint>
#include <string>

namespace heapscope {

struct SitesNote {
  bool present = false;      // some blocks have a site
  bool exact = false;        // every allocation was sampled: counts are exact
  std::string source;        // "jemalloc heap profiling (prof)"
  std::uint64_t mean_interval = 0;  // bytes between samples on average; 0 when unknown
  std::uint64_t blocks = 0;  // blocks with a site
  std::uint64_t sites = 0;   // distinct sites among them
  std::string sentence;      // one line for text output: how the sites count, or why there are none
  std::string summary;       // summary's line: "jemalloc heap profiling (prof), every allocation sampled: …"
};

}  // namespace heapscope
