#include "sources/compressed_core.h"

#include <fcntl.h>
#include <lz4frame.h>
#include <lzma.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/cache_directory.h"
#include "base/unique_fd.h"
#include "base/phase_timer.h"
#include "base/progress.h"

namespace heapscope {

namespace {

constexpr std::size_t kInputChunk = std::size_t{1} << 20;
constexpr std::size_t kOutputChunk = std::size_t{4} << 20;
// xz's decoder needs its dictionary (64 MiB at xz -9); more than this is no core xz wrote.
constexpr std::uint64_t kXzMemoryLimit = std::uint64_t{1} << 30;

constexpr std::string_view kExtension = ".core";

// "1.5 GiB"
std::string size_text(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

// ---- the four formats' streaming decoders --------------------------------------------------------------

struct Step {
  std::size_t consumed = 0;
  std::size_t produced = 0;
  // The input so far ends where a frame (a gzip member, an xz stream) does: at the end of the file, the
  // stream is whole.
  bool at_frame_end = false;
  std::string error;  // corrupt data
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Decodes what it can of `in` into `out`; `input_ended`: `in` is all that is left of the file.
  virtual Step step(std::span<const std::byte> in, std::span<std::byte> out, bool input_ended) = 0;
};

class ZstdDecoder : public Decoder {
 public:
  ZstdDecoder() : stream_(ZSTD_createDStream()) {}
  ~ZstdDecoder() override { ZSTD_freeDStream(stream_); }
  Step step(std::span<const std::byte> in, std::span<std::byte> out, bool) override {
    ZSTD_inBuffer input{in.data(), in.size(), 0};
    ZSTD_outBuffer output{out.data(), out.size(), 0};
    const std::size_t hint = ZSTD_decompressStream(stream_, &output, &input);
    if (ZSTD_isError(hint)) return {.error = ZSTD_getErrorName(hint)};
    // 0: a frame is decoded and flushed whole; a following frame (zstd concatenates) starts afresh.
    frame_end_ = hint == 0 || (frame_end_ && input.pos == 0 && output.pos == 0);
    return {input.pos, output.pos, frame_end_, {}};
  }

 private:
  ZSTD_DStream* stream_;
  bool frame_end_ = true;
};

class Lz4Decoder : public Decoder {
 public:
  Lz4Decoder() { LZ4F_createDecompressionContext(&context_, LZ4F_VERSION); }
  ~Lz4Decoder() override { LZ4F_freeDecompressionContext(context_); }
  Step step(std::span<const std::byte> in, std::span<std::byte> out, bool) override {
    std::size_t consumed = in.size(), produced = out.size();
    const std::size_t hint = LZ4F_decompress(context_, out.data(), &produced, in.data(), &consumed, nullptr);
    if (LZ4F_isError(hint)) return {.error = LZ4F_getErrorName(hint)};
    frame_end_ = hint == 0 || (frame_end_ && consumed == 0 && produced == 0);
    return {consumed, produced, frame_end_, {}};
  }

 private:
  LZ4F_dctx* context_ = nullptr;
  bool frame_end_ = true;
};

class XzDecoder : public Decoder {
 public:
  XzDecoder() { ok_ = lzma_stream_decoder(&stream_, kXzMemoryLimit, LZMA_CONCATENATED) == LZMA_OK; }
  ~XzDecoder() override { lzma_end(&stream_); }
  Step step(std::span<const std::byte> in, std::span<std::byte> out, bool input_ended) override {
    if (!ok_) return {.error = "the xz decoder could not be set up"};
    stream_.next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    stream_.avail_in = in.size();
    stream_.next_out = reinterpret_cast<std::uint8_t*>(out.data());
    stream_.avail_out = out.size();
    // With LZMA_CONCATENATED the end of the last stream is known only once told that the input ended.
    const lzma_ret ret = lzma_code(&stream_, input_ended ? LZMA_FINISH : LZMA_RUN);
    Step s{in.size() - stream_.avail_in, out.size() - stream_.avail_out, ret == LZMA_STREAM_END, {}};
    switch (ret) {
      case LZMA_OK:
      case LZMA_STREAM_END:
      case LZMA_BUF_ERROR:  // no progress possible: at the end of the input, a cut stream
        break;
      case LZMA_MEMLIMIT_ERROR: s.error = "its dictionary needs more memory than heapscope allows (1 GiB)"; break;
      case LZMA_FORMAT_ERROR: s.error = "not an xz stream"; break;
      case LZMA_DATA_ERROR: s.error = "corrupt data"; break;
      default: s.error = fmt::format("xz error {}", static_cast<int>(ret)); break;
    }
    return s;
  }

 private:
  lzma_stream stream_ = LZMA_STREAM_INIT;
  bool ok_ = false;
};

class GzipDecoder : public Decoder {
 public:
  GzipDecoder() { ok_ = inflateInit2(&stream_, 16 + MAX_WBITS) == Z_OK; }
  ~GzipDecoder() override { inflateEnd(&stream_); }
  Step step(std::span<const std::byte> in, std::span<std::byte> out, bool) override {
    if (!ok_) return {.error = "the gzip decoder could not be set up"};
    // A gzip file may hold several members one after the other (cat a.gz b.gz): each starts afresh.
    if (member_end_ && !in.empty()) inflateReset(&stream_);
    stream_.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in.data()));
    stream_.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), UINT32_MAX));
    stream_.next_out = reinterpret_cast<Bytef*>(out.data());
    stream_.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size(), UINT32_MAX));
    const uInt avail_in = stream_.avail_in, avail_out = stream_.avail_out;
    const int ret = in.empty() && member_end_ ? Z_STREAM_END : inflate(&stream_, Z_NO_FLUSH);
    Step s{avail_in - stream_.avail_in, avail_out - stream_.avail_out, false, {}};
    if (ret == Z_STREAM_END) member_end_ = true;
    else if (ret == Z_OK || ret == Z_BUF_ERROR) member_end_ = member_end_ && s.consumed == 0;
    else s.error = stream_.msg ? stream_.msg : fmt::format("zlib error {}", ret);
    s.at_frame_end = member_end_;
    return s;
  }

 private:
  z_stream stream_{};
  bool ok_ = false;
  bool member_end_ = false;
};

