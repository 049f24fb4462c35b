// The CLI's operator new: large arrays get transparent huge pages (base/huge_pages.h).
//
// Most of a command's large arrays are std::vectors sized once and written at once (a verdict, a mark or
// an index per block), and a vector writes its elements in its constructor, before the code that asked
// for it could advise the kernel. Replacing the global operator new in the executable reaches all of them;
// the engine as a library (in LLDB or GDB) leaves its host's operator new alone. The sanitizers' builds
// keep theirs, which check that what operator new gave is what operator delete gets.
#if !defined(__SANITIZE_ADDRESS__)

#include <cstdlib>
#include <new>

#include "base/huge_pages.h"

// The other forms of operator new (array, nothrow) call this one; the standard operator delete frees
// with free(), as this allocates with malloc().
void* operator new(std::size_t size) {
  for (;;) {
    if (void* p = std::malloc(size ? size : 1)) {
      heapscope::advise_huge_pages(p, size);
      return p;
    }
    // As the standard operator new: the new-handler may free memory and return, or throw.
    const std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

#endif
