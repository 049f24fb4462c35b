// The C library's own records that roots and analyses need, in library-neutral terms: its list of thread
// descriptors (which outlives the threads) and its exit-time registrations. glibc fills them
// (runtime/glibc/glibc_threads, glibc_finalizers), chosen in runtime/builtin/; nothing above the runtime layer
// names glibc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "image/link_map.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct LibcThread {
  enum class List { used, user, cache };
  Address descriptor = 0;  // struct pthread: the pthread_t value
  std::uint32_t tid = 0;   // 0 once the thread has exited (the kernel clears it)
  List list = List::used;
  Address stack_start = 0, stack_end = 0;  // the writable mapping holding it
  // Where its TLS area (static TLS blocks, descriptor, key values) begins above its stack, when the C library
  // records it (musl: the descriptor's `stack`, the stack's top); 0 when it does not (glibc: the DTV says).
  Address tls_start = 0;
  // The function it was started with (glibc: struct pthread's start_routine); 0 for the main thread or
  // when unknown.
  Address start_routine = 0;

  // Its stack is dead memory: exited and not on a stack the application provided.
  bool exited() const { return list == List::cache || (list == List::used && tid == 0); }
};

struct LibcThreads {
  // Whose descriptors these are: the DTV and TLS layouts differ (glibc's DTV entries are {value, to_free}
  // pairs with the length before them; musl's are bare pointers after a count).
  enum class Library { unknown, glibc, musl };
  Library library = Library::unknown;
  std::vector<LibcThread> threads;
  std::uint64_t descriptor_size = 0;  // sizeof(struct pthread)
  std::vector<std::string> warnings;
};

// The C library's exit-time registrations, and a garbage collector's registered finalizers (gc_finalizer:
// Boehm GC's GC_register_finalizer*, which keep their object and what it points to until they have run).
enum class FinalizerKind : std::uint8_t { atexit, on_exit, cxa_atexit, tls_dtor, pthread_key, gc_finalizer };

// "atexit", "on_exit", "cxa_atexit", "tls_dtor", "pthread_key", "gc_finalizer"
const char* finalizer_kind_name(FinalizerKind kind);

struct FinalizerRegistration {
  static constexpr std::uint32_t kNoThread = 0xffffffffu;

  FinalizerKind kind = FinalizerKind::cxa_atexit;
  Address function = 0;         // the handler, demangled
  std::string function_name;    // "close_channel(void*)", or the address when no symbol covers it
  std::string module;           // the module holding the handler; empty when none does
  Address object = 0;           // what the handler receives: argument, thread_local object, key data
  // The memory through which the registration holds its object: the finalizer root's range. An
  // argument's or key data's word; a thread_local variable (sized by its TLS symbol). Empty when the
  // registration holds nothing (atexit).
  Address slot_start = 0, slot_end = 0;
  std::uint32_t thread = kNoThread;  // tls_dtor, pthread_key: the live thread (index into Image::threads())
  Address exited_thread = 0;         // pthread_key of an exited thread glibc still keeps: its pthread_t
  std::uint32_t key = 0;             // pthread_key: the key
  std::string variable;              // tls_dtor: "t_feed in app", when a TLS symbol covers the object
  // gc_finalizer: the slot holds the object's address complemented (Boehm GC's GC_HIDE_POINTER, which keeps
  // its own scan from seeing it); the root reads the object's address back from it.
  bool hidden_pointer = false;
  bool ready_to_run = false;  // gc_finalizer: its object is unreachable, queued for the finalizer to run
};

struct LibcFinalizers {
  std::vector<FinalizerRegistration> registrations;
  std::vector<std::string> warnings;
  // How lists were found when libc had no symbols: methods, not problems, so no warnings for every command.
  std::vector<std::string> notes;
};

// A symbol's address in the process, by the start of its module's file name ("libc.so", "ld-linux") and its
// name: how a reader that runs before an Image is complete (a debugger frontend's) finds the C library.
using LibcSymbolLookup = std::function<std::optional<Address>(std::string_view module_prefix, std::string_view name)>;

}  // namespace heapscope
