// glibc's trimming rules over a walked heap: what free()'s automatic trim (systrim, heap_trim) and
// malloc_trim(0) (top, then mtrim's madvise of whole pages inside consolidated free chunks) would give back,
// and the live chunks under top that block it (docs/architecture.md, "What trimming returns").
#pragma once

#include <cstdint>
#include <optional>

#include "heap/heap_model.h"
#include "heap/trim_model.h"

namespace heapscope::glibc {

// glibc's DEFAULT_TRIM_THRESHOLD and the top pad its releases start with, for heaps whose mp_ was not found.
inline constexpr TrimSettings kDefaultTrim{128 * 1024, 128 * 1024};

// What trimming returns from a top chunk of `top_bytes` keeping `pad` bytes: whole pages beyond
// pad + MINSIZE.
std::uint64_t trimmable_top_bytes(std::uint64_t top_bytes, std::uint64_t pad, std::uint64_t page_bytes);

// Whole pages malloc_trim(0) madvises inside one free chunk (mtrim: from the first page boundary past the
// chunk's bin pointers to the chunk's end).
std::uint64_t madvisable_bytes(Address chunk, std::uint64_t chunk_bytes, std::uint64_t page_bytes);

// One arena under `settings` (the walk's, else kDefaultTrim, said in the warnings), with at most
// `max_blockers` blockers.
ArenaTrim arena_trim(const HeapModel& heap, std::size_t arena, const std::optional<TrimSettings>& settings,
                     std::size_t max_blockers, std::uint64_t page_bytes);

}  // namespace heapscope::glibc
