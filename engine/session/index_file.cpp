#include "session/index_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__SSE2__)
#error "IndexChecksum is written for SSE2, which every x86-64 has (heapscope reads x86-64 processes)"
#endif
#include <emmintrin.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/cache_directory.h"
#include "base/phase_timer.h"
#include "base/progress.h"
#include "base/workers.h"

namespace heapscope {

namespace {

// Bumped whenever the layout of any section changes (a field of Block or of the JSON, an edge's meaning).
constexpr std::uint32_t kFormatVersion = 11;  // 5: the dominator tree; 6: the names, object headers, SSE2 checksum;
                                              // 7: compact offsets; 8: retained sizes' high bytes only if needed;
                                              // 9: a collector's rules, Block::uncollectable; 10: objects' ends;
                                              // 11: an interpreter's frames
constexpr char kMagic[8] = {'H', 'S', 'I', 'N', 'D', 'E', 'X', '\n'};
constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kSectionAlign = 64;
constexpr std::uint32_t kMaxSections = 64;
// Progress and interrupts are looked at between pieces of this size.
constexpr std::uint64_t kStepBytes = std::uint64_t{16} << 20;

struct FileHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t section_count;
  std::uint64_t file_size;
  std::uint64_t checksum;  // of every byte after the header
};
static_assert(sizeof(FileHeader) == 32);

struct SectionEntry {
  std::uint32_t kind;
  std::uint32_t reserved;
  std::uint64_t offset;
  std::uint64_t size;
};
static_assert(sizeof(SectionEntry) == 24);

std::uint64_t align_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }
std::uint64_t alignment_of(IndexSection kind) { return kind == IndexSection::blocks ? kPage : kSectionAlign; }
bool is_u32_section(IndexSection kind) {
  return (kind >= IndexSection::forward_lines && kind <= IndexSection::root_referrers) ||
         (kind >= IndexSection::retention_idom && kind <= IndexSection::retention_blocks) ||
         kind == IndexSection::objects_types || kind == IndexSection::forward_wide || kind == IndexSection::reverse_wide ||
         kind == IndexSection::block_pages || kind == IndexSection::leaked;
}

std::string errno_text() { return std::strerror(errno); }

// Appends to a file descriptor and hashes what it appends (the body: all but the header).
class BodyWriter {
 public:
  explicit BodyWriter(int fd) : fd_(fd) {}
  void put(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const std::size_t n = std::min<std::size_t>(bytes.size(), kStepBytes);
      checksum_.update(bytes.first(n));
      write_all(bytes.first(n));
      progress_step(n);
      bytes = bytes.subspan(n);
    }
  }
  void pad_to(std::uint64_t offset) {
    static const std::byte zeros[kPage] = {};
    while (written_ < offset) put({zeros, std::min<std::uint64_t>(offset - written_, kPage)});
  }
  std::uint64_t written() const { return written_; }
  std::uint64_t checksum() const { return checksum_.finish(); }

 private:
  void write_all(std::span<const std::byte> bytes) {
    if (!heapscope::write_all(fd_, bytes)) throw std::runtime_error("cannot write the index: " + errno_text());
    written_ += bytes.size();
  }
  int fd_;
  std::uint64_t written_ = sizeof(FileHeader);
  IndexChecksum checksum_;
};

std::uint64_t section_size(const IndexSectionData& s) {
  std::uint64_t n = 0;
  for (const auto& piece : s.pieces) n += piece.size();
  return n;
}

