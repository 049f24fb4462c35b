// ViewedArray<T>: a read-only array that is either owned (built by this process) or a view of memory
// someone else keeps alive (an index file mapped from the cache: loading it copies nothing). Read the same
// way either way; moving one keeps what it views valid, copying is not allowed.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace heapscope {

template <class T>
class ViewedArray {
 public:
  ViewedArray() = default;
  explicit ViewedArray(std::vector<T> owned) : owned_(std::move(owned)), view_(owned_) {}
  // `view`'s memory is kept alive by `keep` (held for the array's lifetime) or, without it, by the caller.
  static ViewedArray viewing(std::span<const T> view, std::shared_ptr<const void> keep = {}) {
    ViewedArray a;
    a.view_ = view;
    a.keep_ = std::move(keep);
    return a;
  }
  // Moving a vector keeps its buffer, so the view stays valid.
  ViewedArray(ViewedArray&& other) noexcept
      : owned_(std::move(other.owned_)), view_(std::exchange(other.view_, {})), keep_(std::move(other.keep_)) {}
  ViewedArray& operator=(ViewedArray&& other) noexcept {
    owned_ = std::move(other.owned_);
    view_ = std::exchange(other.view_, {});
    keep_ = std::move(other.keep_);
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
  // Its elements, to be changed in place (its size stays): an array that views memory not its own copies
  // it first. Not beside readers on other threads while it copies.
  T* writable() {
    if (view_.data() != owned_.data()) {
      owned_.assign(view_.begin(), view_.end());
      view_ = owned_;
      keep_.reset();
    }
    return owned_.data();
  }

 protected:
  // For an array that owns its memory in another form (U32Array's grown buffer), or views memory `keep`
  // holds.
  void view(std::span<const T> v, std::shared_ptr<const void> keep = {}) {
    view_ = v;
    keep_ = std::move(keep);
  }

 private:
  std::vector<T> owned_;
  std::span<const T> view_;
  std::shared_ptr<const void> keep_;
};

}  // namespace heapscope
