// JSON renderer of the chains report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json chain_json(const ChainRow& c) {
  return {{"type", c.type}, {"length", c.length}, {"bytes", c.bytes}, {"ring", c.ring}, {"leaked", c.leaked},
          {"head", json::block(c.head)}, {"tail", json::block(c.tail)}, {"depth", json::or_null(c.depth)},
          {"head_retained", json::or_null(c.head_retained)}, {"path", json::path(c.path)}};
}

}  // namespace

std::string render_json(const ChainsReport& r) {
  ordered_json chains = ordered_json::array();
  for (const ChainRow& c : r.rows) chains.push_back(chain_json(c));
  ordered_json out = {{"command", "chains"}, {"min_length", r.min_length}, {"chain_count", r.chains},
                      {"chained_blocks", r.chained_blocks}, {"chained_bytes", r.chained_bytes}, {"chains", chains}};
  return json::finish(std::move(out), r.warnings);
}

}  // namespace heapscope