// Writes the file's sections and header; returns the header's checksum.
std::uint64_t write_sections(int fd, const std::vector<IndexSectionData>& sections) {
  std::vector<SectionEntry> table;
  std::uint64_t offset = sizeof(FileHeader) + sections.size() * sizeof(SectionEntry);
  for (const IndexSectionData& s : sections) {
    offset = align_up(offset, alignment_of(s.kind));
    table.push_back({static_cast<std::uint32_t>(s.kind), 0, offset, section_size(s)});
    offset += table.back().size;
    // The blocks' pages become a BlockArray of their own: nothing else may share their last page.
    if (s.kind == IndexSection::blocks) offset = align_up(offset, kPage);
  }
  const std::uint64_t file_size = offset;
  progress_total(file_size);

  if (::lseek(fd, sizeof(FileHeader), SEEK_SET) < 0) throw std::runtime_error("cannot write the index: " + errno_text());
  BodyWriter body(fd);
  body.put(std::as_bytes(std::span(table)));
  for (std::size_t i = 0; i < sections.size(); ++i) {
    body.pad_to(table[i].offset);
    const IndexSectionData& s = sections[i];
    for (const auto& piece : s.pieces) body.put(piece);
    if (body.written() != table[i].offset + table[i].size)
      throw std::logic_error("index section " + std::to_string(table[i].kind) + " is not the size announced");
  }

  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.format_version = kFormatVersion;
  header.section_count = static_cast<std::uint32_t>(sections.size());
  header.file_size = file_size;
  header.checksum = body.checksum();
  if (::pwrite(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    throw std::runtime_error("cannot write the index: " + errno_text());
  return header.checksum;
}

// This boot's id: a page cache's content is what every reader sees until the machine restarts, and not
// necessarily what the disk kept across a crash. Empty when unknown (then no file is taken as checked).
const std::string& boot_id() {
  static const std::string id = [] {
    std::string text;
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char line[64] = {};
      if (std::fgets(line, sizeof line, f)) text = line;
      std::fclose(f);
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }();
  return id;
}

// Who left a checked mark: the file's writer, or a reader that computed its checksum.
enum class MarkedBy { writer, reader };

// What a checked mark says of an index file: this boot, the file as it is now (any write to it changes
// its change time, which no one can set back), the checksum its header gives, and who left the mark.
std::string checked_record(const struct stat& st, std::uint64_t checksum, MarkedBy by) {
  return std::string(by == MarkedBy::writer ? "written" : "hashed") + " boot " + boot_id() + " device " +
         std::to_string(st.st_dev) + " inode " + std::to_string(st.st_ino) + " size " + std::to_string(st.st_size) +
         " modified " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " changed " + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec) + " checksum " + std::to_string(checksum) + "\n";
}

// Records, beside `path`, that the file its stat `st` describes holds the bytes checksum `checksum` was
// computed over, by `by`. Best effort: without the mark the next reader checks the checksum itself.
void mark_checked(const std::string& path, const struct stat& st, std::uint64_t checksum, MarkedBy by) {
  if (boot_id().empty()) return;
  const std::string mark = checked_mark_path(path);
  const std::string temporary = mark + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string record = checked_record(st, checksum, by);
  const bool written = write_all(fd, std::as_bytes(std::span(record.data(), record.size())));
  if (::close(fd) != 0 || !written || ::rename(temporary.c_str(), mark.c_str()) != 0) ::unlink(temporary.c_str());
}

// Who left the checked mark beside `path` that says the file its stat `st` describes holds what checksum
// `checksum` was computed over; nothing when there is no such mark.
std::optional<MarkedBy> checked_before(const std::string& path, const struct stat& st, std::uint64_t checksum) {
  if (boot_id().empty()) return std::nullopt;
  std::string mark;
  if (std::FILE* f = std::fopen(checked_mark_path(path).c_str(), "r")) {
    char buffer[512];
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, f);
    mark.assign(buffer, n);
    std::fclose(f);
  }
  for (const MarkedBy by : {MarkedBy::writer, MarkedBy::reader})
    if (!mark.empty() && mark == checked_record(st, checksum, by)) return by;
  return std::nullopt;
}

}  // namespace

void write_index_file(const std::string& path, const std::vector<IndexSectionData>& sections) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + temporary + ": " + errno_text());
  std::uint64_t checksum = 0;
  struct stat written {};
  try {
    checksum = write_sections(fd, sections);
    if (::fstat(fd, &written) != 0) written = {};
    // No fsync: a file cut short by a crash fails its size or checksum check at the next load (its
    // checked mark names the boot before), and is then written again; syncing hundreds of megabytes would
    // cost more than the cache saves.
    if (::close(fd) != 0) {
      ::unlink(temporary.c_str());
      throw std::runtime_error("cannot write the index: " + errno_text());
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(temporary.c_str());
    throw std::runtime_error("cannot rename the index to " + path + ": " + reason);
  }
  // The bytes in the page cache are the ones hashed: the next reader in this boot need not hash them
  // again. Marked only when the renamed file is still the one written (its rename changed its change time,
  // nothing else: a writer that got in between leaves it unmarked).
  struct stat now {};
  if (::stat(path.c_str(), &now) == 0 && now.st_dev == written.st_dev && now.st_ino == written.st_ino &&
      now.st_size == written.st_size && now.st_mtim.tv_sec == written.st_mtim.tv_sec &&
      now.st_mtim.tv_nsec == written.st_mtim.tv_nsec)
    mark_checked(path, now, checksum, MarkedBy::writer);
}

std::string checked_mark_path(const std::string& index_path) { return index_path + ".checked"; }

