// CPython's GC-tracked objects (3.8 and later, 64-bit): each is malloc'ed with a PyGC_Head in front,
//   struct PyGC_Head { uintptr_t _gc_next; uintptr_t _gc_prev; };   // prev's low 2 bits are flags
// followed by the object, whose first words are ob_refcnt and ob_type. Recognised by structure, without
// symbols: the object's type is a type object whose type's type is PyType_Type (the one object that is its
// own type), and the header either sits on a consistent doubly linked list or is untracked (both zero).
#pragma once

#include <optional>

#include "runtime/object_headers.h"

namespace heapscope {

// Whether the image runs a CPython interpreter (the executable or a libpython module is named so).
bool runs_cpython(const Image& image);

// The blocks holding GC-tracked CPython objects; nothing when none is found.
std::optional<ObjectHeaders> find_cpython_objects(const Image& image, const HeapModel& heap);

}  // namespace heapscope
