// The names of a whole heap (Session::names(): BlockTypes and the DWARF type behind each type id) as the
// index cache keeps them (session/index_cache.h): the type table as JSON text, the type id of every block
// apart, raw (TypeIdArray::bytes).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "base/bounded_scan.h"
#include "types/block_types.h"
#include "types/dwarf_typing.h"

namespace heapscope {

std::string names_meta_to_json(const BlockTypes& types, const DwarfTypes& dwarf);
// `types` and `dwarf`'s type of each id from `text` (what names_meta_to_json wrote) and the saved ids of a
// heap of `blocks` blocks, viewed in memory `keep` holds; false (and *why) when they do not fit it. Their
// DWARF types resolve when asked for (DwarfTypes::restore). Each block's type id is checked unless `checks`
// says the sizes alone.
bool names_from_saved(const std::string& text, std::span<const std::byte> ids, const std::shared_ptr<const void>& keep,
                      std::size_t blocks, ItemChecks checks, BlockTypes& types, DwarfTypes& dwarf, std::string* why);

}  // namespace heapscope
