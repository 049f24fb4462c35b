#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json state_totals(const StateTotals& t, bool with_mmapped) {
  ordered_json out = ordered_json::object();
  for (int s = 0; s < kBlockStateCount; ++s) {
    const auto state = static_cast<BlockState>(s);
    if (state == BlockState::mmapped && !with_mmapped) continue;
    out[block_state_name(state)] = {{"blocks", t[s].blocks}, {"bytes", t[s].bytes}};
  }
  return out;
}

ordered_json mallinfo_json(const MallInfo& m) {
  return {{"arena", m.arena},       {"ordblks", m.ordblks}, {"smblks", m.smblks},   {"hblks", m.hblks},
          {"hblkhd", m.hblkhd},     {"usmblks", m.usmblks}, {"fsmblks", m.fsmblks}, {"uordblks", m.uordblks},
          {"fordblks", m.fordblks}, {"keepcost", m.keepcost}};
}

ordered_json heap_json(const SummaryReport& r) {
  if (!r.heap_error.empty()) return {{"error", r.heap_error}};
  ordered_json heap = {{"allocator", r.allocator}, {"glibc_version", r.allocator == "glibc" ? r.version : std::string()},
                       {"version", r.version}, {"complete", r.heap_complete}};
  ordered_json discovery = ordered_json::array();
  for (const Discovery& d : r.discovery)
    discovery.push_back({{"structure", d.structure}, {"address", d.address}, {"method", d.method}});
  heap["discovery"] = discovery;
  ordered_json arenas = ordered_json::array();
  for (const ArenaInfo& a : r.arenas) {
    ordered_json heaps = ordered_json::array();
    for (const HeapSegment& h : a.heaps) heaps.push_back({{"start", h.start}, {"end", h.end}});
    arenas.push_back({{"address", a.address},
                      {"main", a.is_main},
                      {"system_bytes", a.system_bytes},
                      {"overhead_bytes", a.overhead_bytes},
                      {"complete", a.complete},
                      {"heaps", heaps},
                      {"states", state_totals(a.totals, false)}});
  }
  heap["arenas"] = arenas;
  heap["mmapped"] = {{"blocks", r.mmapped.blocks}, {"bytes", r.mmapped.bytes}};
  heap["totals"] = state_totals(r.totals, true);
  heap["reserved"] = {{"ranges", r.reserved.blocks}, {"bytes", r.reserved.bytes}};
  if (r.sites) {
    heap["allocation_sites"] = json::sites_note(*r.sites);
    heap["allocation_sites"]["note"] = r.sites->summary;
  }
  if (r.mallinfo) heap["mallinfo2"] = mallinfo_json(*r.mallinfo);
  ordered_json labels = ordered_json::object();
  for (int s = 0; s < kBlockStateCount; ++s)
    if (!r.state_labels[s].empty()) labels[block_state_name(static_cast<BlockState>(s))] = r.state_labels[s];
  heap["state_labels"] = labels;
  ordered_json figures = ordered_json::array();
  for (const AllocatorFigure& f : r.figures)
    figures.push_back({{"name", f.name},
                       {"meaning", f.meaning},
                       {"own", f.own ? ordered_json(*f.own) : ordered_json(nullptr)},
                       {"walk", f.walk ? ordered_json(*f.walk) : ordered_json(nullptr)}});
  heap["figures"] = figures;
  return heap;
}

}  // namespace

std::string render_json(const SummaryReport& r) {
  ordered_json out;
  out["command"] = "summary";
  out["target"] = {{"description", r.target}, {"pid", r.pid}, {"executable", r.executable},
                   {"command_line", r.command_line}};
  out["threads"] = ordered_json::array();
  for (const ThreadRow& t : r.threads) out["threads"].push_back({{"tid", t.tid}, {"name", t.name}});
  out["modules"] = ordered_json::array();
  for (const ModuleRow& m : r.modules)
    out["modules"].push_back({{"path", m.path},
                              {"load_bias", m.load_bias},
                              {"build_id", m.build_id},
                              {"symbols", m.symbols},
                              {"file", {{"path", m.file}, {"origin", m.file_origin}}},
                              {"debug_file", m.debug_file},
                              {"symtab_source", m.symtab_source},
                              {"dwarf_source", m.dwarf_source},
                              {"missing", m.missing},
                              {"install_hint", m.install_hint}});
  out["heap"] = heap_json(r);
  if (r.typed)
    out["typed"] = {{"blocks", r.typed->blocks},
                    {"bytes", r.typed->bytes},
                    {"allocated_blocks", r.typed->in_use_blocks},
                    {"allocated_bytes", r.typed->in_use_bytes},
                    {"bytes_percent", json::rounded_percent(r.typed->bytes_percent())},
                    {"by_naming", json::naming_shares(r.typed->by_naming)}};
  if (r.outside_malloc) {
    ordered_json largest = ordered_json::array();
    for (const AnonymousMapping& m : r.outside_malloc->largest)
      largest.push_back({{"start", m.start}, {"end", m.end}, {"bytes", m.outside_bytes}});
    out["outside_malloc"] = {
        {"bytes", r.outside_malloc->bytes}, {"mappings", r.outside_malloc->mappings}, {"largest", largest}};
  }
  out["warnings"] = r.warnings;
  return json_text(out, 2) + "\n";
}

}  // namespace heapscope
