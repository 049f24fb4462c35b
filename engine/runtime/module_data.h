// A module's writable data (.data, .bss) at runtime addresses, and a scan of it for a structure with a
// signature: how an allocator plug-in finds the hidden globals of a stripped library (tcmalloc's statics,
// jemalloc's arenas and radix tree) and glibc's finalizers find libc's exit handler lists.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "image/image.h"
#include "symbols/module_symbols.h"

namespace heapscope {

// Address ranges [start, end) of a module's writable PT_LOAD segments, start rounded down to 8 bytes.
using WritableRanges = std::vector<std::pair<Address, Address>>;
WritableRanges writable_ranges(const Module& module, const ModuleSymbols& symbols);

// Calls `try_at(address)` for each 8-aligned word of `ranges` for which `word_matches(address, word)`
// holds, in address order, until one returns true; returns that address.
std::optional<Address> scan_writable(const Image& image, const WritableRanges& ranges,
                                     const std::function<bool(Address, std::uint64_t)>& word_matches,
                                     const std::function<bool(Address)>& try_at);

}  // namespace heapscope
