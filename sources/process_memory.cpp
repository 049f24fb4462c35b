#include "sources/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace heapscope {

std::unique_ptr<ProcessMemory> ProcessMemory::open(int pid, int* error_number) {
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error_number) *error_number = errno;
    return nullptr;
  }
  std::unique_ptr<ProcessMemory> memory(new ProcessMemory());
  memory->fd_ = fd;
  memory->cache_ = std::make_unique<CacheLine[]>(kCacheLines);
  return memory;
}

ProcessMemory::~ProcessMemory() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t ProcessMemory::read(Address region_start, Address region_end, Address addr, void* out,
                                std::size_t len) const {
  if (addr < region_start || addr >= region_end) return 0;
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(len, region_end - addr));
  // Big reads (a block's words for the pointer scan) gain nothing from the cache and would evict it.
  return want >= kCacheLineSize / 4 ? read_direct(addr, out, want) : read_cached(region_start, region_end, addr, out, want);
}

std::size_t ProcessMemory::read_direct(Address addr, void* out, std::size_t len) const {
  auto* dst = static_cast<std::byte*>(out);
  std::size_t done = 0;
  while (done < len) {
    const ssize_t got = ::pread(fd_, dst + done, len - done, static_cast<off_t>(addr + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EIO: a page the kernel cannot supply (past the end of a mapped file, say)
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::size_t ProcessMemory::read_cached(Address region_start, Address region_end, Address addr, void* out,
                                       std::size_t len) const {
  auto* dst = static_cast<std::byte*>(out);
  std::size_t done = 0;
  while (done < len) {
    const Address at = addr + done;
    const Address aligned = at & ~Address{kCacheLineSize - 1};
    const Address line_start = std::max(aligned, region_start);
    const Address line_end = std::min(aligned + kCacheLineSize, region_end);
    CacheLine& line = cache_[(at / kCacheLineSize) % kCacheLines];
    std::lock_guard lock(line.mutex);
    if (at < line.start || at >= line.end) {
      if (!line.bytes) line.bytes = std::make_unique<std::byte[]>(kCacheLineSize);
      const std::size_t got = read_direct(line_start, line.bytes.get(), line_end - line_start);
      line.start = line_start;
      line.end = line_start + got;
      // An unreadable page before `at` cut the line short; `at` itself may still be readable.
      if (at >= line.end) return done + read_direct(at, dst + done, len - done);
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, line.end - at));
    std::memcpy(dst + done, line.bytes.get() + (at - line.start), n);
    done += n;
    if (done < len && line.end < line_end) break;  // the rest of the line is unreadable
  }
  return done;
}

std::size_t ProcessMemory::read_regions(const Image& image, Address addr, void* out, std::size_t len) const {
  const MemoryRegion* region = nullptr;
  return Image::read_piecewise(
      addr, out, len,
      [&](Address at) -> Address {
        region = image.region_at(at);
        return region && region->bytes_present ? region->end : 0;
      },
      [&](Address at, std::byte* dst, std::size_t want) { return read(region->start, region->end, at, dst, want); });
}

}  // namespace heapscope
