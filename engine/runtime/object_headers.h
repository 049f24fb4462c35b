// Runtimes that put a header in front of the objects they allocate with malloc (CPython's PyGC_Head
// before each GC-tracked object, and in 3.11 and later two more words before it for objects whose class
// keeps its instances' dicts itself). Their programs point to the object, some bytes into the block, and
// link the headers into the runtime's own lists. Both would mislead a conservative scan: the block would
// look reachable only through an interior pointer ("possibly leaked"), and the lists would tie every
// object to every other, so that nothing dominates anything. With the headers recognised, a pointer to
// the object counts as a pointer to the block, and the header's links are the runtime's bookkeeping, not
// references. The runtime's objects also carry their type, whose name the runtime keeps in memory: the
// blocks holding objects are named by it (types/runtime_naming).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/viewed_array.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct ObjectHeaders {
  std::string layout;  // what was recognised, and from what: "CPython 3.11 (Py_Version) ..."
  std::uint32_t release = 0;  // the runtime's release as its field names need it (CPython: 11 for 3.11)

  // Where a block's object starts, and whether the 16 bytes before it are list links. A byte per block
  // (0: the block holds no object past a header).
  static constexpr std::uint8_t kLinksBefore = 0x80;
  ViewedArray<std::uint8_t> starts;  // owned, or a view of an index file's mapping (as type_of)
  std::uint64_t count = 0;  // blocks with an object past a header

  // The runtime's type of the object each block holds (at its start or past its header): an index into
  // type_names, 0 for none. Empty when the runtime names nothing.
  ViewedArray<std::uint32_t> type_of;
  std::vector<std::string> type_names{""};
  // Per type name: how many bytes of an object of it, held at its block's start, the scan reads — its
  // header's words, where the rest holds no pointers (a str's characters, an int's digits, a bytes' bytes:
  // a word there that looks like a pointer keeps nothing alive) —; 0 for all of it. As many as type_names.
  std::vector<std::uint32_t> scanned_prefix{0};
  // Per type name: bit i set when word i of an object of it (from the object's start) is no reference —
  // a weak reference's referent and its links in the referent's list of weak references, a str's length,
  // hash and state. As many as type_names.
  std::vector<std::uint64_t> weak_words{0};
  // Per block: how many 8-byte words from its start its object fills, where the runtime says (a tuple's
  // items, a list's used items, a dict's used entries, a str's header): 0 for the whole block, and for an
  // object past 512 KiB (2 bytes a block: a heap of small objects has tens of millions). Past them the
  // block holds what a dead object left (an allocator reuses slots without clearing them, a runtime its
  // containers' spare room): a word there is no reference. Empty when the runtime says nothing.
  ViewedArray<std::uint16_t> object_end_words;
  static constexpr std::uint64_t kMaxEndWords = 0xffff;

  // Blocks whose words past a header are records of `stride_words` words one of which is no reference (a
  // Python dict's entries of hash, key and value: an int key's hash is the int, an id() is an address),
  // sorted by block: the scan reads the records' other words alone, from `first_word` to the object's end.
  // Few (one per dict keys of that kind), so a sorted list, looked up only for the types `strided_types`
  // flags.
  struct StridedBlock {
    std::uint32_t block = 0;
    std::uint16_t first_word = 0;
    std::uint8_t stride_words = 0;
    std::uint8_t skipped_word = 0;
  };
  std::vector<StridedBlock> strided;
  std::vector<std::uint8_t> strided_types;  // per type name: 1 when its blocks may be in `strided`

  // weak_words of the object block `block` holds; 0 when none.
  std::uint64_t weak_words_of(std::uint32_t block) const {
    return block < type_of.size() && type_of[block] < weak_words.size() ? weak_words[type_of[block]] : 0;
  }

  const StridedBlock* strided_block(std::uint32_t block) const {
    if (block >= type_of.size() || type_of[block] >= strided_types.size() || !strided_types[type_of[block]])
      return nullptr;
    const auto it = std::lower_bound(strided.begin(), strided.end(), block,
                                     [](const StridedBlock& s, std::uint32_t b) { return s.block < b; });
    return it != strided.end() && it->block == block ? &*it : nullptr;
  }

  std::uint32_t object_offset(std::uint32_t block) const {
    return block < starts.size() ? starts[block] & ~kLinksBefore : 0;
  }
  // The list links of a block's header, as offsets [first, last) into the block; {0, 0} when none.
  std::pair<std::uint32_t, std::uint32_t> links(std::uint32_t block) const {
    if (block >= starts.size() || !(starts[block] & kLinksBefore)) return {0, 0};
    const std::uint32_t object = object_offset(block);
    return {object - kLinkBytes, object};
  }
  static constexpr std::uint32_t kLinkBytes = 16;
  // The bytes of `block` the scan reads from its start, 0 for all of them (object_end_words, scanned_prefix).
  std::uint32_t scanned_bytes(std::uint32_t block) const {
    const std::uint32_t end = block < object_end_words.size() ? std::uint32_t{object_end_words[block]} * 8 : 0;
    if (block >= type_of.size() || object_offset(block) != 0 || type_of[block] >= scanned_prefix.size()) return end;
    const std::uint32_t prefix = scanned_prefix[type_of[block]];
    return prefix && end ? std::min(prefix, end) : prefix | end;
  }
};

// The object headers of the runtime the image runs, when one of those heapscope knows is there and its
// objects are found in the heap; nothing otherwise. Cheap when no such runtime is loaded.
std::optional<ObjectHeaders> find_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap);
// Whether `saved` (what find_object_headers gave for this image, kept by the index cache) says of each of
// `blocks` what the runtime's objects say now: where the object starts, whether list links precede it, and
// its type's name. false (and *why) on the first disagreement, or when no known runtime is there.
bool check_object_headers(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                          const ObjectHeaders& saved, std::span<const std::size_t> blocks, std::string* why);
// The runtime's name for the word at `offset` of `block`, as its programs would write it: a dict's entry
// `["orders"]`, a list's item `[3]`; empty when the runtime's objects say nothing there.
std::string runtime_field_at(const Image& image, const HeapModel& heap, const ObjectHeaders& headers,
                             std::size_t block, std::uint64_t offset);

}  // namespace heapscope
