// A bit per item, 64 to a word: a set of the heap's blocks or nodes at an eighth of a byte each, where a
// list of them would take 4 bytes each (most of a heap's blocks are in sets like "lone leaf").
//
// Filled on all cores by giving each worker whole words (word(), slice_of over word_count()): two workers
// then never write one word.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace heapscope {

// The set bits of a word. Inline: built for any x86-64 (no popcnt instruction assumed), std::popcount is a
// call into libgcc, and ranks are asked for every block of some passes.
inline std::size_t ones_in(std::uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555;
  x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0f;
  return static_cast<std::size_t>((x * 0x0101010101010101) >> 56);
}

class BitArray {
 public:
  BitArray() = default;
  explicit BitArray(std::size_t bits) : bits_(bits), words_((bits + 63) / 64, 0) {}

  std::size_t size() const { return bits_; }
  std::size_t word_count() const { return words_.size(); }
  bool test(std::size_t i) const { return words_[i / 64] >> (i % 64) & 1; }
  void set(std::size_t i) { words_[i / 64] |= bit(i); }
  void clear(std::size_t i) { words_[i / 64] &= ~bit(i); }
  std::uint64_t& word(std::size_t w) { return words_[w]; }
  std::uint64_t word(std::size_t w) const { return words_[w]; }

  std::size_t count() const {
    std::size_t n = 0;
    for (const std::uint64_t w : words_) n += ones_in(w);
    return n;
  }
  // Calls fn(i) for each set bit, in increasing order, skipping empty words whole.
  template <class Fn>
  void for_each_set(Fn&& fn) const {
    for (std::size_t w = 0; w < words_.size(); ++w)
      for (std::uint64_t bits = words_[w]; bits; bits &= bits - 1)
        fn(64 * w + static_cast<std::size_t>(std::countr_zero(bits)));
  }
  std::size_t memory_bytes() const { return words_.capacity() * sizeof(std::uint64_t); }

 private:
  static std::uint64_t bit(std::size_t i) { return std::uint64_t{1} << (i % 64); }

  std::size_t bits_ = 0;
  std::vector<std::uint64_t> words_;
};

// A set of items whose members each have a slot in an array of their own: a member's slot is its rank,
// the members before it, counted from the bits and the count before each word (4 bytes a 64 items). A
// value for a third of the blocks then costs 4 bytes each and a bit for every block, not 4 bytes a block.
class RankedBits {
 public:
  static constexpr std::size_t kNotMember = ~std::size_t{0};

  RankedBits() = default;
  explicit RankedBits(BitArray bits) : bits_(std::move(bits)), before_(bits_.word_count() + 1, 0) {
    for (std::size_t w = 0; w < bits_.word_count(); ++w)
      before_[w + 1] = before_[w] + static_cast<std::uint32_t>(ones_in(bits_.word(w)));
  }

  std::size_t members() const { return before_.empty() ? 0 : before_.back(); }
  bool contains(std::size_t i) const { return i < bits_.size() && bits_.test(i); }
  // The member `i`'s slot (members below it); for a non-member, the slot the next member has.
  std::size_t rank(std::size_t i) const {
    return before_[i / 64] + ones_in(bits_.word(i / 64) & ((std::uint64_t{1} << (i % 64)) - 1));
  }
  std::size_t slot_of(std::size_t i) const { return contains(i) ? rank(i) : kNotMember; }
  std::size_t memory_bytes() const { return bits_.memory_bytes() + before_.capacity() * sizeof(std::uint32_t); }

 private:
  BitArray bits_;
  std::vector<std::uint32_t> before_;  // per word, and one past the last: the members before it
};

}  // namespace heapscope