std::unique_ptr<Decoder> decoder_for(Compression c) {
  switch (c) {
    case Compression::zstd: return std::make_unique<ZstdDecoder>();
    case Compression::lz4: return std::make_unique<Lz4Decoder>();
    case Compression::xz: return std::make_unique<XzDecoder>();
    case Compression::gzip: return std::make_unique<GzipDecoder>();
    case Compression::none: break;
  }
  return nullptr;
}

// ---- decompressing a file into another -----------------------------------------------------------------

struct Decompressed {
  std::uint64_t bytes = 0;     // the whole decompressed size (also when it did not fit)
  bool fitted = true;          // all of it was written within `room`
  bool measured = true;        // `bytes` is the whole size (not so when measuring stopped at its limit)
  bool stream_cut = false;     // the input ended inside a frame
  std::string error;           // corrupt data, or a read or write error
};

// Decodes `in` (`in_size` bytes, for progress) into `out`, writing at most `room` bytes; past that it goes
// on decoding without writing, to say how much room it would have needed, up to `measure_limit` bytes.
Decompressed decompress(int in, std::uint64_t in_size, Compression compression, int out, std::uint64_t room,
                        std::uint64_t measure_limit) {
  PhaseTimer timer("unpack");
  std::optional<PhaseScope> phase;
  if (Progress* progress = current_progress()) phase.emplace(*progress, "unpack");
  progress_total(in_size);
  const std::unique_ptr<Decoder> decoder = decoder_for(compression);
  std::vector<std::byte> input(kInputChunk), output(kOutputChunk);
  std::size_t begin = 0, end = 0;
  bool input_ended = false;
  int idle_steps = 0;  // steps in a row that neither took input nor gave output
  Decompressed result;
  for (;;) {
    if (begin == end && !input_ended) {
      const ssize_t n = ::read(in, input.data(), input.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return {.error = std::string("cannot read it: ") + std::strerror(errno)};
      begin = 0;
      end = static_cast<std::size_t>(n);
      input_ended = n == 0;
      progress_step(static_cast<std::uint64_t>(n));  // throws Interrupted after Ctrl-C
    }
    // A megabyte of zeros may decompress to gigabytes: Ctrl-C is looked for at each output chunk too.
    progress_check();
    const Step s = decoder->step(std::span(input).subspan(begin, end - begin), output, input_ended);
    if (!s.error.empty()) {
      result.error = fmt::format("its {} data is corrupt after {} decompressed bytes: {}", compression_name(compression),
                                 result.bytes, s.error);
      return result;
    }
    begin += s.consumed;
    // A decoder that takes nothing of the input it has and gives nothing would loop here for ever.
    idle_steps = s.consumed == 0 && s.produced == 0 && begin < end ? idle_steps + 1 : 0;
    if (idle_steps > 1) {
      result.error = fmt::format("its {} decoder stopped after {} decompressed bytes with input left",
                                 compression_name(compression), result.bytes);
      return result;
    }
    if (result.fitted && result.bytes + s.produced > room) result.fitted = false;
    if (result.fitted && !write_all(out, std::span(output).first(s.produced))) {
      if (errno != ENOSPC) return {.error = std::string("cannot write its copy: ") + std::strerror(errno)};
      result.fitted = false;
    }
    result.bytes += s.produced;
    if (!result.fitted && result.bytes > measure_limit) {
      result.measured = false;
      return result;
    }
    if (input_ended && begin == end && s.produced == 0) {
      result.stream_cut = !s.at_frame_end;
      return result;
    }
  }
}

// ---- the cache -----------------------------------------------------------------------------------------

struct Identity {
  std::uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0;
};

Identity identity_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, static_cast<std::uint64_t>(st.st_size),
          static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(st.st_mtim.tv_nsec)};
}

