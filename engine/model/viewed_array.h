// ViewedArray<T>: a read-only array that is either owned (built by this process) or a view of memory
// someone else keeps alive (an index file mapped from the cache: loading it copies nothing). Read the same
// way either way; moving one keeps what it views valid, copying is not allowed.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace heapscope {

template <class T>
class ViewedArray {
 public:
  ViewedArray() = default;
  explicit ViewedArray(std::vector<T> owned) : owned_(std::move(owned)), view_(owned_) {}
  // The caller keeps `view`'s memory alive for the array's lifetime.
  static ViewedArray viewing(std::span<const T> view) {
    ViewedArray a;
    a.view_ = view;
    return a;
  }
  // Moving a vector keeps its buffer, so the view stays valid.
  ViewedArray(ViewedArray&& other) noexcept : owned_(std::move(other.owned_)), view_(std::exchange(other.view_, {})) {}
  ViewedArray& operator=(ViewedArray&& other) noexcept {
    owned_ = std::move(other.owned_);
    view_ = std::exchange(other.view_, {});
    return *this;
  }
  ViewedArray(const ViewedArray&) = delete;
  ViewedArray& operator=(const ViewedArray&) = delete;

  std::span<const T> span() const { return view_; }
  const T* data() const { return view_.data(); }
  std::size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  const T& operator[](std::size_t i) const { return view_[i]; }
  const T& back() const { return view_.back(); }
  auto begin() const { return view_.begin(); }
  auto end() const { return view_.end(); }
  std::size_t owned_bytes() const { return owned_.capacity() * sizeof(T); }

 protected:
  // For an array that owns its memory in another form (U32Array's grown buffer).
  void view(std::span<const T> v) { view_ = v; }

 private:
  std::vector<T> owned_;
  std::span<const T> view_;
};

}  // namespace heapscope
