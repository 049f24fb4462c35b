#include "dwarf/debug_file_cache.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "base/cache_directory.h"
#include "base/unique_fd.h"

namespace heapscope {

namespace {

constexpr char kMagic[8] = {'h', 's', 'd', 'b', 'g', 'c', 'p', '1'};
constexpr std::string_view kExtension = ".debug";

// The last bytes of a copy.
struct Trailer {
  char magic[8];
  std::uint64_t device, inode, size, mtime_ns;  // the compressed file's identity
  std::uint64_t image_size;                      // the bytes before the trailer
  std::uint32_t crc;                             // CRC-32 of those bytes
  std::uint32_t reserved;
};

// A debug file's identity: what names its copy, and what the copy's trailer repeats.
struct Identity {
  std::uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0;
};

bool identify(int fd, Identity* out) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out->device = st.st_dev;
  out->inode = st.st_ino;
  out->size = static_cast<std::uint64_t>(st.st_size);
  out->mtime_ns = static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
  return true;
}

std::string copy_path(const std::string& dir, const Identity& id) {
  return fmt::format("{}/{:x}-{:x}-{:x}-{:x}{}", dir, id.device, id.inode, id.size, id.mtime_ns, kExtension);
}

// Whether the copy open at `fd` is whole and of the file `id` names: its trailer, then its CRC.
bool whole_copy_of(int fd, const Identity& id) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Trailer))) return false;
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return false;
  Trailer t;
  std::memcpy(&t, static_cast<const char*>(map) + size - sizeof t, sizeof t);
  const bool whole = std::memcmp(t.magic, kMagic, sizeof kMagic) == 0 && t.device == id.device &&
                     t.inode == id.inode && t.size == id.size && t.mtime_ns == id.mtime_ns &&
                     t.image_size == size - sizeof t && libdeflate_crc32(0, map, t.image_size) == t.crc;
  ::munmap(map, size);
  return whole;
}

}  // namespace

int DebugFileCache::open_copy(int fd) const {
  Identity id;
  if (dir_.empty() || !identify(fd, &id)) return -1;
  UniqueFd copy(::open(copy_path(dir_, id).c_str(), O_RDONLY | O_CLOEXEC));
  if (copy.get() < 0 || !whole_copy_of(copy.get(), id)) return -1;
  return copy.release();
}

int DebugFileCache::save_copy(int fd, const DebugImage& image) const {
  Identity id;
  if (dir_.empty() || !identify(fd, &id)) return -1;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string path = copy_path(dir_, id);
  // Per process and thread: two threads may copy one file at once (each module's DWARF opens on its own).
  const std::string temporary = fmt::format("{}.tmp.{}.{}", path, ::getpid(), ::gettid());
  {
    UniqueFd out(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) return -1;
    Trailer t{};
    std::memcpy(t.magic, kMagic, sizeof kMagic);
    t.device = id.device;
    t.inode = id.inode;
    t.size = id.size;
    t.mtime_ns = id.mtime_ns;
    t.image_size = image.size;
    t.crc = libdeflate_crc32(0, image.bytes.get(), image.size);
    if (!write_all(out.get(), {image.bytes.get(), image.size}) || !write_all(out.get(), std::as_bytes(std::span(&t, 1)))) {
      ::unlink(temporary.c_str());
      return -1;
    }
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return -1;
  }
  evict_cache_files(dir_, kExtension, kMaxCopies, kMaxBytes, path);
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

namespace {
DebugFileCache& process_cache() {
  static DebugFileCache cache{std::string()};
  return cache;
}
}  // namespace

const DebugFileCache& DebugFileCache::process() { return process_cache(); }

void DebugFileCache::set_process_dir(std::string dir) { process_cache() = DebugFileCache(std::move(dir)); }

}  // namespace heapscope
