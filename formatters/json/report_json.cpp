// JSON of `report`: each part is its own command's JSON (docs/json.md), nested under the part's name.
#include <nlohmann/json.hpp>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

template <typename Part>
ordered_json part_json(const std::optional<Part>& part) {
  return part ? ordered_json::parse(render_json(*part)) : ordered_json(nullptr);
}

}  // namespace

std::string render_json(const ReportBundle& r) {
  ordered_json out = {{"command", "report"}};
  out["summary"] = ordered_json::parse(render_json(r.summary));
  out["leaks"] = part_json(r.leaks);
  out["top"] = part_json(r.top);
  out["roots"] = part_json(r.roots);
  out["fragmentation"] = part_json(r.fragmentation);
  out["evolution"] = part_json(r.evolution);
  out["sites"] = part_json(r.sites);
  return json::finish(out, r.warnings);
}

}  // namespace heapscope
