// musl's thread descriptors (struct pthread) as the C library's thread list (libc_runtime.h). musl keeps
// its live threads on a circular list through the descriptors themselves, and on x86-64 a thread's pointer
// (fs_base) is its descriptor, whose first word points at itself. So the list is found from any thread's
// pointer, with no symbol: each descriptor checked by its self pointer, its back link and (for the threads
// the image has) its tid. A thread created by pthread_create keeps its stack, TLS area and key values in one
// mapping; the descriptor's `stack` is where the stack ends and the TLS area begins. A thread that has
// exited leaves the list, so exited threads are not listed.
#pragma once

#include <cstdint>
#include <map>

#include "image/image.h"
#include "runtime/libc_runtime.h"

namespace heapscope::musl {

// The list, when the image's threads are musl's (library musl); empty otherwise (library unknown).
LibcThreads find_threads(const Image& image);

// tid → thread pointer of the image's threads, for an image whose debugger shows no fs_base (LLDB 16): each
// live thread's descriptor looked for by its self pointer and tid in the thread's own stack mapping (a
// pthread_create'd thread's) or in the writable data of the executable and musl's C library (the main
// thread's), then the rest along the list from the first found. Empty when none is musl's.
std::map<std::uint32_t, Address> find_thread_pointers(const Image& image);

}  // namespace heapscope::musl
