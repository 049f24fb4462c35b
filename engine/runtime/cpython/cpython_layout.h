// What every reader of CPython's memory here shares (3.8 and later, 64-bit): the offsets of PyTypeObject's
// fields it reads, which are the same in every release, whether an object's type has a given name, and
// the release a module's file name says, a str's header and its text.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope::cpython {

constexpr Address kObType = 8;
constexpr Address kTpName = 24, kTpBasicsize = 32, kTpItemsize = 40, kTpFlags = 168, kTpMembers = 240, kTpBase = 256;

// The module of the CPython interpreter (the one that exports PyObject_Malloc: python3.11, libpython3.12.so),
// or null.
const Module* interpreter_module(const Image& image, const SymbolIndex& symbols);

// Whether the object at `object` has a type whose tp_name is `name` ("str").
bool has_type_named(const Image& image, Address object, std::string_view name);

// A str's header, by its form (its state bits: compact, ascii), as the release lays it out:
// PyASCIIObject (48 bytes to 3.11, with wstr; 40 from 3.12), PyCompactUnicodeObject (utf8_length and utf8
// more: 72, 56), PyUnicodeObject (its data pointer more: 80, 64). Its characters hold no pointers.
constexpr Address kStrState = 32;
constexpr std::uint32_t kStrCompact = 1u << 5, kStrAscii = 1u << 6;
std::uint32_t str_header(int minor, std::uint32_t state);

// The text of the str at `at` when it is printable ASCII of at most `longest` characters, or empty (a dict's
// key, a file name); nothing otherwise.
std::optional<std::string> ascii_text(const Image& image, Address at, int minor, std::uint64_t longest);

// Where a release's thread and interpreter states keep what heapscope reads (3.11 to 3.13; offsets read from
// each release's own headers with offsetof): the thread state's datastack_chunk, interp and
// native_thread_id, and the interpreter's free lists (items, count, the type of their objects: none for
// dicts' keys).
struct FreeListLayout {
  Address items, count;
  std::string_view type;
};
struct StateLayout {
  Address state_data_stack, state_interp, state_native_thread_id;
  std::array<FreeListLayout, 3> free_lists;
};
std::optional<StateLayout> state_layout(int minor);

// "python3.11", "libpython3.11.so.1.0" → 11.
std::optional<int> minor_from_name(std::string_view name);

// The release of the interpreter in `module`: from its Py_Version (exported since 3.11), else its file name.
struct InterpreterRelease {
  int minor = 0;
  std::string_view from;  // "Py_Version", "file name"
};
std::optional<InterpreterRelease> interpreter_release(const Image& image, const SymbolIndex& symbols, const Module& module);

// Where a code object's bytecode starts (co_code_adaptive, 3.11 to 3.13; 0 before 3.11, whose code objects
// keep it in a bytes object of its own, and for a release this does not know).
Address code_instructions_offset(int minor);

// Where a class keeps the keys its instances' split dicts share (PyHeapTypeObject.ht_cached_keys, 3.11 to
// 3.13; 0 otherwise).
Address cached_keys_offset(int minor);

}  // namespace heapscope::cpython
