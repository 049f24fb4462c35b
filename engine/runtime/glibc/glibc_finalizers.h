// Registrations glibc keeps until a thread or the process ends, each holding one object alive for a
// handler that runs only then: exit handlers (atexit, on_exit, __cxa_atexit), thread_local destructors
// (__cxa_thread_atexit_impl's per-thread tls_dtor_list) and pthread keys with a destructor. What such a
// registration holds is a root of its own (RootKind::finalizer): a server whose per-client objects are only
// released by an exit handler keeps them for its whole life, and no other root explains why.
//
// Layouts (glibc 2.36, x86-64):
//   - pthread keys: entirely from the `_thread_db_*` descriptors libc exports (no debug symbols needed);
//   - exit handlers: `__exit_funcs` by its debug symbol, or without one a signature scan of libc's writable
//     segments for the statically allocated first list (`initial`); the list layout is glibc's ABI;
//   - thread_local destructors: libc's TLS variable `tls_dtor_list` by its debug symbol, or without one a
//     scan of libc's static TLS block for a pointer to a heap node shaped like a dtor_list.
// Function pointers of exit handlers and dtor_list nodes are mangled with the thread's pointer guard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/glibc/glibc_threads.h"
#include "runtime/libc_runtime.h"
#include "symbols/symbol_index.h"

namespace heapscope {

LibcFinalizers find_glibc_finalizers(const Image& image, const HeapModel& heap, const SymbolIndex& symbols,
                                      const LibcThreads& threads);

// x86-64 PTR_MANGLE: xor with the pointer guard (tcbhead_t.pointer_guard), then rotate left by 0x11.
std::uint64_t mangle_pointer(std::uint64_t pointer, std::uint64_t guard);
std::uint64_t demangle_pointer(std::uint64_t mangled, std::uint64_t guard);

// One struct exit_function_list at `list`: its registrations (function names left empty) and its `next`,
// or nothing when it does not look like one (idx above 32, a flavor glibc does not have, a handler outside
// every module's code).
struct ExitFunctionList {
  std::vector<FinalizerRegistration> registrations;
  Address next = 0;
};
std::optional<ExitFunctionList> read_exit_function_list(const Image& image, Address list, std::uint64_t guard);

// The list glibc allocates statically in libc (`initial`, always the chain's last) by a scan of [start,
// end): the one address holding a plausible list with at least one handler whose next is null. Nothing
// when none or several do.
std::optional<Address> find_initial_exit_list(const Image& image, Address start, Address end, std::uint64_t guard);

}  // namespace heapscope
