// What every reader of CPython's memory here shares (3.8 and later, 64-bit): the offsets of PyTypeObject's
// fields it reads, which are the same in every release, whether an object's type has a given name, and
// the release a module's file name says.
#pragma once

#include <optional>
#include <string_view>

#include "image/image.h"

namespace heapscope::cpython {

constexpr Address kObType = 8;
constexpr Address kTpName = 24, kTpBasicsize = 32, kTpItemsize = 40, kTpFlags = 168, kTpBase = 256;

// Whether the object at `object` has a type whose tp_name is `name` ("str").
bool has_type_named(const Image& image, Address object, std::string_view name);

// "python3.11", "libpython3.11.so.1.0" → 11.
std::optional<int> minor_from_name(std::string_view name);

}  // namespace heapscope::cpython
