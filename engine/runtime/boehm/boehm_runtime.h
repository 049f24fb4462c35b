// Locating Boehm GC's state in a process image: the module that holds the collector (libgc.so.1, or a
// program linked with libgc.a) by its exported GC_arrays, checked to be the build boehm_layout.h
// describes; the object kinds' free lists (GC_obj_kinds, hidden: found by a scan of the library's data
// for the three built-in kinds' free lists, which lie inside GC_arrays); and each thread's local free
// lists (the one word of the library's static TLS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope::boehm {

struct Runtime {
  const Module* module = nullptr;
  std::string version;  // "8.2.2" from GC_get_version(), empty when it cannot be read
  Address arrays = 0;   // &GC_arrays
  // Each object kind's free list heads (129 a kind), in kind order; the built-in four when GC_obj_kinds
  // could not be found.
  std::vector<Address> kind_free_lists;
  std::vector<Address> kind_reclaim_lists;  // each kind's reclaim list array (bookkeeping), 0 when unknown
  // Each kind's objects hold no pointers the collector follows (its descriptor scans no word), in kind order.
  std::vector<bool> kind_pointer_free;
  // Each kind the collector marks through a procedure of the program's (a GC_DS_PROC descriptor).
  std::vector<bool> kind_marked_by_procedure;
  // The collector's rules of reachability as the process set them (the arena is the walk's to set).
  CollectorRules rules;
  // Each thread's local free lists (struct thread_local_freelists), with its index in Image::threads().
  std::vector<std::pair<std::uint32_t, Address>> thread_free_lists;
  std::vector<Discovery> discovery;
  std::vector<std::string> warnings;
};

// The module that holds a Boehm collector (exports GC_arrays and GC_malloc), or null.
const Module* find_collector(const Image& image, const SymbolIndex& symbols);

// The collector's runtime in `module`, or nothing with *why_not: a build whose GC_arrays is not 8.2.2's
// size, or a collector that was never initialised (no heap section yet).
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, const Module& module,
                                      std::string* why_not);

}  // namespace heapscope::boehm
