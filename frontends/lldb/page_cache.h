// PageCache: process memory in 4 KiB pages, fetched in bulk and kept for the life of one process stop.
//
// The engine reads memory word by word (chunk headers) and in 4 KiB buffers (the pointer scan), from
// several threads; each LLDB read is a round trip through the command's thread (base/serving_thread.h) and, for
// a live process, through lldb-server. So a miss fetches a whole stretch ahead (up to 256 KiB, within
// the region) in one read. Memory is bounded: two generations of pages, the older one dropped when the
// newer one fills (an approximate LRU that needs no bookkeeping on a hit).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "image/image.h"

namespace heapscope::lldb_plugin {

class PageCache {
 public:
  static constexpr std::size_t kPageSize = 4096;
  static constexpr std::size_t kReadAheadBytes = 256 * 1024;
  static constexpr std::size_t kDefaultCapacityBytes = std::size_t{512} << 20;

  // Copies up to len bytes at addr into out; returns how many leading bytes were readable.
  using Fetch = std::function<std::size_t(Address addr, void* out, std::size_t len)>;
  // Where a bulk read starting at addr must stop (the end of addr's region); addr itself when unknown.
  using StretchEnd = std::function<Address(Address addr)>;

  PageCache(Fetch fetch, StretchEnd stretch_end, std::size_t capacity_bytes = kDefaultCapacityBytes);

  // Thread-safe. Returns how many leading bytes of [addr, addr+len) are readable.
  std::size_t read(Address addr, void* out, std::size_t len);

 private:
  using PageBytes = std::array<std::byte, kPageSize>;
  struct Page {
    std::shared_ptr<const PageBytes> bytes;  // null when nothing of the page is readable
    std::size_t readable = 0;                // leading bytes of the page that are readable
  };
  using PageMap = std::unordered_map<std::uint64_t, Page>;

  Page page(std::uint64_t index);
  std::optional<Page> cached(std::uint64_t index);
  Page load(std::uint64_t index);
  void insert(std::uint64_t index, Page page);

  Fetch fetch_;
  StretchEnd stretch_end_;
  std::size_t pages_per_generation_;
  std::shared_mutex mutex_;  // guards the two maps
  PageMap newer_;
  PageMap older_;
  std::mutex fetch_mutex_;   // one bulk fetch at a time: they are served one by one anyway
};

}  // namespace heapscope::lldb_plugin
