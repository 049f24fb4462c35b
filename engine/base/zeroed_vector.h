// ZeroedVector<T>: a std::vector of a trivial type whose new elements are zero without being written.
// Its memory comes from calloc, which for a large array maps fresh pages the kernel zeroes only when they
// are first touched; an array per block of a large heap that few blocks write (the types of the leaked
// blocks) then costs nothing for the rest. Elements it adds with no value are left as calloc gave them.
#pragma once

#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace heapscope {

template <class T>
struct CallocAllocator {
  static_assert(std::is_trivial_v<T>, "zero bytes must be a value of T");
  using value_type = T;
  CallocAllocator() = default;
  template <class U>
  CallocAllocator(const CallocAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (void* p = std::calloc(n, sizeof(T))) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  // Value-initialising a new element would write the zero calloc already gave: left out.
  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const CallocAllocator<U>&) const noexcept { return true; }
};

template <class T>
using ZeroedVector = std::vector<T, CallocAllocator<T>>;

}  // namespace heapscope