// A copy's name: the compressed file's identity, then what the copy must be to be whole — its size, and
// whether the compressed stream was cut — so that nothing is added to the core's bytes (a debugger is
// handed the copy as it is).
std::string identity_prefix(const Identity& id) {
  return fmt::format("{:x}-{:x}-{:x}-{:x}.", id.device, id.inode, id.size, id.mtime_ns);
}

std::string copy_name(const Identity& id, std::uint64_t core_size, bool stream_cut) {
  return fmt::format("{}{}{}{}", identity_prefix(id), core_size, stream_cut ? "-cut" : "", kExtension);
}

struct Copy {
  std::string path;
  bool stream_cut = false;
};

// The whole copy in `dir` of the file `id` names: one whose size is the one its name says.
std::optional<Copy> whole_copy(const std::string& dir, const Identity& id) {
  const std::string prefix = identity_prefix(id);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(kExtension)) continue;
    std::string_view rest(name);
    rest = rest.substr(prefix.size(), rest.size() - prefix.size() - kExtension.size());
    const bool cut = rest.ends_with("-cut");
    if (cut) rest.remove_suffix(4);
    std::uint64_t size = 0;
    const auto [end, parse_error] = std::from_chars(rest.data(), rest.data() + rest.size(), size);
    if (parse_error != std::errc() || end != rest.data() + rest.size()) continue;
    const auto actual = entry.file_size(ec);
    if (!ec && entry.is_regular_file(ec) && actual == size) return Copy{entry.path().string(), cut};
  }
  return std::nullopt;
}

std::uint64_t free_bytes(const std::string& dir) {
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) return UINT64_MAX;
  return std::uint64_t{vfs.f_bavail} * vfs.f_frsize;
}

std::string temporary_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

}  // namespace

Compression compression_of(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Compression::none;
  std::array<unsigned char, 6> magic{};
  if (::pread(fd.get(), magic.data(), magic.size(), 0) != static_cast<ssize_t>(magic.size())) return Compression::none;
  auto starts = [&](std::initializer_list<unsigned char> bytes) { return std::equal(bytes.begin(), bytes.end(), magic.begin()); };
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
  if (starts({0x04, 0x22, 0x4d, 0x18})) return Compression::lz4;
  if (starts({0xfd, '7', 'z', 'X', 'Z', 0x00})) return Compression::xz;
  if (starts({0x1f, 0x8b})) return Compression::gzip;
  return Compression::none;
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::zstd: return "zstd";
    case Compression::lz4: return "lz4";
    case Compression::xz: return "xz";
    case Compression::gzip: return "gzip";
    case Compression::none: break;
  }
  return "uncompressed";
}

UnpackedCore::UnpackedCore(UnpackedCore&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), stream_cut_(other.stream_cut_) {}

