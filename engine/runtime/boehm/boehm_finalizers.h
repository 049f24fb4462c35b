// Boehm GC's registered finalizers (GC_register_finalizer and its variants) as finalizer registrations:
// the finalizable-object table (GC_fnlz_roots.fo_head, a hash table of 2^log_fo_table_size chains of
// struct finalizable_object in the collector's heap) and the queue of objects whose finalizers are ready
// to run (finalize_now). The table keeps each object's address complemented (GC_HIDE_POINTER), so that
// its own scan does not see it: the registration's root reads it back (FinalizerRegistration::hidden_pointer).
// The collector keeps a registered object, and what it points to, until its finalizer has run, so each
// registration is a root of what it alone holds.
#pragma once

#include <string>
#include <vector>

#include "image/image.h"
#include "runtime/libc_runtime.h"
#include "symbols/symbol_index.h"

namespace heapscope::boehm {

// The collector's registrations, or none when no Boehm GC is in the image; problems in `warnings`.
std::vector<FinalizerRegistration> read_finalizers(const Image& image, const SymbolIndex& symbols,
                                                   std::vector<std::string>& warnings);

}  // namespace heapscope::boehm
