#include "frontends/lldb/page_cache.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace heapscope::lldb_plugin {

PageCache::PageCache(Fetch fetch, StretchEnd stretch_end, std::size_t capacity_bytes)
    : fetch_(std::move(fetch)),
      stretch_end_(std::move(stretch_end)),
      pages_per_generation_(std::max<std::size_t>(capacity_bytes / kPageSize / 2, kReadAheadBytes / kPageSize)) {}

std::size_t PageCache::read(Address addr, void* out, std::size_t len) {
  auto* dest = static_cast<std::byte*>(out);
  std::size_t done = 0;
  while (done < len) {
    const Address at = addr + done;
    if (at < addr) break;  // wrapped around the address space
    const std::size_t offset = at % kPageSize;
    const Page p = page(at / kPageSize);
    if (offset >= p.readable) break;
    const std::size_t n = std::min(len - done, p.readable - offset);
    std::memcpy(dest + done, p.bytes->data() + offset, n);
    done += n;
    if (p.readable < kPageSize) break;  // the rest of this page is unreadable
  }
  return done;
}

PageCache::Page PageCache::page(std::uint64_t index) {
  if (auto hit = cached(index)) return *hit;
  std::lock_guard fetching(fetch_mutex_);
  if (auto hit = cached(index)) return *hit;  // another thread fetched it meanwhile
  return load(index);
}

std::optional<PageCache::Page> PageCache::cached(std::uint64_t index) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = newer_.find(index); it != newer_.end()) return it->second;
    if (older_.find(index) == older_.end()) return std::nullopt;
  }
  std::unique_lock lock(mutex_);
  auto it = older_.find(index);
  if (it == older_.end()) {  // moved to newer_ or dropped since the shared lock was released
    if (auto in_newer = newer_.find(index); in_newer != newer_.end()) return in_newer->second;
    return std::nullopt;
  }
  Page p = std::move(it->second);
  older_.erase(it);
  lock.unlock();
  insert(index, p);  // still in use: promote it
  return p;
}

// Fetches from the page at `index` up to the read-ahead limit and keeps every page that came back; the
// page at `index` is cached even when unreadable, so that a hole is asked about only once.
PageCache::Page PageCache::load(std::uint64_t index) {
  const Address start = index * kPageSize;
  Address end = std::min<Address>(stretch_end_(start), start + kReadAheadBytes);
  if (end <= start || end - start < kPageSize) end = start + kPageSize;
  end = start + (end - start) / kPageSize * kPageSize;
  std::vector<std::byte> buffer(end - start);
  const std::size_t got = fetch_(start, buffer.data(), buffer.size());
  Page first;
  for (std::size_t off = 0; off < buffer.size(); off += kPageSize) {
    const std::size_t readable = got > off ? std::min(kPageSize, got - off) : 0;
    if (readable == 0 && off > 0) break;  // pages after the first unreadable byte are asked about later
    Page p;
    p.readable = readable;
    if (readable > 0) {
      auto bytes = std::make_shared<PageBytes>();
      std::memcpy(bytes->data(), buffer.data() + off, readable);
      p.bytes = std::move(bytes);
    }
    if (off == 0) first = p;
    insert(index + off / kPageSize, std::move(p));
    if (readable < kPageSize) break;
  }
  return first;
}

void PageCache::insert(std::uint64_t index, Page page) {
  std::unique_lock lock(mutex_);
  if (newer_.size() >= pages_per_generation_) {
    older_ = std::move(newer_);
    newer_ = PageMap();
  }
  newer_[index] = std::move(page);
}

}  // namespace heapscope::lldb_plugin
