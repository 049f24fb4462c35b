// Names from what a block's bytes are, for blocks no type names: "C string" (NUL-terminated text from its
// first byte, unless that first word is a mapped address whose bytes happen to print), "pointer array"
// (every word null or a pointer, most of them pointers), "all zeros". The weakest evidence
// (Naming::content), used last; and a short escaped preview of a block's text, which reports show next to
// any block that holds text, whatever its name.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "heap/heap_model.h"
#include "image/image.h"
#include "model/block_index.h"
#include "types/block_types.h"

namespace heapscope {

// Names each unnamed block of `blocks` whose bytes say what it is.
void name_by_content(const Image& image, const HeapModel& heap, const BlockIndex& index,
                     std::span<const BlockId> blocks, BlockTypes& types);

// The text the block starts with, escaped (\n, \t, \xNN) and cut to `max_chars` with "…"; nullopt when
// it does not start with NUL-terminated text.
std::optional<std::string> text_preview(const Image& image, const Block& block, std::size_t max_chars = 48);

}  // namespace heapscope
