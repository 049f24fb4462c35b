// TypeIdArray: a type id per block in 2 bytes while every id fits (a heap's names number in the hundreds or
// thousands), widened once to 4 bytes by the first id that does not. `top` holds the names of every block
// beside the dominator tree's working arrays, and 2 bytes a block there is 10 MB at 5M blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace heapscope {

class TypeIdArray {
 public:
  std::size_t size() const { return wide_ ? view32_.size() : view16_.size(); }
  std::uint32_t operator[](std::size_t i) const { return wide_ ? view32_[i] : view16_[i]; }
  // Not safe beside readers on other threads (widening moves every id): the namers set ids on one thread.
  void set(std::size_t i, std::uint32_t id) {
    if (!wide_ && id > kMostNarrow) widen();
    own();
    if (wide_) ids32_[i] = id;
    else ids16_[i] = static_cast<std::uint16_t>(id);
  }
  void assign(std::size_t n, std::uint32_t id) {
    ids32_ = {};
    ids16_ = {};
    keep_ = {};
    viewed_ = false;
    wide_ = id > kMostNarrow;
    if (wide_) ids32_.assign(n, id);
    else ids16_.assign(n, static_cast<std::uint16_t>(id));
    view_owned();
  }
  std::size_t count_not(std::uint32_t id) const {
    return wide_ ? n_not(view32_, id) : n_not(view16_, id);
  }
  // The largest id (0 when there are none).
  std::uint32_t most() const {
    if (size() == 0) return 0;
    return wide_ ? *std::max_element(view32_.begin(), view32_.end()) : *std::max_element(view16_.begin(), view16_.end());
  }
  bool wide() const { return wide_; }
  // The ids as they are held, 2 or 4 bytes each as wide() says (what the index cache saves), and an array
  // viewing such bytes, in memory `keep` holds (empty when their count is not a whole number of ids). A
  // viewed array copies its ids before the first set().
  std::span<const std::byte> bytes() const {
    return wide_ ? std::as_bytes(view32_) : std::as_bytes(view16_);
  }
  static TypeIdArray viewing(bool wide, std::span<const std::byte> bytes, std::shared_ptr<const void> keep) {
    TypeIdArray a;
    a.wide_ = wide;
    a.viewed_ = true;
    a.keep_ = std::move(keep);
    if (wide && bytes.size() % 4 == 0) a.view32_ = {reinterpret_cast<const std::uint32_t*>(bytes.data()), bytes.size() / 4};
    if (!wide && bytes.size() % 2 == 0) a.view16_ = {reinterpret_cast<const std::uint16_t*>(bytes.data()), bytes.size() / 2};
    return a;
  }
  // Moving the vectors keeps their buffers, so the views stay valid; a copy would not.
  TypeIdArray() = default;
  TypeIdArray(TypeIdArray&&) noexcept = default;
  TypeIdArray& operator=(TypeIdArray&&) noexcept = default;
  TypeIdArray(const TypeIdArray&) = delete;
  TypeIdArray& operator=(const TypeIdArray&) = delete;

 private:
  static constexpr std::uint32_t kMostNarrow = 0xffff;
  template <typename T>
  static std::size_t n_not(std::span<const T> ids, std::uint32_t id) {
    return static_cast<std::size_t>(std::count_if(ids.begin(), ids.end(), [id](T x) { return x != id; }));
  }
  void view_owned() {
    view16_ = ids16_;
    view32_ = ids32_;
  }
  // The viewed ids copied into the array's own, to be set.
  void own() {
    if (!viewed_) return;
    ids16_.assign(view16_.begin(), view16_.end());
    ids32_.assign(view32_.begin(), view32_.end());
    keep_ = {};
    viewed_ = false;
    view_owned();
  }
  void widen() {
    ids32_.assign(view16_.begin(), view16_.end());
    ids16_ = {};
    keep_ = {};
    viewed_ = false;
    wide_ = true;
    view_owned();
  }

  bool wide_ = false;
  std::vector<std::uint16_t> ids16_;
  std::vector<std::uint32_t> ids32_;
  std::span<const std::uint16_t> view16_;  // ids16_, or viewed bytes
  std::span<const std::uint32_t> view32_;
  bool viewed_ = false;                    // the views show bytes viewing() was given
  std::shared_ptr<const void> keep_;       // their memory, when given
};

}  // namespace heapscope
