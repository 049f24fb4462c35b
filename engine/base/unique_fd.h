// A file descriptor closed when it goes out of scope: the caches' writers and readers open and hand on
// descriptors along paths that may fail at any step.
#pragma once

#include <unistd.h>

#include <utility>

namespace heapscope {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  // The descriptor, no longer closed here.
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

}  // namespace heapscope
