// ProcessMemory: a stopped local process's memory, read with pread(2) on /proc/PID/mem — what `heapscope
// attach` reads a process through, and what the LLDB plugin reads a live local process through instead
// of a round trip to lldb-server per read.
//
// Reads never cross the region they start in (the caller names it: unreadable gaps between regions are
// the caller's business). Small reads (chunk headers, one word at a time during the heap walk) go
// through a cache of 64 recently read 64 KiB stretches; big ones (a block's words for the pointer scan)
// are read directly, so as not to evict it. Thread-safe. Strictly read-only.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "image/image.h"

namespace heapscope {

class ProcessMemory {
 public:
  // Null with errno in *error_number when /proc/PID/mem cannot be opened.
  static std::unique_ptr<ProcessMemory> open(int pid, int* error_number);
  ~ProcessMemory();
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  // Copies up to len bytes at addr, which lies in the readable region [region_start, region_end), and
  // stops at the region's end or at the first page the kernel refuses; returns how many it copied.
  std::size_t read(Address region_start, Address region_end, Address addr, void* out, std::size_t len) const;
  // No cache, no region: pread until done or refused.
  std::size_t read_direct(Address addr, void* out, std::size_t len) const;
  // An image's read() over this memory: [addr, addr + len) through the readable regions `image` lists,
  // each read within its region, up to the first gap or refused page; returns how many bytes it copied.
  std::size_t read_regions(const Image& image, Address addr, void* out, std::size_t len) const;

 private:
  // One cached stretch of memory: at most kCacheLineSize bytes of one region, aligned to that size.
  struct CacheLine {
    std::mutex mutex;
    Address start = 0;
    Address end = 0;  // start == end: empty
    std::unique_ptr<std::byte[]> bytes;
  };
  static constexpr std::size_t kCacheLineSize = 64 * 1024;
  static constexpr std::size_t kCacheLines = 64;

  ProcessMemory() = default;
  std::size_t read_cached(Address region_start, Address region_end, Address addr, void* out, std::size_t len) const;

  int fd_ = -1;
  mutable std::unique_ptr<CacheLine[]> cache_;
};

}  // namespace heapscope
