// Compressed cores (sources/compressed_core.h): the format by its magic, the four streaming decoders
// against the libraries' own encoders, a cut stream, corrupt data, the copy cache's reuse and its bound.
#include <catch2/catch.hpp>

#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/progress.h"
#include "sources/compressed_core.h"

using namespace heapscope;

namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "compressed-core-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Something core-sized and compressible but not trivially so: counters and text.
std::string sample(std::size_t size) {
  std::string s;
  s.reserve(size);
  for (std::size_t i = 0; s.size() < size; ++i) s += "block " + std::to_string(i * 2654435761u % 100003) + "\n";
  s.resize(size);
  return s;
}

std::string zstd_of(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3));
  return out;
}

std::string lz4_of(const std::string& in) {
  std::string out(LZ4F_compressFrameBound(in.size(), nullptr), '\0');
  out.resize(LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), nullptr));
  return out;
}

std::string xz_of(const std::string& in) {
  std::string out(lzma_stream_buffer_bound(in.size()), '\0');
  std::size_t used = 0;
  REQUIRE(lzma_easy_buffer_encode(1, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const std::uint8_t*>(in.data()),
                                  in.size(), reinterpret_cast<std::uint8_t*>(out.data()), &used, out.size()) == LZMA_OK);
  out.resize(used);
  return out;
}

std::string gzip_of(const std::string& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct Format {
  Compression compression;
  std::string (*compress)(const std::string&);
};
const Format kFormats[] = {{Compression::zstd, zstd_of}, {Compression::lz4, lz4_of}, {Compression::xz, xz_of},
                           {Compression::gzip, gzip_of}};

}  // namespace

TEST_CASE("the four formats are known by their magic, whatever the name") {
  ScratchDir dir;
  const std::string core = sample(4096);
  for (const Format& f : kFormats) {
    write(dir.path / "core.bin", f.compress(core));
    CHECK(compression_of((dir.path / "core.bin").string()) == f.compression);
  }
  write(dir.path / "core.zst", "\x7f" "ELF and the rest of a core");
  CHECK(compression_of((dir.path / "core.zst").string()) == Compression::none);
  CHECK(compression_of((dir.path / "missing").string()) == Compression::none);
  CHECK(compression_of(dir.path.string()) == Compression::none);  // a directory
}

TEST_CASE("each format decompresses to the bytes it was made from, through the cache and without it") {
  ScratchDir dir;
  const std::string core = sample(6 << 20);  // more than one input and output buffer
  for (const Format& f : kFormats) {
    INFO(std::string(compression_name(f.compression)));
    const fs::path packed = dir.path / ("core." + std::string(compression_name(f.compression)));
    write(packed, f.compress(core));
    std::string error;
    for (const std::string& cache : {(dir.path / "cache").string(), std::string()}) {
      std::optional<UnpackedCore> copy = CoreCopyCache(cache, 1u << 30).unpack(packed.string(), f.compression, &error);
      REQUIRE(copy);
      CHECK_FALSE(copy->stream_cut());
      CHECK(bytes_of(copy->path()) == core);
    }
  }
}

TEST_CASE("a second unpack reuses the copy, and a copy of the wrong size is made again") {
  ScratchDir dir;
  const fs::path packed = dir.path / "core.zst";
  write(packed, zstd_of(sample(100000)));
  const CoreCopyCache cache((dir.path / "cache").string(), 1u << 30);
  std::string error;
  const std::string first = cache.unpack(packed.string(), Compression::zstd, &error)->path();
  const auto written = fs::last_write_time(first);
  CHECK(cache.unpack(packed.string(), Compression::zstd, &error)->path() == first);
  CHECK(fs::last_write_time(first) == written);
  fs::resize_file(first, 5000);  // damaged behind heapscope's back: its name no longer says its size
  const std::string again = cache.unpack(packed.string(), Compression::zstd, &error)->path();
  CHECK(bytes_of(again) == sample(100000));
}

TEST_CASE("a cut stream gives what it held and says it was cut") {
  ScratchDir dir;
  const std::string core = sample(1 << 20);
  for (const Format& f : kFormats) {
    INFO(std::string(compression_name(f.compression)));
    const std::string packed = f.compress(core);
    write(dir.path / "cut", packed.substr(0, packed.size() * 2 / 3));
    std::string error;
    std::optional<UnpackedCore> copy = CoreCopyCache(std::string(), 1u << 30).unpack((dir.path / "cut").string(), f.compression, &error);
    REQUIRE(copy);
    CHECK(copy->stream_cut());
    const std::string held = bytes_of(copy->path());
    CHECK(held.size() < core.size());
    CHECK(core.compare(0, held.size(), held) == 0);
  }
}

TEST_CASE("corrupt data is an error naming the format") {
  ScratchDir dir;
  std::string packed = gzip_of(sample(1 << 20));
  for (std::size_t i = packed.size() / 2; i < packed.size() / 2 + 64; ++i) packed[i] = '\0';
  write(dir.path / "bad", packed);
  std::string error;
  CHECK_FALSE(CoreCopyCache(std::string(), 1u << 30).unpack((dir.path / "bad").string(), Compression::gzip, &error));
  CHECK_THAT(error, Catch::Contains("its gzip data is corrupt after"));
}

TEST_CASE("a core the cache cannot hold is refused with the size it needs, and nothing is left") {
  ScratchDir dir;
  write(dir.path / "core.xz", xz_of(sample(3 << 20)));
  const fs::path cache = dir.path / "cache";
  std::string error;
  CHECK_FALSE(CoreCopyCache(cache.string(), 1u << 20).unpack((dir.path / "core.xz").string(), Compression::xz, &error));
  CHECK_THAT(error, Catch::Contains("it decompresses to 3145728 bytes (3.0 MiB)"));
  CHECK(fs::is_empty(cache));
  CoreCopyCache measured_briefly(cache.string(), 1u << 20);
  measured_briefly.set_measure_limit(2u << 20);
  CHECK_FALSE(measured_briefly.unpack((dir.path / "core.xz").string(), Compression::xz, &error));
  CHECK_THAT(error, Catch::Contains("it decompresses to more than "));
}

TEST_CASE("Ctrl-C stops a decompression and leaves no partial copy") {
  ScratchDir dir;
  write(dir.path / "core.lz4", lz4_of(sample(8 << 20)));
  Progress progress;
  progress.set_interrupt_check([] { return true; });
  progress.begin();
  ProgressScope current(&progress);
  const fs::path cache = dir.path / "cache";
  std::string error;
  CHECK_THROWS_AS(CoreCopyCache(cache.string(), 1u << 30).unpack((dir.path / "core.lz4").string(), Compression::lz4, &error),
                  Interrupted);
  CHECK(fs::is_empty(cache));
}

TEST_CASE("byte sizes as HEAPSCOPE_CORE_CACHE_SIZE gives them") {
  CHECK(parse_byte_size("1048576") == 1048576u);
  CHECK(parse_byte_size("64K") == 65536u);
  CHECK(parse_byte_size("500M") == 500ull << 20);
  CHECK(parse_byte_size("32G") == 32ull << 30);
  CHECK(parse_byte_size("2GB") == 2ull << 30);
  CHECK(parse_byte_size("1t") == 1ull << 40);
  CHECK_FALSE(parse_byte_size(""));
  CHECK_FALSE(parse_byte_size("G"));
  CHECK_FALSE(parse_byte_size("12X"));
  CHECK_FALSE(parse_byte_size("99999999999999999999G"));
}
