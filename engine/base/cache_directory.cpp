#include "base/cache_directory.h"

#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace heapscope {

std::string default_cache_dir() {
  if (const char* dir = std::getenv("HEAPSCOPE_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/heapscope";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/heapscope";
  return {};
}

void evict_cache_files(const std::string& dir, std::string_view extension, std::size_t max_files,
                       std::uint64_t max_bytes, const std::string& keep) {
  namespace fs = std::filesystem;
  struct Entry {
    fs::path path;
    fs::file_time_type written;
    std::uint64_t bytes;
  };
  std::vector<Entry> files;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  const std::string temporary = std::string(extension) + ".tmp.";
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    const auto written = e.last_write_time(ec);
    if (ec) continue;
    const std::string name = p.filename().string();
    if (name.find(temporary) != std::string::npos) {
      if (now - written > std::chrono::hours(1)) fs::remove(p, ec);
      continue;
    }
    if (!name.ends_with(extension)) continue;
    files.push_back({p, written, static_cast<std::uint64_t>(e.file_size(ec))});
  }
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) { return a.written > b.written; });
  std::uint64_t total = 0;
  std::size_t kept = 0;
  for (const Entry& e : files) {
    const bool is_new = e.path == fs::path(keep);
    if (is_new || (kept < max_files && total + e.bytes <= max_bytes)) {
      total += e.bytes;
      ++kept;
    } else {
      fs::remove(e.path, ec);
    }
  }
}

bool write_all(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace heapscope
