// JSON pieces several reports share: a block, a root, a retainer path. One shape everywhere, so a path
// in `top` reads like a path in `retainers` (docs/json.md).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "reports/graph_reports.h"

namespace heapscope::json {

using nlohmann::ordered_json;

inline ordered_json block(const BlockRef& b) { return {{"address", b.address}, {"size", b.size}, {"type", b.type}}; }

inline ordered_json root(const RootRef& r) { return {{"kind", r.kind}, {"label", r.label}, {"address", r.address}}; }

inline ordered_json path(const RetainerPath& p) {
  ordered_json steps = ordered_json::array();
  for (const PathStep& s : p.steps) {
    ordered_json step = block(s.block);
    if (s.offset) step["offset"] = *s.offset;
    step["retained"] = s.retained;
    steps.push_back(step);
  }
  return {{"root", root(p.root)}, {"steps", steps}};
}

inline ordered_json path(const std::optional<RetainerPath>& p) { return p ? path(*p) : ordered_json(nullptr); }

// A report's JSON with its warnings last, as every command prints it.
inline std::string finish(ordered_json out, const std::vector<std::string>& warnings) {
  out["warnings"] = warnings;
  return out.dump(2) + "\n";
}

}  // namespace heapscope::json
