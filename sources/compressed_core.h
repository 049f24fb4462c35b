// Cores as systems keep them: compressed. systemd-coredump stores cores zstd-compressed
// (core.NAME.UID.BOOTID.PID.TIME.zst), and people pass cores around as .gz, .xz or .lz4. A core is read in
// place from a mapped file (the pieces of ElfCoreImage point into it), so a compressed core is decompressed
// once into a file — streamed, a few MiB of buffers whatever the core's size, with progress and Ctrl-C —
// and that file is mapped as any core.
//
// The file is an uncompressed copy kept in the core copy cache, the directory `cores` under the user's
// cache directory, with the debug file cache's rules (dwarf/debug_file_cache.h): named after the
// compressed file's identity (device, inode, size, modification time), used only when whole (its name
// also gives its size, checked on every open), written under a temporary name and renamed, the newest
// kMaxCopies copies and kDefaultMaxBytes kept. The copy is the core byte for byte, with no trailer (a
// debugger is handed it: `heapscope unpack`), and unlike a debug file's copy no CRC is checked: checking one
// would read the whole core on every command, the cost the copy is there to save, and a copy only ever
// appears whole, by its rename. Without a cache
// directory (or with HEAPSCOPE_NO_CORE_CACHE=1) the copy is an unnamed temporary file that goes when the
// core is closed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace heapscope {

enum class Compression { none, gzip, xz, zstd, lz4 };

// By the file's first bytes, never its name: none for anything else (an ELF core, a file that cannot be read).
Compression compression_of(const std::string& path);
std::string_view compression_name(Compression compression);  // "zstd", ...

// An uncompressed copy of a compressed core, open while this lives (a temporary copy has no other name).
class UnpackedCore {
 public:
  UnpackedCore(std::string path, int fd, bool stream_cut) : path_(std::move(path)), fd_(fd), stream_cut_(stream_cut) {}
  UnpackedCore(UnpackedCore&& other) noexcept;
  UnpackedCore& operator=(UnpackedCore&& other) noexcept;
  ~UnpackedCore();

  // A path the copy opens by (/proc/self/fd/N for a temporary copy).
  const std::string& path() const { return path_; }
  // The compressed stream ended before its last frame did (a cut file): the copy holds what came before.
  bool stream_cut() const { return stream_cut_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool stream_cut_ = false;
};

class CoreCopyCache {
 public:
  static constexpr std::size_t kMaxCopies = 8;
  static constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{32} << 30;

  // Copies live in `dir` (made when first needed), `max_bytes` of them at most; an empty dir: temporary
  // copies in $TMPDIR (or /tmp), each of `max_bytes` at most.
  CoreCopyCache(std::string dir, std::uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

  const std::string& dir() const { return dir_; }

  // A core that does not fit is decoded on without being written, to name the size it needs, until this
  // many bytes (unlimited by default: the user is shown progress and may stop it; the fuzz target is not).
  void set_measure_limit(std::uint64_t bytes) { measure_limit_ = bytes; }

  // The uncompressed copy of `path`, compressed with `compression`: an earlier whole copy, or one made
  // now (progress and Ctrl-C through the thread's current Progress: Interrupted is thrown, and the partial
  // copy removed). Null with a one-sentence *error when the data is corrupt, or the copy does not fit —
  // the error then names the space it needs.
  std::optional<UnpackedCore> unpack(const std::string& path, Compression compression, std::string* error) const;

  // The process's cache: set by the frontend (frontends/common/cache_settings.h); temporary copies by default.
  static const CoreCopyCache& process();
  static void set_process(CoreCopyCache cache);

 private:
  std::string dir_;
  std::uint64_t max_bytes_;
  std::uint64_t measure_limit_ = UINT64_MAX;
};

// "32G", "512M", "1048576": a size as HEAPSCOPE_CORE_CACHE_SIZE gives it (K, M, G, T in powers of 1024);
// nullopt when it is not one.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

}  // namespace heapscope
