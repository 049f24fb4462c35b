#include "runtime/builtin/builtin_runtimes.h"

#include "runtime/boehm/boehm_allocator.h"
#include "runtime/boehm/boehm_finalizers.h"
#include "runtime/glibc/glibc_allocator.h"
#include "runtime/glibc/glibc_finalizers.h"
#include "runtime/glibc/glibc_threads.h"
#include "runtime/jemalloc/jemalloc_allocator.h"
#include "runtime/mimalloc/mimalloc_allocator.h"
#include "runtime/tcmalloc/tcmalloc_allocator.h"

namespace heapscope {

const std::vector<const AllocatorPlugin*>& builtin_allocator_plugins() {
  static const std::vector<const AllocatorPlugin*> plugins{&glibc::allocator_plugin(), &tcmalloc::allocator_plugin(),
                                                           &jemalloc::allocator_plugin(), &mimalloc::allocator_plugin(),
                                                           &boehm::allocator_plugin()};
  return plugins;
}

// glibc is the one C library heapscope reads; another (musl) would be chosen here by what the image holds.
LibcThreads read_libc_threads(const Image& image, const SymbolIndex& symbols) {
  return find_glibc_threads(image, symbols);
}

LibcThreads read_libc_threads(const MemoryReader& read, const LibcSymbolLookup& lookup) {
  return find_glibc_threads(read, lookup);
}

LibcFinalizers read_libc_finalizers(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                    const LibcThreads& threads) {
  LibcFinalizers out = find_glibc_finalizers(image, heap, symbols, threads);
  // A garbage collector's registered finalizers hold memory as the C library's registrations do.
  std::vector<FinalizerRegistration> gc = boehm::read_finalizers(image, symbols, out.warnings);
  out.registrations.insert(out.registrations.end(), std::make_move_iterator(gc.begin()),
                           std::make_move_iterator(gc.end()));
  return out;
}

}  // namespace heapscope
