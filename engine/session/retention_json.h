// The root nodes of a Retention (its ownership tree: owner kinds, owners, parts) and its two in-use totals,
// as JSON text, for the index cache (session/index_cache.h). The per-node arrays are saved apart, raw.
#pragma once

#include <optional>
#include <string>

#include "model/retention.h"

namespace heapscope {

std::string retention_meta_to_json(const Retention::Saved& saved);
// Fills root_nodes and the totals of `saved` from `text`; false when it is not what retention_meta_to_json wrote.
bool retention_meta_from_json(const std::string& text, Retention::Saved& saved);

}  // namespace heapscope
