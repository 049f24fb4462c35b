// A runtime's object headers (runtime/object_headers.h) as the index cache keeps them (session/index_cache.h):
// what was recognised, the count and the type names as JSON text; the start and the type of every block
// apart, raw.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "base/bounded_scan.h"
#include "runtime/object_headers.h"

namespace heapscope {

std::string object_headers_meta_to_json(const ObjectHeaders& headers);
// `headers` from `text` (what object_headers_meta_to_json wrote) and the saved arrays (`ends` empty when
// none was saved) of a heap of
// `blocks` blocks, viewed in memory `keep` holds; false when they do not fit it (each block's type
// checked, unless `checks` says the sizes alone).
bool object_headers_from_saved(const std::string& text, std::span<const std::byte> starts,
                               std::span<const std::byte> types, std::span<const std::byte> ends,
                               std::span<const std::byte> strided, std::size_t blocks,
                               const std::shared_ptr<const void>& keep, ItemChecks checks, ObjectHeaders& headers);

}  // namespace heapscope
