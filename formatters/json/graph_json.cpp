// JSON renderers of the graph commands' reports (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json total_json(const StateTotal& t) { return {{"blocks", t.blocks}, {"bytes", t.bytes}}; }

}  // namespace

std::string render_json(const LeaksReport& r) {
  ordered_json out = {{"command", "leaks"}};
  const bool by_site = r.by == "site";
  const auto groups_json = [&](const std::vector<LeakGroup>& of) {
    ordered_json groups = ordered_json::array();
    for (const LeakGroup& g : of) {
      ordered_json group = {{"type", g.type},        {"naming", g.naming}, {"size", g.size},
                            {"count", g.count},      {"bytes", g.bytes},   {"direct", g.direct},
                            {"indirect", g.indirect}, {"cycle", g.cycle},  {"examples", g.examples}};
      if (by_site) {
        group = {{"site", json::allocated_at(g.site)}, {"count", g.count},     {"bytes", g.bytes},
                 {"direct", g.direct},                 {"indirect", g.indirect}, {"cycle", g.cycle},
                 {"examples", g.examples}};
        if (r.sites && !r.sites->exact) {
          group["estimated_count"] = g.estimated_count;
          group["estimated_bytes"] = g.estimated_bytes;
        }
      }
      // Per example, the text it starts with: only for groups whose examples hold text.
      if (std::any_of(g.example_texts.begin(), g.example_texts.end(), [](auto& t) { return !t.empty(); }))
        group["example_texts"] = g.example_texts;
      groups.push_back(std::move(group));
    }
    return groups;
  };
  const ordered_json groups = groups_json(r.groups);
  out["by"] = r.by;
  if (r.sites) out["sites"] = json::sites_note(*r.sites);
  out["groups"] = groups;
  out["named"] = json::naming_shares(r.named);
  out["totals"] = {{"blocks", r.leaked.blocks}, {"bytes", r.leaked.bytes}, {"direct", total_json(r.direct)},
                   {"indirect", total_json(r.indirect)}, {"cycle", total_json(r.cycle)},
                   {"possibly", total_json(r.possibly)}};
  out["collectable"] = r.collectable ? ordered_json{{"collector", r.collectable->collector},
                                                    {"blocks", r.collectable->total.blocks},
                                                    {"bytes", r.collectable->total.bytes},
                                                    {"whole_page_bytes", r.collectable->whole_page_bytes},
                                                    {"groups", groups_json(r.collectable->groups)}}
                                     : ordered_json(nullptr);
  out["partial"] = r.partial;
  out["modules_without_symbols"] = r.modules_without_symbols;
  out["object_headers"] = r.object_headers.empty()
                              ? nlohmann::ordered_json(nullptr)
                              : nlohmann::ordered_json{{"layout", r.object_headers}, {"blocks", r.object_header_blocks}};
  out["graph_edges"] = r.graph_edges;
  ordered_json idioms = ordered_json::array();
  for (const LeaksReport::IdiomTotal& t : r.held_by_idioms)
    idioms.push_back({{"idiom", t.idiom}, {"offset", t.offset}, {"blocks", t.total.blocks}, {"bytes", t.total.bytes}});
  out["held_by_idioms"] = std::move(idioms);
  out["bytes_counted"] = "usable";
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const RetainersReport& r) {
  ordered_json out = {{"command", "retainers"}, {"query", r.query}, {"target", json::block(r.target)},
                      {"verdict", r.verdict}, {"allocated_at", json::allocated_at(r.allocated_at)}};
  ordered_json paths = ordered_json::array();
  for (const RetainerPath& p : r.paths) paths.push_back(json::path(p));
  out["paths"] = paths;
  out["depth_limited"] = r.depth_limited;
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const RefsReport& r) {
  ordered_json out = {{"command", "refs"}, {"query", r.query}, {"target", json::block(r.target)}};
  ordered_json refs = ordered_json::array();
  for (const Referrer& ref : r.referrers) {
    if (ref.block) {
      ordered_json j = {{"kind", "block"}};
      j.update(json::block(*ref.block));
      j["offset"] = ref.offset;
      j["field"] = ref.field;
      j["into"] = ref.into;
      refs.push_back(j);
    } else if (ref.root) {
      refs.push_back({{"kind", "root"}, {"root_kind", ref.root->kind}, {"label", ref.root->label},
                      {"address", ref.root->address}, {"into", ref.into}});
    }
  }
  out["referrers"] = refs;
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const DescribeReport& r) {
  ordered_json block = json::block(r.block);
  block.update({{"chunk", r.chunk}, {"chunk_size", r.chunk_size}, {"state", r.state}, {"arena", r.arena},
                {"verdict", r.verdict}, {"possibly", r.possibly}});
  if (!r.text.empty()) block["text"] = r.text;
  ordered_json pointers = ordered_json::array();
  for (const PointerSlot& p : r.pointers)
    pointers.push_back({{"offset", p.offset}, {"value", p.value}, {"points_to", p.points_to}, {"field", p.field}});
  ordered_json fields = ordered_json::array();
  for (const FieldRow& f : r.fields)
    fields.push_back({{"path", f.path}, {"type", f.type}, {"offset", f.offset}, {"value", f.value},
                      {"points_to", f.points_to}});
  ordered_json out = {{"command", "describe"}, {"query", r.query}, {"block", block},
                      {"bytes", r.dump}, {"pointers", pointers}, {"fields_type", r.fields_type},
                      {"fields", fields}, {"fields_truncated", r.fields_truncated},
                      {"allocated_at", json::allocated_at(r.allocated_at)}};
  if (!r.no_site.empty()) out["no_site"] = r.no_site;
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const HistogramReport& r) {
  ordered_json rows = ordered_json::array();
  for (const HistogramRow& h : r.rows) {
    ordered_json row;
    if (r.by == "site") {
      row = {{"site", json::allocated_at(h.site)}};
    } else if (r.by == "source") {
      row = {{"source", h.source}, {"types", h.types}};
    } else {
      row = {{"type", h.type}, {"naming", h.naming}, {"source", h.source}};
    }
    row["count"] = h.count;
    row["bytes"] = h.bytes;
    row["leaked_count"] = h.leaked_count;
    row["leaked_bytes"] = h.leaked_bytes;
    row["examples"] = h.examples;
    if (r.sites && !r.sites->exact && h.site) {
      row["estimated_count"] = h.estimated_count;
      row["estimated_bytes"] = h.estimated_bytes;
    }
    rows.push_back(std::move(row));
  }
  const char* rows_name = r.by == "site" ? "sites" : r.by == "source" ? "sources" : "types";
  ordered_json out = {{"command", "histogram"}, {"by", r.by}, {rows_name, rows},
                      {"allocated_blocks", r.allocated_blocks}};
  if (r.sites) {
    out["blocks_with_site"] = r.typed_blocks;
    out["sites_note"] = json::sites_note(*r.sites);
  } else {
    out["typed_blocks"] = r.typed_blocks;
  }
  return json::finish(std::move(out), r.warnings);
}

}  // namespace heapscope
