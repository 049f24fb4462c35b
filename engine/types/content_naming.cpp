#include "types/content_naming.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "image/memory_cursor.h"

namespace heapscope {

namespace {

constexpr std::size_t kShortestText = 4;      // "ok\0" is as likely a number's bytes as text
constexpr std::uint64_t kLongestScanned = 4096;  // text and pointer arrays are judged on their first bytes

bool is_ascii_text(std::uint8_t c) { return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r'; }

// Printable ASCII and well-formed UTF-8 sequences: a pointer's bytes (0x5632d3a171e0) are neither.
bool is_text(const std::uint8_t* bytes, std::size_t length) {
  for (std::size_t i = 0; i < length;) {
    const std::uint8_t c = bytes[i];
    if (is_ascii_text(c)) {
      ++i;
      continue;
    }
    const std::size_t continuation = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 0;
    if (continuation == 0) return false;
    for (std::size_t k = 1; k <= continuation; ++k)
      if (i + k >= length || (bytes[i + k] & 0xc0) != 0x80) return false;
    i += continuation + 1;
  }
  return true;
}

// A heap address is six bytes and two zeros; about one in fifty has six printable bytes (0x563c4a6b7230 reads
// "0rkJ<V"). A short "text" whose first word is a mapped address is that pointer, not a string.
bool starts_with_an_address(const Image& image, const std::uint8_t* bytes) {
  std::uint64_t word = 0;
  std::memcpy(&word, bytes, sizeof word);
  return image.region_at(word) != nullptr;
}

// The length of the NUL-terminated text at the block's start, when it is text: printable bytes (UTF-8
// allowed) and a NUL within the block; nullopt otherwise.
std::optional<std::size_t> text_length(const Image& image, const Block& block) {
  const std::uint64_t scanned = std::min(block.usable_size(), kLongestScanned);
  std::vector<std::uint8_t> bytes(scanned);
  if (scanned < kShortestText + 1 || !image.read_exact(block.address(), bytes.data(), bytes.size())) return std::nullopt;
  const auto nul = std::find(bytes.begin(), bytes.end(), 0);
  if (nul == bytes.end()) return std::nullopt;
  const std::size_t length = static_cast<std::size_t>(nul - bytes.begin());
  if (length < kShortestText || !is_text(bytes.data(), length)) return std::nullopt;
  // Text starts with a printable character, not a control.
  if (bytes[0] < 0x20) return std::nullopt;
  if (length < 8 && bytes.size() >= 8 && starts_with_an_address(image, bytes.data())) return std::nullopt;
  return length;
}

enum class Content { none, text, pointers, zeros };

Content content_of(const Image& image, const HeapModel& heap, const BlockIndex& index, const Block& block) {
  if (text_length(image, block)) return Content::text;
  const std::uint64_t words = std::min(block.usable_size(), kLongestScanned) / 8;
  if (words == 0) return Content::none;
  MemoryCursor mem(image);
  std::uint64_t zero = 0, pointers = 0;
  for (std::uint64_t i = 0; i < words; ++i) {
    const auto w = mem.u64(block.address() + 8 * i);
    if (!w) return Content::none;
    if (*w == 0) {
      ++zero;
      continue;
    }
    // A pointer to the start of an allocated block, or into a module: anything else is data.
    const BlockId target = index.find(*w);
    const bool to_block = target != kNoBlock && heap.blocks[target].address() == *w;
    if (!to_block && !image.module_at(*w)) return Content::none;
    ++pointers;
  }
  if (zero == words) return Content::zeros;
  // Two pointers at least, and more pointers than nulls: a table, not a structure with one pointer.
  return pointers >= 2 && pointers > zero ? Content::pointers : Content::none;
}

}  // namespace

void name_by_content(const Image& image, const HeapModel& heap, const BlockIndex& index,
                     std::span<const BlockId> blocks, BlockTypes& types) {
  std::uint32_t ids[4] = {BlockTypes::kUnknown, BlockTypes::kUnknown, BlockTypes::kUnknown, BlockTypes::kUnknown};
  constexpr const char* kNames[4] = {"", "C string", "pointer array", "all zeros"};
  for (const BlockId b : blocks) {
    if (types.type_id(b) != BlockTypes::kUnknown || !is_allocated(heap.blocks[b].state)) continue;
    const auto c = static_cast<std::size_t>(content_of(image, heap, index, heap.blocks[b]));
    if (c == 0) continue;
    if (ids[c] == BlockTypes::kUnknown) ids[c] = types.intern(kNames[c], Naming::content);
    types.set(b, ids[c]);
  }
}

std::optional<std::string> text_preview(const Image& image, const Block& block, std::size_t max_chars) {
  const std::optional<std::size_t> length = text_length(image, block);
  if (!length) return std::nullopt;
  std::string text(std::min(*length, max_chars), '\0');
  if (!image.read_exact(block.address(), text.data(), text.size())) return std::nullopt;
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"' || c == '\\') out += std::string("\\") + ch;
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  if (*length > max_chars) out += "…";
  return out;
}

}  // namespace heapscope