std::unique_ptr<IndexFile> IndexFile::open(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = errno == ENOENT ? "not found" : "cannot open: " + errno_text();
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < sizeof(FileHeader)) {
    ::close(fd);
    *error = "truncated";
    return nullptr;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  FileHeader claimed{};
  const std::optional<MarkedBy> marked =
      ::pread(fd, &claimed, sizeof claimed, 0) == static_cast<ssize_t>(sizeof claimed)
          ? checked_before(path, st, claimed.checksum)
          : std::nullopt;
  const bool checked = marked.has_value();
  // Populated read-only when the checksum is to be computed over every page, so that the page cache's
  // pages are mapped as they are (populating a writable private mapping would copy every page); the
  // blocks' pages are made writable below, copied only if written. A file checked before in this boot is
  // not read whole: its pages are mapped as they are touched.
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | (checked ? 0 : MAP_POPULATE), fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map: " + errno_text();
    return nullptr;
  }
  std::unique_ptr<IndexFile> file(new IndexFile());
  file->map_ = static_cast<std::byte*>(p);
  file->size_ = size;

  FileHeader header;
  std::memcpy(&header, file->map_, sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
    *error = "not an index file";
    return nullptr;
  }
  if (header.format_version != kFormatVersion) {
    *error = "format version " + std::to_string(header.format_version) + ", not " + std::to_string(kFormatVersion);
    return nullptr;
  }
  if (header.file_size != size) {
    *error = "truncated (" + std::to_string(size) + " of " + std::to_string(header.file_size) + " bytes)";
    return nullptr;
  }
  if (header.section_count > kMaxSections ||
      sizeof(FileHeader) + std::uint64_t{header.section_count} * sizeof(SectionEntry) > size) {
    *error = "damaged section table";
    return nullptr;
  }
  for (std::uint32_t i = 0; i < header.section_count; ++i) {
    SectionEntry e;
    std::memcpy(&e, file->map_ + sizeof(FileHeader) + i * sizeof(SectionEntry), sizeof e);
    const auto kind = static_cast<IndexSection>(e.kind);
    const bool inside = e.offset <= size && e.size <= size - e.offset;
    const bool aligned = e.offset % alignment_of(kind) == 0;
    const bool whole = kind == IndexSection::blocks ? e.size % sizeof(Block) == 0
                       : is_u32_section(kind)     ? e.size % 4 == 0
                                                  : true;
    if (!inside || !aligned || !whole || file->find(kind)) {
      *error = "damaged section table";
      return nullptr;
    }
    file->entries_.push_back({kind, e.offset, e.size});
  }
  if (const Entry* blocks = file->find(IndexSection::blocks)) {
    const std::uint64_t pages_end = align_up(blocks->offset + blocks->size, kPage);
    for (const Entry& e : file->entries_)
      if (&e != blocks && e.size > 0 && e.offset < pages_end && e.offset + e.size > blocks->offset) {
        *error = "damaged section table";  // a section in the blocks' pages
        return nullptr;
      }
  }
  if (checked && header.checksum == claimed.checksum) {
    file->as_written_ = marked == MarkedBy::writer;
    return file;
  }
  PhaseTimer timer("cache: checksum");
  if (IndexChecksum::of({file->map_ + sizeof(FileHeader), size - sizeof(FileHeader)}) != header.checksum) {
    *error = "checksum mismatch";
    return nullptr;
  }
  mark_checked(path, st, header.checksum, MarkedBy::reader);
  return file;
}

IndexFile::~IndexFile() {
  if (!map_) return;
  const Entry* blocks = blocks_taken_ ? find(IndexSection::blocks) : nullptr;
  if (!blocks) {
    ::munmap(map_, size_);
    return;
  }
  // The blocks' pages belong to their BlockArray now.
  const std::uint64_t blocks_end = std::min<std::uint64_t>(align_up(blocks->offset + blocks->size, kPage), size_);
  if (blocks->offset > 0) ::munmap(map_, blocks->offset);
  if (blocks_end < size_) ::munmap(map_ + blocks_end, size_ - blocks_end);
}

const IndexFile::Entry* IndexFile::find(IndexSection kind) const {
  for (const Entry& e : entries_)
    if (e.kind == kind) return &e;
  return nullptr;
}

bool IndexFile::has(IndexSection kind) const { return find(kind) != nullptr; }

std::span<const std::byte> IndexFile::section(IndexSection kind) const {
  const Entry* e = find(kind);
  if (!e || (kind == IndexSection::blocks && blocks_taken_)) return {};
  return {map_ + e->offset, static_cast<std::size_t>(e->size)};
}

std::span<const std::uint32_t> IndexFile::words(IndexSection kind) const {
  const std::span<const std::byte> bytes = section(kind);
  return {reinterpret_cast<const std::uint32_t*>(bytes.data()), bytes.size() / 4};
}

std::pair<Block*, std::size_t> IndexFile::take_blocks() {
  const Entry* e = find(IndexSection::blocks);
  if (!e || blocks_taken_) return {nullptr, 0};
  blocks_taken_ = e->size > 0;  // an empty section has no pages to hand over
  // A BlockArray's blocks are writable, like those of a walk.
  if (blocks_taken_ && ::mprotect(map_ + e->offset, e->size, PROT_READ | PROT_WRITE) != 0) {
    blocks_taken_ = false;
    return {nullptr, 0};
  }
  return {reinterpret_cast<Block*>(map_ + e->offset), static_cast<std::size_t>(e->size / sizeof(Block))};
}