UnpackedCore& UnpackedCore::operator=(UnpackedCore&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    stream_cut_ = other.stream_cut_;
  }
  return *this;
}

UnpackedCore::~UnpackedCore() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<UnpackedCore> CoreCopyCache::unpack(const std::string& path, Compression compression,
                                                  std::string* error) const {
  auto fail = [&](std::string why) -> std::optional<UnpackedCore> {
    *error = fmt::format("cannot decompress {} ({}): {}", path, compression_name(compression), why);
    return std::nullopt;
  };
  UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (in.get() < 0 || ::fstat(in.get(), &st) != 0) return fail(std::strerror(errno));
  const Identity id = identity_of(st);

  std::string temporary;
  UniqueFd out;
  std::uint64_t room = 0;
  std::string where;
  if (!dir_.empty()) {
    if (std::optional<Copy> copy = whole_copy(dir_, id)) return UnpackedCore(copy->path, -1, copy->stream_cut);
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    // Named as evict_cache_files knows a writer's temporary file, to clear one a killed writer left.
    temporary = fmt::format("{}/{}partial{}.tmp.{}.{}", dir_, identity_prefix(id), kExtension, ::getpid(), ::gettid());
    out.reset(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) return fail(fmt::format("cannot write a copy in {}: {}", dir_, std::strerror(errno)));
    const std::uint64_t free = free_bytes(dir_);
    room = std::min(max_bytes_, free);
    where = fmt::format("the core copy cache {} has room for {} (its bound {}, set by HEAPSCOPE_CORE_CACHE_SIZE; {} "
                        "free on its file system)",
                        dir_, size_text(room), size_text(max_bytes_), size_text(free));
  } else {
    const std::string tmp = temporary_dir();
    out.reset(::open(tmp.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (out.get() < 0) return fail(fmt::format("cannot make a temporary copy in {}: {}", tmp, std::strerror(errno)));
    const std::uint64_t free = free_bytes(tmp);
    room = std::min(max_bytes_, free);
    where = fmt::format("a temporary copy in {} may take {} (its bound {}, set by HEAPSCOPE_CORE_CACHE_SIZE; {} free)",
                        tmp, size_text(room), size_text(max_bytes_), size_text(free));
  }
  // Whatever ends this early (an error, Ctrl-C's Interrupted) leaves no partial copy behind.
  struct RemoveUnlessKept {
    const std::string& file;
    bool keep = false;
    ~RemoveUnlessKept() {
      if (!keep && !file.empty()) ::unlink(file.c_str());
    }
  } partial{temporary};

  const Decompressed d = decompress(in.get(), id.size, compression, out.get(), room, measure_limit_);
  if (!d.error.empty()) return fail(d.error);
  if (!d.fitted)
    return fail(fmt::format("it decompresses to {}{} bytes ({}), but {}. Free space, point HEAPSCOPE_CACHE_DIR "
                            "elsewhere or raise HEAPSCOPE_CORE_CACHE_SIZE",
                            d.measured ? "" : "more than ", d.bytes, size_text(d.bytes), where));
  if (dir_.empty()) {
    const int fd = out.release();
    return UnpackedCore(fmt::format("/proc/self/fd/{}", fd), fd, d.stream_cut);
  }
  const std::string final_path = dir_ + "/" + copy_name(id, d.bytes, d.stream_cut);
  if (::rename(temporary.c_str(), final_path.c_str()) != 0)
    return fail(fmt::format("cannot write its copy in {}: {}", dir_, std::strerror(errno)));
  partial.keep = true;
  evict_cache_files(dir_, kExtension, kMaxCopies, max_bytes_, final_path);
  return UnpackedCore(final_path, -1, d.stream_cut);
}

namespace {
CoreCopyCache& process_cache() {
  static CoreCopyCache cache{std::string(), CoreCopyCache::kDefaultMaxBytes};
  return cache;
}
}  // namespace

const CoreCopyCache& CoreCopyCache::process() { return process_cache(); }

void CoreCopyCache::set_process(CoreCopyCache cache) { process_cache() = std::move(cache); }

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b') && unit[1] != unit[0]) unit.remove_suffix(1);  // "1GB"
  if (unit.size() > 1) return std::nullopt;
  int shift = 0;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: return std::nullopt;
    }
  }
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace heapscope
