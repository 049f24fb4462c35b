// U32Array: an array of 32-bit ids or offsets that is either owned (built by this process) or a view of
// memory someone else keeps alive (an index file mapped from the cache: loading it copies nothing).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace heapscope {

class U32Array {
 public:
  U32Array() = default;
  explicit U32Array(std::vector<std::uint32_t> owned) : owned_(std::move(owned)), view_(owned_) {}
  // The caller keeps `view`'s memory alive for the array's lifetime.
  static U32Array viewing(std::span<const std::uint32_t> view) {
    U32Array a;
    a.view_ = view;
    return a;
  }
  // Moving a vector keeps its buffer, so the view stays valid; a copy would not.
  U32Array(U32Array&& other) noexcept
      : owned_(std::move(other.owned_)), view_(std::exchange(other.view_, {})) {}
  U32Array& operator=(U32Array&& other) noexcept {
    owned_ = std::move(other.owned_);
    view_ = std::exchange(other.view_, {});
    return *this;
  }
  U32Array(const U32Array&) = delete;
  U32Array& operator=(const U32Array&) = delete;

  std::span<const std::uint32_t> span() const { return view_; }
  const std::uint32_t* data() const { return view_.data(); }
  std::size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  std::uint32_t operator[](std::size_t i) const { return view_[i]; }
  std::uint32_t back() const { return view_.back(); }
  auto begin() const { return view_.begin(); }
  auto end() const { return view_.end(); }
  std::size_t owned_bytes() const { return owned_.capacity() * sizeof(std::uint32_t); }

 private:
  std::vector<std::uint32_t> owned_;
  std::span<const std::uint32_t> view_;
};

}  // namespace heapscope
