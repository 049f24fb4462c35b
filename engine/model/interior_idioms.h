// Interior pointers that are idioms, not stray bytes. A conservative scan counts a block reached only
// through pointers into its middle as "possibly leaked" (valgrind's "possibly lost"), yet some programs
// keep most of their pointers that way: a header before what they point to. valgrind's memcheck knows four
// such idioms (--leak-check-heuristics, all of them on by default since 3.11) and counts a block reached
// through one as reachable ("reachable via heuristic"); heapscope applies the same four with memcheck's
// tests, and a fifth of its own:
//   stdstring            a pointer 24 bytes in, past the length, capacity and refcount of libstdc++'s
//                        copy-on-write std::string, whose capacity fills the block (+ the NUL);
//   length64             a pointer 8 bytes in, past a 64-bit count of the bytes after it (sqlite);
//   newarray             a pointer 8 bytes in, past the element count new[] keeps for delete[], which
//                        divides the bytes after it;
//   multipleinheritance  a pointer to a word inside an object that holds a vtable pointer, where the
//                        block starts with one too (a C++ object seen through a second base class);
//   length-prefixed      a pointer 1 to 32 bytes in, past a header that holds the length of the
//                        NUL-terminated bytes after it (redis' SDS strings: +1, +3, +5, +9, +17), at an
//                        offset that many blocks share: one such pointer alone proves nothing;
// and two that C programs' own structures make, each a population rather than one pointer's contents:
//   fixed-offset         a pointer k bytes into a block of size s, where many blocks of size s are pointed
//                        to k bytes in: a structure embedded in another (the container_of idiom of
//                        intrusive lists and queues), or a record behind a header of its own;
//   pool                 a pointer to a word of a block that many pointers reach at distinct word offsets:
//                        a pool of slots (a page cache, a slab, an array whose elements are pointed to) or
//                        an arena of objects (nginx's pools). A stray interior pointer, one and not a
//                        population, explains nothing.
// memcheck compares the block's requested size; heapscope knows the usable size the allocator gave, so a
// size "fills the block" when it is at most the usable size and more than the allocator would have given
// for a smaller request (docs/usage.md, "Interior-pointer idioms").
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "heap/block.h"
#include "image/image.h"

namespace heapscope {

enum class Idiom : std::uint8_t {
  none, stdstring, length64, newarray, multiple_inheritance, length_prefixed, fixed_offset, pool
};
inline constexpr std::size_t kIdiomCount = 8;

// memcheck's names for its four; "length-prefixed", "fixed-offset" and "pool" for heapscope's.
std::string_view idiom_name(Idiom idiom);

// A set of idioms, a bit each.
using IdiomSet = std::uint8_t;
constexpr IdiomSet idiom_bit(Idiom idiom) { return static_cast<IdiomSet>(1u << static_cast<unsigned>(idiom)); }
inline constexpr IdiomSet kNoIdioms = 0;
// valgrind's default: memcheck's four, whose tests look at one pointer and the bytes it lands in.
inline constexpr IdiomSet kMemcheckIdioms = idiom_bit(Idiom::stdstring) | idiom_bit(Idiom::length64) |
                                            idiom_bit(Idiom::newarray) | idiom_bit(Idiom::multiple_inheritance);
// Those whose test is a population: a pointer counts when enough others share its shape.
inline constexpr IdiomSet kPopulationIdioms =
    idiom_bit(Idiom::length_prefixed) | idiom_bit(Idiom::fixed_offset) | idiom_bit(Idiom::pool);
inline constexpr IdiomSet kAllIdioms = kMemcheckIdioms | kPopulationIdioms;
// "all", "none", "memcheck" (valgrind's default, memcheck's four), or names separated by commas
// (memcheck's --leak-check-heuristics); nullopt with *error saying what is wrong.
std::optional<IdiomSet> parse_idioms(std::string_view list, std::string* error);

// What holds a block that only idiomatic interior pointers reach, a byte per block: the idiom, and for
// length-prefixed blocks the offset, for fixed-offset ones the offset when it is a whole word of at most
// 127 (the idioms' groups are told apart by it): 0x40 + offset, 0x80 + offset / 8.
using HeldBy = std::uint8_t;
inline constexpr std::uint32_t kMaxPrefixBytes = 32;
constexpr HeldBy held_by(Idiom idiom, std::uint64_t offset) {
  if (idiom == Idiom::length_prefixed) return static_cast<HeldBy>(0x40 + offset);
  if (idiom == Idiom::fixed_offset && offset % 8 == 0 && offset / 8 >= 1 && offset / 8 <= 127)
    return static_cast<HeldBy>(0x80 + offset / 8);
  return static_cast<HeldBy>(idiom);
}
constexpr Idiom held_idiom(HeldBy h) {
  return h >= 0x80 ? Idiom::fixed_offset : h >= 0x40 ? Idiom::length_prefixed : static_cast<Idiom>(h);
}
constexpr std::uint32_t held_offset(HeldBy h) { return h >= 0x80 ? (h - 0x80u) * 8 : h >= 0x40 ? h - 0x40u : 0u; }

// Whether `request` bytes could have been asked for a block the allocator gave `usable` bytes: at most
// that, and more than a smaller size class would hold (size classes are at most a quarter apart, glibc's
// chunks 16 bytes).
constexpr bool fills_block(std::uint64_t request, std::uint64_t usable) {
  const std::uint64_t slack = usable / 4 > 16 ? usable / 4 : 16;
  return request <= usable && usable - request < slack;
}

class IdiomCheck {
 public:
  IdiomCheck(const Image& image, IdiomSet idioms) : image_(image), idioms_(idioms) {}
  // The idiom `pointer` (into `target`, past its start) fits, tried in memcheck's order; length-prefixed
  // last, which the caller confirms by how many blocks share the offset (the other population idioms are
  // the caller's: model/idiom_census.h). Safe from several threads.
  Idiom classify(const Block& target, Address pointer) const;

 private:
  bool on(Idiom i) const { return (idioms_ & idiom_bit(i)) != 0; }
  bool is_vtable(Address at) const;
  bool length_prefixed(const Block& target, Address pointer) const;

  const Image& image_;
  IdiomSet idioms_;
  mutable std::mutex vtables_mutex_;
  mutable std::unordered_map<Address, bool> vtables_;  // what is_vtable found, by address
};

}  // namespace heapscope
