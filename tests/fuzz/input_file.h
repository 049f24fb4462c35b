// The fuzzer's bytes as a file, for readers that take a path (the core reader, libelf, libdw): an
// anonymous memory file, named by its /proc/self/fd path, gone when this object is.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace heapscope::fuzz {

class InputFile {
 public:
  InputFile(const std::uint8_t* data, std::size_t size) : fd_(memfd_create("heapscope-fuzz", 0)) {
    for (std::size_t done = 0; fd_ >= 0 && done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
  ~InputFile() {
    if (fd_ >= 0) close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace heapscope::fuzz
