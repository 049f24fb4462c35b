#include "frontends/lldb/core_file_memory.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "sources/core_segments.h"
#include "sources/proc_maps.h"

namespace heapscope::lldb_plugin {

std::unique_ptr<CoreFileMemory> CoreFileMemory::open(const std::string& path) {
  std::unique_ptr<ElfFile> file = ElfFile::open(path, nullptr);
  if (!file || !file->is_core()) return nullptr;
  auto memory = std::unique_ptr<CoreFileMemory>(new CoreFileMemory());
  for (const CoreSegment& s : core_segments(*file))
    if (!s.present.empty()) memory->segments_.push_back({s.start, s.start + s.present.size(), s.present.data()});
  memory->file_ = std::move(file);
  return memory;
}

std::span<const std::byte> CoreFileMemory::bytes_at(Address addr) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), addr,
                             [](Address a, const Segment& s) { return a < s.start; });
  if (it == segments_.begin()) return {};
  --it;
  if (addr >= it->end) return {};
  return {it->data + (addr - it->start), static_cast<std::size_t>(it->end - addr)};
}

std::size_t CoreFileMemory::read(Address addr, void* out, std::size_t len) const {
  return Image::read_piecewise(
      addr, out, len, [&](Address at) -> Address { return at + bytes_at(at).size(); },
      [&](Address at, std::byte* dst, std::size_t n) {
        std::memcpy(dst, bytes_at(at).data(), n);
        return n;
      });
}

std::vector<std::string> mapped_core_files() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> cores;
  std::set<std::string> seen;
  for (std::string line; std::getline(maps, line);) {
    const std::optional<MapsLine> m = parse_maps_line(line);
    if (!m || m->region.backing_path.empty() || !seen.insert(m->region.backing_path).second) continue;
    // The ELF header, not the whole file: most mappings are libraries.
    std::ifstream file(m->region.backing_path, std::ios::binary);
    unsigned char header[EI_NIDENT + 2] = {};
    if (!file.read(reinterpret_cast<char*>(header), sizeof header)) continue;
    const bool elf = header[EI_MAG0] == ELFMAG0 && header[EI_MAG1] == ELFMAG1 && header[EI_MAG2] == ELFMAG2 &&
                     header[EI_MAG3] == ELFMAG3;
    const unsigned type = header[EI_DATA] == ELFDATA2LSB ? header[EI_NIDENT] | header[EI_NIDENT + 1] << 8 : 0;
    if (elf && type == ET_CORE) cores.push_back(m->region.backing_path);
  }
  return cores;
}

}  // namespace heapscope::lldb_plugin
