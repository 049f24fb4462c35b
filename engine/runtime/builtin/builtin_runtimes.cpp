#include "runtime/builtin/builtin_runtimes.h"

#include "runtime/boehm/boehm_allocator.h"
#include "runtime/boehm/boehm_finalizers.h"
#include "runtime/cpython/pymalloc_allocator.h"
#include "runtime/glibc/glibc_allocator.h"
#include "runtime/glibc/glibc_finalizers.h"
#include "runtime/glibc/glibc_threads.h"
#include "runtime/jemalloc/jemalloc_allocator.h"
#include "runtime/mimalloc/mimalloc_allocator.h"
#include "runtime/musl/musl_allocator.h"
#include "runtime/musl/musl_runtime.h"
#include "runtime/musl/musl_threads.h"
#include "runtime/tcmalloc/tcmalloc_allocator.h"

namespace heapscope {

const std::vector<const AllocatorPlugin*>& builtin_allocator_plugins() {
  static const std::vector<const AllocatorPlugin*> plugins{&glibc::allocator_plugin(), &tcmalloc::allocator_plugin(),
                                                           &jemalloc::allocator_plugin(), &mimalloc::allocator_plugin(),
                                                           &musl::allocator_plugin(), &boehm::allocator_plugin(),
                                                           &pymalloc::allocator_plugin()};
  return plugins;
}

// glibc's lists when glibc is there; else musl's, whose descriptors are found from the threads' pointers.
LibcThreads read_libc_threads(const Image& image, const SymbolIndex& symbols) {
  LibcThreads glibc = find_glibc_threads(image, symbols);
  if (glibc.library == LibcThreads::Library::glibc) return glibc;
  return musl::find_threads(image);
}

LibcThreads read_libc_threads(const MemoryReader& read, const LibcSymbolLookup& lookup) {
  return find_glibc_threads(read, lookup);
}

std::map<std::uint32_t, Address> thread_pointers_from_memory(const Image& image) {
  return musl::find_thread_pointers(image);
}

LibcFinalizers read_libc_finalizers(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                    const LibcThreads& threads) {
  LibcFinalizers out;
  // musl's exit handlers and key values are not read (their memory is scanned as globals and TLS all the same);
  // glibc's readers would take musl's libc.so for glibc's and warn of what they miss.
  if (threads.library == LibcThreads::Library::musl || musl::is_musl_process(image, symbols))
    out.notes.push_back("musl's exit handlers and pthread key values are not listed as finalizer roots: their memory "
                        "is scanned as the C library's globals and each thread's TLS");
  else
    out = find_glibc_finalizers(image, heap, symbols, threads);
  // A garbage collector's registered finalizers hold memory as the C library's registrations do.
  std::vector<FinalizerRegistration> gc = boehm::read_finalizers(image, symbols, out.warnings);
  out.registrations.insert(out.registrations.end(), std::make_move_iterator(gc.begin()),
                           std::make_move_iterator(gc.end()));
  return out;
}

}  // namespace heapscope
