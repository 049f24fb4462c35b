// Counts blocks and bytes per naming evidence, for the shares `summary` and `leaks` report.
#pragma once

#include <array>
#include <vector>

#include "reports/naming_share.h"
#include "types/naming.h"

namespace heapscope {

class NamingTally {
 public:
  void add(Naming naming, std::uint64_t bytes) {
    NamingShare& share = by_naming_[static_cast<std::size_t>(naming)];
    ++share.blocks;
    share.bytes += bytes;
  }
  // Another tally's blocks (a slice's, tallied on a worker of its own).
  void add(const NamingTally& other) {
    for (std::size_t n = 0; n < kNamingCount; ++n) {
      by_naming_[n].blocks += other.by_naming_[n].blocks;
      by_naming_[n].bytes += other.by_naming_[n].bytes;
    }
  }

  // The evidences with blocks, most reliable first, "none" (Naming's first value) last.
  std::vector<NamingShare> shares() const {
    std::vector<NamingShare> out;
    for (std::size_t n = 1; n <= kNamingCount; ++n) {
      NamingShare share = by_naming_[n % kNamingCount];
      if (share.blocks == 0) continue;
      share.naming = naming_name(static_cast<Naming>(n % kNamingCount));
      out.push_back(share);
    }
    return out;
  }

 private:
  std::array<NamingShare, kNamingCount> by_naming_{};
};

}  // namespace heapscope
