// TypeIdArray: a type id per block in 2 bytes while every id fits (a heap's names number in the hundreds or
// thousands), widened once to 4 bytes by the first id that does not. `top` holds the names of every block
// beside the dominator tree's working arrays, and 2 bytes a block there is 10 MB at 5M blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace heapscope {

class TypeIdArray {
 public:
  std::size_t size() const { return wide_ ? ids32_.size() : ids16_.size(); }
  std::uint32_t operator[](std::size_t i) const { return wide_ ? ids32_[i] : ids16_[i]; }
  // Not safe beside readers on other threads (widening moves every id): the namers set ids on one thread.
  void set(std::size_t i, std::uint32_t id) {
    if (!wide_ && id > kMostNarrow) widen();
    if (wide_) ids32_[i] = id;
    else ids16_[i] = static_cast<std::uint16_t>(id);
  }
  void assign(std::size_t n, std::uint32_t id) {
    ids32_ = {};
    ids16_ = {};
    wide_ = id > kMostNarrow;
    if (wide_) ids32_.assign(n, id);
    else ids16_.assign(n, static_cast<std::uint16_t>(id));
  }
  std::size_t count_not(std::uint32_t id) const {
    return wide_ ? n_not(ids32_, id) : n_not(ids16_, id);
  }
  bool wide() const { return wide_; }
  // The ids as they are held, 2 or 4 bytes each as wide() says (what the index cache saves), and an array
  // of such bytes back (empty when their count is not a whole number of ids).
  std::span<const std::byte> bytes() const {
    return wide_ ? std::as_bytes(std::span(ids32_)) : std::as_bytes(std::span(ids16_));
  }
  static TypeIdArray from_bytes(bool wide, std::span<const std::byte> bytes) {
    TypeIdArray a;
    a.wide_ = wide;
    if (wide && bytes.size() % 4 == 0) copy_into(a.ids32_, bytes);
    if (!wide && bytes.size() % 2 == 0) copy_into(a.ids16_, bytes);
    return a;
  }

 private:
  static constexpr std::uint32_t kMostNarrow = 0xffff;
  template <typename T>
  static std::size_t n_not(const std::vector<T>& ids, std::uint32_t id) {
    return static_cast<std::size_t>(std::count_if(ids.begin(), ids.end(), [id](T x) { return x != id; }));
  }
  template <typename T>
  static void copy_into(std::vector<T>& ids, std::span<const std::byte> bytes) {
    ids.resize(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(ids.data(), bytes.data(), bytes.size());
  }
  void widen() {
    ids32_.assign(ids16_.begin(), ids16_.end());
    ids16_ = {};
    wide_ = true;
  }

  bool wide_ = false;
  std::vector<std::uint16_t> ids16_;
  std::vector<std::uint32_t> ids32_;
};

}  // namespace heapscope
