// JSON renderers of the retention reports: top and roots (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include <cmath>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

using json::add_retained;
using json::heap_json;


ordered_json root_node_json(const RootNodeRef& r) {
  return {{"kind", r.kind},     {"label", r.label}, {"depth", r.depth},     {"owner", r.owner},
          {"symbol", r.symbol}, {"module", r.module}, {"tid", r.tid}, {"address", r.address}};
}

ordered_json holder_json(const Holder& h) {
  ordered_json j;
  if (h.block) {
    j = {{"kind", "block"}};
    j.update(json::block(*h.block));
  } else if (h.root) {
    j = {{"kind", "root"}, {"root_kind", h.root->kind}};
    ordered_json root = root_node_json(*h.root);
    root.erase("kind");
    j.update(root);
  }
  return j;
}


ordered_json type_row_json(const TopTypeRow& t, bool with_retained) {
  ordered_json j = {{"type", t.type}, {"count", t.count}, {"bytes", t.bytes}};
  if (t.site) j["site"] = json::allocated_at(*t.site);
  if (with_retained) add_retained(j, t.retained);
  return j;
}

ordered_json root_row_json(const TopRootRow& row) {
  ordered_json j = root_node_json(row.root);
  add_retained(j, row.retained);
  return j;
}

ordered_json suspect_json(const Suspect& s) {
  const bool big = s.kind == Suspect::Kind::big_retainer;
  ordered_json j = {{"kind", big ? "big_retainer" : "accumulation"}, {"holder", holder_json(s.holder)}};
  add_retained(j, s.retained);
  if (big) {
    ordered_json types = ordered_json::array();
    for (const TopTypeRow& t : s.retained_types) types.push_back(type_row_json(t, false));
    j["retained_types"] = types;
    if (s.accumulation_point) {
      ordered_json point = holder_json(*s.accumulation_point);
      add_retained(point, s.accumulation_retained);
      j["accumulation_point"] = point;
    } else {
      j["accumulation_point"] = nullptr;
    }
  } else {
    j["type"] = s.type;
    j["instances"] = s.instances;
    j["instance_bytes"] = s.instance_bytes;
  }
  j["path"] = json::path(s.path);
  return j;
}

}  // namespace

std::string render_json(const TopReport& r) {
  ordered_json rows = ordered_json::array();
  for (const TopBlockRow& b : r.blocks) {
    ordered_json j = json::block(b.block);
    add_retained(j, b.retained);
    rows.push_back(j);
  }
  for (const TopTypeRow& t : r.types) rows.push_back(type_row_json(t, true));
  for (const TopRootRow& row : r.roots) rows.push_back(root_row_json(row));
  ordered_json suspects = ordered_json::array();
  for (const Suspect& s : r.suspects) suspects.push_back(suspect_json(s));
  ordered_json out = {{"command", "top"}, {"by", r.by}, {"heap", heap_json(r.heap)}, {"rows", rows},
                      {"suspects", suspects}};
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const RootsReport& r) {
  ordered_json kinds = ordered_json::array();
  for (const RootKindRow& k : r.kinds) {
    ordered_json j = {{"kind", k.kind}, {"roots", k.roots}};
    add_retained(j, k.retained);
    ordered_json together;
    add_retained(together, k.together);
    j["together"] = std::move(together);
    if (!k.parts.empty()) {
      ordered_json parts = ordered_json::object();
      for (const RootPartTotal& p : k.parts) parts[p.kind] = {{"retained_bytes", p.bytes}, {"retained_blocks", p.blocks}};
      j["parts"] = parts;
    }
    kinds.push_back(j);
  }
  ordered_json shared;
  add_retained(shared, r.shared);
  ordered_json roots = ordered_json::array();
  for (const TopRootRow& row : r.roots) roots.push_back(root_row_json(row));
  ordered_json out = {{"command", "roots"}, {"heap", heap_json(r.heap)}, {"kinds", kinds}, {"shared", shared},
                      {"roots", roots}, {"root_count", r.root_count}};
  return json::finish(std::move(out), r.warnings);
}

}  // namespace heapscope
