#include "session/retention_json.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace heapscope {

// A field added to RootNode must be saved below (and the index format version bumped): this fails to
// compile until then.
static_assert(sizeof(RootNode) == 176);

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RootNode, level, owner_kind, parent, kind, label, symbol, module, thread, address,
                                   frame, variable, finalizer)

std::string retention_meta_to_json(const Retention::Saved& saved) {
  const nlohmann::json j = {{"root_nodes", saved.root_nodes},
                            {"in_use_bytes", saved.in_use_bytes},
                            {"in_use_blocks", saved.in_use_blocks}};
  return json_text(j);
}

bool retention_meta_from_json(const std::string& text, Retention::Saved& saved) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    saved.root_nodes = j.at("root_nodes").get<std::vector<RootNode>>();
    saved.in_use_bytes = j.at("in_use_bytes").get<std::uint64_t>();
    saved.in_use_blocks = j.at("in_use_blocks").get<std::uint64_t>();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace heapscope
