// CPython's objects (3.8 and later, 64-bit), when the interpreter allocates them with malloc
// (PYTHONMALLOC=malloc, or objects larger than pymalloc's 512 bytes). A GC-tracked object is malloc'ed with
// a PyGC_Head in front,
//   struct PyGC_Head { uintptr_t _gc_next; uintptr_t _gc_prev; };   // prev's low 2 bits are flags
// and from 3.11 on, an instance of a class that manages its instances' dicts (Py_TPFLAGS_MANAGED_DICT;
// 3.12 adds MANAGED_WEAKREF) has two more words before that (the dict and its split values), so the object
// starts 32 bytes in. Every object's first words are ob_refcnt and ob_type. Recognised by structure: the
// object's type is a type object whose type's type is PyType_Type (the one object that is its own type),
// whose flags say it is GC-tracked (or not, for an object without a header) and whose instance size fits
// the block, and a header either sits on a consistent doubly linked list or is untracked (both zero).
// Which release runs (and so which header layout, from a table per release) comes from the interpreter's
// Py_Version symbol (3.11+) or its file name. A split dict's values array (3.11, 3.12) is pointed to past a
// prefix whose last byte is the prefix's size: recognised from the instance that points to it.
#pragma once

#include <optional>

#include "runtime/object_headers.h"

namespace heapscope {

// The blocks holding CPython objects, where each object starts and its type's name; nothing when no
// CPython interpreter runs or none of its objects is found.
std::optional<ObjectHeaders> find_cpython_objects(const Image& image, const SymbolIndex& symbols, const HeapModel& heap);
// check_object_headers for CPython: each of `blocks` found again as find_cpython_objects finds it. A block
// where no object is found now may still have been given a start by the passes after the first (a split
// dict's values), never list links.
// The Python name of the word at `offset` of `block`: `["key"]` for a dict keys' entry (its value; `key
// of ["key"]` for its key), `[i]` for a list's item; empty elsewhere.
std::string cpython_field_at(const Image& image, const HeapModel& heap, const ObjectHeaders& headers,
                             std::size_t block, std::uint64_t offset);
bool check_cpython_objects(const Image& image, const SymbolIndex& symbols, const HeapModel& heap,
                           const ObjectHeaders& saved, std::span<const std::size_t> blocks, std::string* why);

}  // namespace heapscope
