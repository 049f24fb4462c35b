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

  // Before the image is used: a thread's pointer (fs_base) its source could not read, found by its
  // opener elsewhere (glibc's thread list: frontends/common/thread_pointers.h); and what could not be.
  void set_thread_pointer(std::size_t thread, Address fs_base) {
    threads_.at(thread).regs[static_cast<int>(Reg::fs_base)] = fs_base;
  }
  void add_warning(std::string warning) { warnings_.push_back(std::move(warning)); }

 protected:
  std::vector<MemoryRegion> regions_;  // sorted by start, non-overlapping
  std::vector<ThreadState> threads_;
  std::vector<Module> modules_;
  std::vector<AuxvEntry> auxv_;
  std::vector<std::string> warnings_;
};

}  // namespace heapscope
