#include "image/image.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace heapscope {

const char* register_name(Reg r) {
  static constexpr const char* kNames[] = {
      "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
      "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs"};
  const int i = static_cast<int>(r);
  return i >= 0 && i < static_cast<int>(Reg::count) ? kNames[i] : "?";
}

std::string vector_register_name(int reg, int lane) {
  return fmt::format("{}{}", lane < VectorRegisters::kXmmLanes ? "xmm" : "ymm", reg);
}

std::int64_t Image::capture_time_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WordRead Image::read_u64(Address addr) const {
  std::uint64_t v = 0;
  if (!read_exact(addr, &v, sizeof v)) return {};
  return v;
}

std::optional<std::uint32_t> Image::read_u32(Address addr) const {
  std::uint32_t v = 0;
  if (!read_exact(addr, &v, sizeof v)) return std::nullopt;
  return v;
}

std::optional<std::string> Image::read_c_string(Address addr, std::size_t max_len) const {
  std::string out;
  char chunk[64];
  while (out.size() < max_len) {
    const std::size_t got = read(addr + out.size(), chunk, sizeof chunk);
    if (got == 0) return std::nullopt;
    for (std::size_t i = 0; i < got; ++i) {
      if (chunk[i] == '\0') return out;
      out.push_back(chunk[i]);
    }
  }
  return std::nullopt;
}

const MemoryRegion* Image::region_at(Address addr) const {
  const auto& rs = regions();
  auto it = std::upper_bound(rs.begin(), rs.end(), addr,
                             [](Address a, const MemoryRegion& r) { return a < r.start; });
  if (it == rs.begin()) return nullptr;
  --it;
  return it->contains(addr) ? &*it : nullptr;
}

// Asked for every word of every block some passes read (is it a vtable, a function, a string literal?):
// a binary search, where a walk over a server's hundreds of modules cost more than the read itself.
const Module* Image::module_at(Address addr) const {
  const auto& ms = modules();
  auto it = std::upper_bound(ms.begin(), ms.end(), addr, [](Address a, const Module& m) { return a < m.start; });
  if (it == ms.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

const Module* Image::main_executable() const {
  for (const Module& m : modules())
    if (m.is_main_executable) return &m;
  return nullptr;
}

std::optional<std::uint64_t> auxv_lookup(const std::vector<AuxvEntry>& auxv, std::uint64_t type) {
  for (const AuxvEntry& e : auxv)
    if (e.type == type) return e.value;
  return std::nullopt;
}

std::optional<std::uint64_t> Image::auxv_value(std::uint64_t type) const { return auxv_lookup(auxv(), type); }

std::uint64_t missing_writable_bytes(const Image& image) {
  std::uint64_t missing = 0;
  for (const MemoryRegion& r : image.regions())
    if (r.readable && r.writable && !r.bytes_present) missing += r.size();
  return missing;
}

std::vector<std::uint32_t> threads_without_stack(const Image& image) {
  std::vector<std::uint32_t> tids;
  for (const ThreadState& t : image.threads()) {
    const MemoryRegion* r = image.region_at(t.sp());
    if (!r || !r->bytes_present) tids.push_back(t.tid);
  }
  return tids;
}

std::vector<std::string> modules_without_file(const Image& image) {
  std::vector<std::string> names;
  for (const Module& m : image.modules())
    if (m.file_on_disk.empty() && !m.path.starts_with("[")) names.emplace_back(m.name());  // not the vdso
  return names;
}

}  // namespace heapscope