// Eight 64-bit lanes, two per 16 bytes of each 64-byte stripe, as XXH3 accumulates: each lane adds the
// product of the low and high halves of its word xored with a key, and the other word of its pair. The
// key changes with the stripe's position, so that moved or swapped data changes the sum. One 32x32-bit
// multiply per 8 bytes, two lanes per SSE2 instruction (every x86-64 has SSE2): a whole index is hashed
// at memory speed (the xxHash64 rounds it replaced, two dependent 64-bit multiplies per word, took a
// quarter of a one-block command's time).
namespace {

constexpr std::uint64_t kPrime1 = 0x9e3779b185ebca87ull;
constexpr std::uint64_t kPrime2 = 0xc2b2ae3d27d4eb4full;
constexpr std::uint64_t kPrime3 = 0x165667b19e3779f9ull;
constexpr std::uint64_t kKeys[8] = {0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull,
                                    0x1f67b3b7a4a44072ull, 0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull,
                                    0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull};

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
std::uint64_t mix_word(std::uint64_t acc, std::uint64_t word) { return rotl(acc + word * kPrime2, 31) * kPrime1; }

}  // namespace

void IndexChecksum::mix(const std::byte* data, std::size_t stripes) {
  __m128i acc[4], key[4];
  for (int j = 0; j < 4; ++j) {
    acc[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&lanes_[2 * j]));
    key[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kKeys[2 * j]));
  }
  const __m128i step = _mm_set1_epi64x(static_cast<long long>(kPrime1));
  __m128i position = _mm_set1_epi64x(static_cast<long long>(stripes_ * kPrime1));
  for (std::size_t s = 0; s < stripes; ++s, data += kStripe) {
    for (int j = 0; j < 4; ++j) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * j));
      const __m128i keyed = _mm_xor_si128(x, _mm_add_epi64(key[j], position));
      const __m128i product = _mm_mul_epu32(keyed, _mm_srli_epi64(keyed, 32));
      acc[j] = _mm_add_epi64(acc[j], _mm_add_epi64(product, _mm_shuffle_epi32(x, 0x4e)));  // the pair's other word
    }
    position = _mm_add_epi64(position, step);
  }
  for (int j = 0; j < 4; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(&lanes_[2 * j]), acc[j]);
  stripes_ += stripes;
}

void IndexChecksum::update(std::span<const std::byte> bytes) {
  total_ += bytes.size();
  if (pending_size_) {
    const std::size_t n = std::min(bytes.size(), sizeof pending_ - pending_size_);
    std::memcpy(pending_ + pending_size_, bytes.data(), n);
    pending_size_ += n;
    bytes = bytes.subspan(n);
    if (pending_size_ < sizeof pending_) return;
    mix(pending_, 1);
    pending_size_ = 0;
  }
  const std::size_t whole = bytes.size() / kStripe * kStripe;
  mix(bytes.data(), whole / kStripe);
  std::memcpy(pending_, bytes.data() + whole, bytes.size() - whole);
  pending_size_ = bytes.size() - whole;
}

std::uint64_t IndexChecksum::of(std::span<const std::byte> bytes, std::size_t bytes_per_worker) {
  const std::size_t stripes = bytes.size() / kStripe;
  constexpr std::size_t kStripesPerStep = 4 * kStepBytes / kStripe;
  const unsigned n = worker_count(stripes, std::max<std::size_t>(1, bytes_per_worker / kStripe));
  std::vector<IndexChecksum> parts(n);
  run_workers(n, [&](unsigned w) {
    const auto [first, last] = slice_of(stripes, n, w);
    IndexChecksum& part = parts[w];
    part.stripes_ = first;  // the keys of its stripes' positions
    // In steps: a load that takes long can be interrupted.
    for (std::size_t at = first; at < last; at += kStripesPerStep) {
      part.mix(bytes.data() + at * kStripe, std::min(kStripesPerStep, last - at));
      progress_check();
    }
  });
  IndexChecksum whole;
  for (const IndexChecksum& part : parts)
    for (int i = 0; i < 8; ++i) whole.lanes_[i] += part.lanes_[i];  // each stripe adds to the lanes alone
  whole.stripes_ = stripes;
  whole.total_ = stripes * kStripe;
  whole.update(bytes.subspan(stripes * kStripe));
  return whole.finish();
}

std::uint64_t IndexChecksum::finish() const {
  std::uint64_t h = total_ * kPrime3;
  for (const std::uint64_t lane : lanes_) h = mix_word(h, lane);
  for (std::size_t i = 0; i < pending_size_; ++i) h = mix_word(h, static_cast<std::uint64_t>(pending_[i]) + i);
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

}  // namespace heapscope
