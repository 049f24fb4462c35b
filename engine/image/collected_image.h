// CollectedImage: an Image whose process facts (regions, threads, modules, auxv, warnings) are gathered
// once, when the source opens the process; each source derives from it and supplies the memory reads.
#pragma once

#include "image/image.h"

namespace heapscope {

class CollectedImage : public Image {
 public:
  const std::vector<MemoryRegion>& regions() const override { return regions_; }
  const std::vector<ThreadState>& threads() const override { return threads_; }
  const std::vector<Module>& modules() const override { return modules_; }
  const std::vector<AuxvEntry>& auxv() const override { return auxv_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }

 protected:
  std::vector<MemoryRegion> regions_;  // sorted by start, non-overlapping
  std::vector<ThreadState> threads_;
  std::vector<Module> modules_;
  std::vector<AuxvEntry> auxv_;
  std::vector<std::string> warnings_;
};

}  // namespace heapscope
