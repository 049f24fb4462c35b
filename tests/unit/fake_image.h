// An Image held in memory, for unit tests of code above the image layer: regions are byte vectors the
// test writes words into.
#pragma once

#include <algorithm>
#include <cstring>
#include <span>
#include <map>
#include <vector>

#include "image/image.h"

namespace heapscope::testing {

class FakeImage : public Image {
 public:
  // Adds a zero-filled, readable and writable anonymous region.
  void add_region(Address start, std::size_t size, std::string backing = {}) {
    MemoryRegion r;
    r.start = start;
    r.end = start + size;
    r.readable = r.writable = true;
    r.bytes_present = true;
    r.backing_path = std::move(backing);
    regions_.push_back(r);
    std::sort(regions_.begin(), regions_.end(), [](auto& a, auto& b) { return a.start < b.start; });
    bytes_[start] = std::vector<std::byte>(size);
  }
  // Changes the permissions of the region at `start` (as mprotect would: a read-only or PROT_NONE piece
  // of a split mapping).
  void protect(Address start, bool readable, bool writable) {
    for (MemoryRegion& r : regions_)
      if (r.start == start) r.readable = readable, r.writable = writable;
  }
  // Adds a read-only executable region and a module covering it (code a function pointer may land in).
  void add_code(Address start, std::size_t size, std::string module_path) {
    add_region(start, size, module_path);
    for (MemoryRegion& r : regions_)
      if (r.start == start) r.executable = true, r.writable = false;
    Module m;
    m.path = std::move(module_path);
    m.start = start;
    m.end = start + size;
    modules_.push_back(m);
    std::sort(modules_.begin(), modules_.end(), [](auto& a, auto& b) { return a.start < b.start; });
  }
  void put(Address addr, std::uint64_t value) {
    auto& [start, mem] = *std::prev(bytes_.upper_bound(addr));
    std::memcpy(mem.data() + (addr - start), &value, 8);
  }
  // The bytes of the region at `start`; fill() overwrites them from the front (as far as `data` goes).
  const std::vector<std::byte>& bytes_of(Address start) const { return bytes_.at(start); }
  void fill(Address start, std::span<const std::byte> data) {
    std::vector<std::byte>& mem = bytes_.at(start);
    std::memcpy(mem.data(), data.data(), std::min(mem.size(), data.size()));
  }
  // A chunk header: prev_size then size|flags.
  void chunk(Address c, std::uint64_t size_with_flags, std::uint64_t prev_size = 0) {
    put(c, prev_size);
    put(c + 8, size_with_flags);
  }
  void set_register(std::size_t thread, Reg reg, std::uint64_t value) { threads_.at(thread).regs[static_cast<int>(reg)] = value; }
  void add_thread(std::uint32_t tid, Address fs_base, Address sp) {
    ThreadState t;
    t.tid = tid;
    t.regs[static_cast<int>(Reg::fs_base)] = fs_base;
    t.regs[static_cast<int>(Reg::rsp)] = sp;
    threads_.push_back(t);
  }

  ThreadState& thread_state(std::size_t index) { return threads_.at(index); }

  const std::vector<MemoryRegion>& regions() const override { return regions_; }
  const std::vector<ThreadState>& threads() const override { return threads_; }
  const std::vector<Module>& modules() const override { return modules_; }
  const std::vector<AuxvEntry>& auxv() const override { return auxv_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  std::string description() const override { return "fake image"; }

  std::size_t read(Address addr, void* out, std::size_t len) const override {
    auto it = bytes_.upper_bound(addr);
    if (it == bytes_.begin()) return 0;
    --it;
    const auto& [start, mem] = *it;
    if (addr >= start + mem.size()) return 0;
    const std::size_t n = std::min<std::size_t>(len, start + mem.size() - addr);
    std::memcpy(out, mem.data() + (addr - start), n);
    return n;
  }
  std::span<const std::byte> view(Address addr, std::size_t len) const override {
    auto it = bytes_.upper_bound(addr);
    if (it == bytes_.begin()) return {};
    --it;
    const auto& [start, mem] = *it;
    if (addr < start || addr + len > start + mem.size()) return {};
    return {mem.data() + (addr - start), len};
  }

 private:
  std::vector<MemoryRegion> regions_;
  std::map<Address, std::vector<std::byte>> bytes_;
  std::vector<ThreadState> threads_;
  std::vector<Module> modules_;
  std::vector<AuxvEntry> auxv_;
  std::vector<std::string> warnings_;
};

}  // namespace heapscope::testing
