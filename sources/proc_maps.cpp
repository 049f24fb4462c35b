#include "sources/proc_maps.h"

#include <cstdio>
#include <cstring>

namespace heapscope {

namespace {

// The kernel serves [vvar] (clock data) from pages /proc/PID/mem refuses to read; gcore leaves it out too.
bool kernel_refuses_reads(const std::string& name) { return name.rfind("[vvar", 0) == 0 || name == "[vsyscall]"; }

}  // namespace

std::optional<MapsLine> parse_maps_line(const std::string& line) {
  unsigned long long start = 0, end = 0, offset = 0, inode = 0;
  char perms[8] = {};
  int name_pos = 0;
  if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &offset, &inode, &name_pos) < 5)
    return std::nullopt;
  if (start >= end || std::strlen(perms) < 3) return std::nullopt;
  MapsLine m;
  m.region.start = start;
  m.region.end = end;
  m.region.readable = perms[0] == 'r';
  m.region.writable = perms[1] == 'w';
  m.region.executable = perms[2] == 'x';
  if (name_pos > 0 && static_cast<std::size_t>(name_pos) <= line.size()) m.name = line.substr(name_pos);
  m.region.bytes_present = m.region.readable && !kernel_refuses_reads(m.name);
  if (!m.name.empty() && m.name.front() == '/') {
    m.region.backing_path = m.name;
    m.region.file_offset = offset;
  }
  return m;
}

}  // namespace heapscope
