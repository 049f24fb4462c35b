// U32Array: an array of 32-bit ids or offsets that is either owned (built by this process, in a vector or
// a grown U32Buffer) or a view of memory someone else keeps alive (base/viewed_array.h).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "base/viewed_array.h"

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

class U32Array : public ViewedArray<std::uint32_t> {
 public:
  U32Array() = default;
  explicit U32Array(std::vector<std::uint32_t> owned) : ViewedArray(std::move(owned)) {}
  explicit U32Array(U32Buffer grown) : grown_(std::move(grown)) { view({grown_.data(), grown_.size()}); }
  // `v`'s memory is kept alive by `keep` (held for the array's lifetime) or, without it, by the caller.
  static U32Array viewing(std::span<const std::uint32_t> v, std::shared_ptr<const void> keep = {}) {
    U32Array a;
    a.view(v, std::move(keep));
    return a;
  }
  // Moving the buffer keeps its memory (a pointer changes hands), so the view stays valid.
  U32Array(U32Array&&) noexcept = default;
  U32Array& operator=(U32Array&&) noexcept = default;

  std::size_t owned_bytes() const { return ViewedArray::owned_bytes() + grown_.capacity() * sizeof(std::uint32_t); }

 private:
  U32Buffer grown_;
};

}  // namespace heapscope
