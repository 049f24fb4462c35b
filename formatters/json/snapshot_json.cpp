// JSON renderers of the snapshot reports (docs/json.md: snapshot, diff, evolution).
#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using json::ordered_json;

ordered_json snapshot_json(const SnapshotInfo& s) {
  return {{"name", s.name},           {"target", s.target},
          {"pid", s.pid},             {"capture_time_ns", s.capture_time_ns},
          {"in_use_blocks", s.in_use_blocks}, {"in_use_bytes", s.in_use_bytes},
          {"types", s.types},         {"roots", s.roots}};
}

ordered_json rows_json(const std::vector<DiffRow>& rows, bool roots) {
  ordered_json out = ordered_json::array();
  for (const DiffRow& r : rows) {
    ordered_json row = {{roots ? "root" : "type", r.name}};
    if (roots) row["kind"] = r.kind;
    row["before_count"] = r.before_count;
    row["before_bytes"] = r.before_bytes;
    row["after_count"] = r.after_count;
    row["after_bytes"] = r.after_bytes;
    row["delta_count"] = r.delta_count;
    row["delta_bytes"] = r.delta_bytes;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

std::string render_json(const SnapshotReport& r) {
  ordered_json snapshots = ordered_json::array();
  for (const SnapshotInfo& s : r.snapshots) snapshots.push_back(snapshot_json(s));
  return json::finish({{"command", "snapshot"}, {"action", r.action}, {"file", r.file}, {"snapshots", snapshots}}, r.warnings);
}

std::string render_json(const DiffReport& r) {
  ordered_json out = {{"command", "snapshot"}, {"action", "diff"}, {"before", snapshot_json(r.before)}, {"after", snapshot_json(r.after)},
                      {"by", r.by},
                      {"type_count", r.type_count},       {"types", rows_json(r.types, false)},
                      {"root_count", r.root_count},       {"roots", rows_json(r.roots, true)},
                      {"addresses_compared", r.addresses_compared}};
  if (r.addresses_compared) {
    ordered_json by_type = ordered_json::array();
    for (const AddressDiffRow& row : r.new_by_type)
      by_type.push_back({{"type", row.type}, {"new_count", row.new_count}, {"new_bytes", row.new_bytes},
                         {"gone_count", row.gone_count}, {"gone_bytes", row.gone_bytes}});
    ordered_json samples = ordered_json::array();
    for (const NewBlockSample& s : r.samples) samples.push_back({{"block", json::block(s.block)}, {"path", json::path(s.path)}});
    out["addresses"] = {{"kept_blocks", r.kept_blocks}, {"new_blocks", r.new_blocks}, {"new_bytes", r.new_bytes},
                        {"gone_blocks", r.gone_blocks}, {"gone_bytes", r.gone_bytes}, {"by_type", by_type},
                        {"new_samples", samples}};
  }
  return json::finish(std::move(out), r.warnings);
}

std::string render_json(const EvolutionReport& r) {
  ordered_json points = ordered_json::array();
  for (const SnapshotInfo& p : r.points) points.push_back(snapshot_json(p));
  ordered_json series = ordered_json::array();
  for (const EvolutionSeries& s : r.series)
    series.push_back({{"type", s.type}, {"steady", s.steady}, {"growth_bytes", s.growth_bytes}, {"bytes", s.bytes},
                      {"counts", s.counts}});
  return json::finish({{"command", "evolution"}, {"points", points}, {"by", r.by}, {"type_count", r.type_count}, {"series", series}}, r.warnings);
}

}  // namespace heapscope
