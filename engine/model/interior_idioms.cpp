#include "model/interior_idioms.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace heapscope {

namespace {

constexpr std::array<std::string_view, kIdiomCount> kNames = {
    "none", "stdstring", "length64", "newarray", "multipleinheritance", "length-prefixed", "fixed-offset", "pool"};
constexpr std::uint64_t kWord = 8;
constexpr Address kPage = 4096;

bool file_backed(const MemoryRegion* r) { return r && r->readable && !r->backing_path.empty(); }

}  // namespace

std::string_view idiom_name(Idiom idiom) { return kNames[static_cast<std::size_t>(idiom)]; }

std::optional<IdiomSet> parse_idioms(std::string_view list, std::string* error) {
  if (list == "all") return kAllIdioms;
  if (list == "none") return kNoIdioms;
  IdiomSet set = kNoIdioms;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name == "memcheck") {  // memcheck's four, alone or with others: "memcheck,fixed-offset"
      set |= kMemcheckIdioms;
      continue;
    }
    std::size_t i = 1;
    while (i < kIdiomCount && kNames[i] != name) ++i;
    if (i == kIdiomCount) {
      *error = "unknown idiom '" + std::string(name) +
               "' (all, none, memcheck, or some of stdstring,length64,newarray,multipleinheritance,length-prefixed,"
               "fixed-offset,pool)";
      return std::nullopt;
    }
    set |= idiom_bit(static_cast<Idiom>(i));
  }
  return set;
}

// memcheck's test: a table in a readable file mapping whose first words (up to 20, within the mapping)
// are null or point into executable file mappings, two of them at least before anything else.
bool IdiomCheck::is_vtable(Address at) const {
  {
    std::lock_guard lock(vtables_mutex_);
    if (const auto it = vtables_.find(at); it != vtables_.end()) return it->second;
  }
  bool found = false;
  if (const MemoryRegion* r = image_.region_at(at); file_backed(r)) {
    constexpr std::size_t kMaxChecked = 20;
    int functions = 0;
    for (Address a = at; a + kWord <= r->end && a < at + kMaxChecked * kWord && functions < 2; a += kWord) {
      const auto word = image_.read_u64(a);
      if (!word) break;
      if (*word == 0) continue;
      const MemoryRegion* code = image_.region_at(*word);
      if (!file_backed(code) || !code->executable) break;
      ++functions;
    }
    found = functions == 2;
  }
  std::lock_guard lock(vtables_mutex_);
  vtables_.emplace(at, found);
  return found;
}

// The header (the bytes before the pointer) holds the length of what follows, and the byte that far past
// the pointer is its terminating NUL: an unsigned field of 1, 2, 4 or 8 bytes at its own alignment, or
// a one-byte header's upper five bits (SDS's shortest strings). The text's first bytes (kTextChecked) hold
// no NUL: a structure's pointers and zeroed fields past a word that happens to be small are no string.
bool IdiomCheck::length_prefixed(const Block& target, Address pointer) const {
  constexpr std::uint64_t kTextChecked = 64;
  const std::uint64_t offset = pointer - target.address();
  if (offset == 0 || offset > kMaxPrefixBytes) return false;
  const std::uint64_t room = target.usable_size() - offset;  // the bytes after the pointer
  std::array<std::uint8_t, kMaxPrefixBytes> header{};
  if (!image_.read_exact(target.address(), header.data(), offset)) return false;
  std::array<std::uint8_t, kTextChecked> text{};
  const std::uint64_t text_read = std::min(room, kTextChecked);
  if (!image_.read_exact(pointer, text.data(), text_read)) return false;
  const auto text_end = std::find(text.begin(), text.begin() + text_read, std::uint8_t{0}) - text.begin();
  const auto terminated_at = [&](std::uint64_t length) {
    std::uint8_t byte = 1;
    const bool no_nul_before = length < text_read ? text_end == static_cast<std::ptrdiff_t>(length)
                                                  : text_end == static_cast<std::ptrdiff_t>(text_read);
    return length < room && no_nul_before && image_.read_exact(pointer + length, &byte, 1) && byte == 0;
  };
  if (offset == 1) return terminated_at(header[0] >> 3);
  for (const std::uint64_t width : {1u, 2u, 4u, 8u})
    for (std::uint64_t at = 0; at + width <= offset; at += width) {
      std::uint64_t length = 0;
      std::memcpy(&length, header.data() + at, width);
      if (length > 0 && terminated_at(length)) return true;
    }
  return false;
}

Idiom IdiomCheck::classify(const Block& target, Address pointer) const {
  const Address start = target.address();
  const std::uint64_t usable = target.usable_size();
  if (pointer <= start || pointer >= start + usable) return Idiom::none;
  const auto word_at = [&](Address a) { return image_.read_u64(a); };
  if (on(Idiom::stdstring) && pointer == start + 3 * kWord) {
    const auto length = word_at(start), capacity = word_at(start + kWord);
    if (length && capacity && *capacity < usable && fills_block(3 * kWord + *capacity + 1, usable) &&
        *length <= *capacity)
      return Idiom::stdstring;
  }
  if (on(Idiom::length64) && pointer == start + kWord) {
    const auto size = word_at(start);
    if (size && *size > 0 && *size < usable && fills_block(*size + kWord, usable)) return Idiom::length64;
  }
  if (on(Idiom::newarray) && pointer == start + kWord) {
    // Some request the block could have been asked for leaves a whole number of elements after the count.
    const auto count = word_at(start);
    if (count && *count > 0 && *count <= usable) {
      const std::uint64_t most = usable - kWord;  // the bytes after the count, at the most
      const std::uint64_t whole = most / *count * *count;
      if (fills_block(whole + kWord, usable)) return Idiom::newarray;
    }
  }
  if (on(Idiom::multiple_inheritance) && pointer % kWord == 0) {
    const auto inner = word_at(pointer), first = word_at(start);
    if (inner && first && *inner % kWord == 0 && *inner >= kPage && *first % kWord == 0 && *first >= kPage &&
        is_vtable(*inner) && is_vtable(*first))
      return Idiom::multiple_inheritance;
  }
  if (on(Idiom::length_prefixed) && length_prefixed(target, pointer)) return Idiom::length_prefixed;
  return Idiom::none;
}

}  // namespace heapscope
