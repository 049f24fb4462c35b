// JSON pieces several reports share: a block, a root, a retainer path. One shape everywhere, so a path
// in `top` reads like a path in `retainers` (docs/json.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/json_text.h"
#include "reports/graph_reports.h"
#include "reports/retention_reports.h"

namespace heapscope::json {

using nlohmann::ordered_json;

// [{"naming": "dwarf", "blocks": 12, "bytes": 672}, ...]
inline ordered_json naming_shares(const std::vector<NamingShare>& shares) {
  ordered_json out = ordered_json::array();
  for (const NamingShare& s : shares) out.push_back({{"naming", s.naming}, {"blocks", s.blocks}, {"bytes", s.bytes}});
  return out;
}

inline ordered_json block(const BlockRef& b) {
  return {{"address", b.address}, {"size", b.size}, {"type", b.type}, {"naming", b.naming}};
}

// {"site": 3, "frames": [{"pc", "function", "file", "line", "module_offset", "text"}...], "more_frames", "requested"}
inline ordered_json allocated_at(const AllocatedAt& a) {
  ordered_json frames = ordered_json::array();
  for (const SiteFrame& f : a.frames)
    frames.push_back({{"pc", f.pc}, {"function", f.function}, {"file", f.file}, {"line", f.line},
                      {"module_offset", f.module_offset}, {"text", f.text}});
  ordered_json out = {{"site", a.site}, {"frames", std::move(frames)}, {"more_frames", a.more_frames},
                      {"stack", a.stack}};
  if (a.requested) out["requested"] = a.requested;
  return out;
}

inline ordered_json allocated_at(const std::optional<AllocatedAt>& a) {
  return a ? allocated_at(*a) : ordered_json(nullptr);
}

inline ordered_json sites_note(const SitesNote& n) {
  return {{"present", n.present}, {"exact", n.exact},   {"source", n.source}, {"mean_interval", n.mean_interval},
          {"blocks", n.blocks},   {"sites", n.sites},   {"note", n.sentence}};
}

inline ordered_json root(const RootRef& r) {
  return {{"kind", r.kind}, {"label", r.label}, {"address", r.address}, {"field", r.field}};
}

inline ordered_json path(const RetainerPath& p) {
  ordered_json steps = ordered_json::array();
  for (const PathStep& s : p.steps) {
    ordered_json step = block(s.block);
    step["into"] = s.into;
    if (s.offset) step["offset"] = *s.offset;
    step["field"] = s.field;
    step["retained"] = s.retained;
    steps.push_back(step);
  }
  return {{"root", root(p.root)}, {"steps", steps}};
}

// An optional value, or null.
template <typename T>
ordered_json or_null(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

inline ordered_json path(const std::optional<RetainerPath>& p) { return p ? path(*p) : ordered_json(nullptr); }

// A report's JSON with its warnings last, as every command prints it.
inline std::string finish(ordered_json out, const std::vector<std::string>& warnings) {
  out["warnings"] = warnings;
  return json_text(out, 2) + "\n";
}

inline double rounded_percent(double p) { return std::round(p * 1000.0) / 1000.0; }

// A retained size as "retained_bytes", "retained_blocks" and "retained_percent" members of `j`.
inline void add_retained(ordered_json& j, const Retained& r) {
  j["retained_bytes"] = r.bytes;
  j["retained_blocks"] = r.blocks;
  j["retained_percent"] = rounded_percent(r.percent);
}

inline ordered_json heap_json(const HeapTotals& h) {
  return {{"in_use_bytes", h.in_use_bytes}, {"in_use_blocks", h.in_use_blocks},
          {"reachable_bytes", h.reachable_bytes}, {"reachable_blocks", h.reachable_blocks}};
}

}  // namespace heapscope::json
