// U32Array: an array of 32-bit ids or offsets that is either owned (built by this process) or a view of
// memory someone else keeps alive (an index file mapped from the cache: loading it copies nothing).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace heapscope {

// An array of 32-bit values built by appending, of a size not known ahead (a scan's edges). It grows with
// realloc, which moves a large buffer's pages (mremap) where a vector would allocate anew and copy every
// element at each doubling, and it ends at its exact size the same way.
class U32Buffer {
 public:
  U32Buffer() = default;
  ~U32Buffer() { std::free(data_); }
  U32Buffer(U32Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  U32Buffer& operator=(U32Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  U32Buffer(const U32Buffer&) = delete;
  U32Buffer& operator=(const U32Buffer&) = delete;

  void push_back(std::uint32_t v) {
    if (size_ == capacity_) resize_storage(capacity_ ? 2 * capacity_ : 1024);
    data_[size_++] = v;
  }
  void reserve(std::size_t capacity) {
    if (capacity > capacity_) resize_storage(capacity);
  }
  void shrink_to_fit() {
    if (size_ == 0) {
      std::free(std::exchange(data_, nullptr));
      capacity_ = 0;
    } else if (size_ < capacity_) {
      resize_storage(size_);
    }
  }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  const std::uint32_t* data() const { return data_; }

 private:
  void resize_storage(std::size_t capacity) {
    void* p = std::realloc(data_, capacity * sizeof(std::uint32_t));
    if (!p) throw std::bad_alloc();
    data_ = static_cast<std::uint32_t*>(p);
    capacity_ = capacity;
  }
  std::uint32_t* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

class U32Array {
 public:
  U32Array() = default;
  explicit U32Array(std::vector<std::uint32_t> owned) : owned_(std::move(owned)), view_(owned_) {}
  explicit U32Array(U32Buffer grown) : grown_(std::move(grown)), view_(grown_.data(), grown_.size()) {}
  // The caller keeps `view`'s memory alive for the array's lifetime.
  static U32Array viewing(std::span<const std::uint32_t> view) {
    U32Array a;
    a.view_ = view;
    return a;
  }
  // Moving a vector keeps its buffer, so the view stays valid; a copy would not.
  U32Array(U32Array&& other) noexcept
      : owned_(std::move(other.owned_)), grown_(std::move(other.grown_)), view_(std::exchange(other.view_, {})) {}
  U32Array& operator=(U32Array&& other) noexcept {
    owned_ = std::move(other.owned_);
    grown_ = std::move(other.grown_);
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
  std::size_t owned_bytes() const { return (owned_.capacity() + grown_.capacity()) * sizeof(std::uint32_t); }

 private:
  std::vector<std::uint32_t> owned_;
  U32Buffer grown_;
  std::span<const std::uint32_t> view_;
};

}  // namespace heapscope
