// A bit per item, 64 to a word: a set of the heap's blocks or nodes at an eighth of a byte each, where a
// list of them would take 4 bytes each (most of a heap's blocks are in sets like "lone leaf").
//
// Filled on all cores by giving each worker whole words (words(), slice_of over word_count()): two
// workers then never write one word.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace heapscope {

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
    for (const std::uint64_t w : words_) n += static_cast<std::size_t>(std::popcount(w));
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

}  // namespace heapscope
