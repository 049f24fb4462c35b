// TypeIdArray: a type id per block in 2 bytes while every id fits (a heap's names number in the hundreds or
// thousands), widened once to 4 bytes by the first id that does not. `top` holds the names of every block
// beside the dominator tree's working arrays, and 2 bytes a block there is 10 MB at 5M blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/bounded_scan.h"
#include "base/viewed_array.h"

namespace heapscope {

class TypeIdArray {
 public:
  std::size_t size() const { return wide_ ? ids32_.size() : ids16_.size(); }
  std::uint32_t operator[](std::size_t i) const { return wide_ ? ids32_[i] : ids16_[i]; }
  // Not safe beside readers on other threads (widening moves every id): the namers set ids on one thread.
  // Ids viewed in saved bytes are copied before the first is set.
  void set(std::size_t i, std::uint32_t id) {
    if (!wide_ && id > kMostNarrow) widen();
    if (wide_) ids32_.writable()[i] = id;
    else ids16_.writable()[i] = static_cast<std::uint16_t>(id);
  }
  void assign(std::size_t n, std::uint32_t id) {
    wide_ = id > kMostNarrow;
    ids32_ = wide_ ? ViewedArray<std::uint32_t>(std::vector<std::uint32_t>(n, id)) : ViewedArray<std::uint32_t>();
    ids16_ = wide_ ? ViewedArray<std::uint16_t>()
                   : ViewedArray<std::uint16_t>(std::vector<std::uint16_t>(n, static_cast<std::uint16_t>(id)));
  }
  std::size_t count_not(std::uint32_t id) const {
    return wide_ ? n_not(ids32_.span(), id) : n_not(ids16_.span(), id);
  }
  // Whether every id is below `bound` (the index cache checks every saved one).
  bool all_below(std::uint32_t bound) const {
    return wide_ ? heapscope::all_below(ids32_.span(), bound) : heapscope::all_below(ids16_.span(), bound);
  }
  bool wide() const { return wide_; }
  // The ids as they are held, 2 or 4 bytes each as wide() says (what the index cache saves), and an array
  // viewing such bytes, in memory `keep` holds (empty when their count is not a whole number of ids).
  std::span<const std::byte> bytes() const {
    return wide_ ? std::as_bytes(ids32_.span()) : std::as_bytes(ids16_.span());
  }
  static TypeIdArray viewing(bool wide, std::span<const std::byte> bytes, const std::shared_ptr<const void>& keep) {
    TypeIdArray a;
    a.wide_ = wide;
    if (wide && bytes.size() % 4 == 0)
      a.ids32_ = ViewedArray<std::uint32_t>::viewing(
          {reinterpret_cast<const std::uint32_t*>(bytes.data()), bytes.size() / 4}, keep);
    if (!wide && bytes.size() % 2 == 0)
      a.ids16_ = ViewedArray<std::uint16_t>::viewing(
          {reinterpret_cast<const std::uint16_t*>(bytes.data()), bytes.size() / 2}, keep);
    return a;
  }

 private:
  static constexpr std::uint32_t kMostNarrow = 0xffff;
  template <typename T>
  static std::size_t n_not(std::span<const T> ids, std::uint32_t id) {
    return static_cast<std::size_t>(std::count_if(ids.begin(), ids.end(), [id](T x) { return x != id; }));
  }
  void widen() {
    ids32_ = ViewedArray<std::uint32_t>(std::vector<std::uint32_t>(ids16_.begin(), ids16_.end()));
    ids16_ = {};
    wide_ = true;
  }

  bool wide_ = false;
  ViewedArray<std::uint16_t> ids16_;  // owned, or viewing an index file's bytes
  ViewedArray<std::uint32_t> ids32_;
};

}  // namespace heapscope
