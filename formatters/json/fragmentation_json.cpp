// JSON renderer of the fragmentation report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json blocker_json(const TrimBlocker& b) {
  ordered_json j = json::block(b.block);
  j["state"] = b.state;
  j["chunk"] = b.chunk;
  j["chunk_bytes"] = b.chunk_bytes;
  j["bytes_above"] = b.bytes_above;
  j["returnable_if_freed"] = b.returnable_if_freed;
  return j;
}

ordered_json arena_json(const ArenaFragmentation& a) {
  ordered_json blockers = ordered_json::array();
  for (const TrimBlocker& b : a.blockers) blockers.push_back(blocker_json(b));
  return {{"address", a.address}, {"main", a.is_main}, {"heaps", a.heaps}, {"system_bytes", a.system_bytes},
          {"in_use_bytes", a.in_use_bytes}, {"in_use_blocks", a.in_use_blocks}, {"free_bytes", a.free_bytes},
          {"tcache_bytes", a.tcache_bytes}, {"fastbin_bytes", a.fastbin_bytes}, {"top_bytes", a.top_bytes},
          {"overhead_bytes", a.overhead_bytes}, {"largest_free_chunk", a.largest_free_chunk},
          {"trim_known", a.trim_known}, {"trim_on_free", a.trim_on_free}, {"malloc_trim_returned", a.malloc_trim_returned},
          {"malloc_trim_madvised", a.malloc_trim_madvised}, {"blockers", blockers}};
}

ordered_json buckets_json(const FillBuckets& buckets) {
  ordered_json out = ordered_json::array();
  for (int i = 0; i < kFillBucketCount; ++i)
    out.push_back({{"from_percent", i * 10}, {"to_percent", i * 10 + 10}, {"count", buckets[i]}});
  return out;
}

ordered_json type_rows_json(const std::vector<FragmentationTypeRow>& rows) {
  ordered_json out = ordered_json::array();
  for (const FragmentationTypeRow& row : rows) {
    ordered_json samples = ordered_json::array();
    for (const FragmentationSample& s : row.samples) samples.push_back({{"block", json::block(s.block)}, {"path", json::path(s.path)}});
    out.push_back({{"type", row.type}, {"count", row.count}, {"bytes", row.bytes}, {"samples", samples}});
  }
  return out;
}

}  // namespace

std::string render_json(const FragmentationReport& r) {
  ordered_json arenas = ordered_json::array();
  for (const ArenaFragmentation& a : r.arenas) arenas.push_back(arena_json(a));
  ordered_json out = {{"command", "fragmentation"},
                      {"trim_threshold", json::or_null(r.trim_threshold)},
                      {"top_pad", json::or_null(r.top_pad)},
                      {"trim_available", r.trim_unavailable.empty()},
                      {"page_bytes", r.page_bytes},
                      {"region_bytes", r.region_bytes},
                      {"arenas", arenas},
                      {"pages", r.pages},
                      {"regions", r.regions},
                      {"page_fill", buckets_json(r.page_fill)},
                      {"region_fill", buckets_json(r.region_fill)},
                      {"sparse_blocks", r.sparse_blocks},
                      {"sparse_bytes", r.sparse_bytes},
                      {"sparse_type_count", r.sparse_type_count},
                      {"sparse_types", type_rows_json(r.sparse_types)},
                      {"blocker_types", type_rows_json(r.blocker_types)},
                      {"partial", r.partial},
                      {"skipped_bytes", r.skipped_bytes}};
  ordered_json classes = ordered_json::array();
  for (const SizeClassUse& c : r.size_classes)
    classes.push_back({{"object_bytes", c.object_bytes}, {"slabs", c.slabs}, {"slab_bytes", c.slab_bytes},
                       {"in_use", c.in_use}, {"cached", c.cached}, {"free", c.free}});
  out["size_classes"] = classes;
  ordered_json pages = ordered_json::array();
  for (const FreePages& f : r.free_pages)
    pages.push_back({{"kind", f.kind}, {"meaning", f.meaning}, {"runs", f.runs}, {"bytes", f.bytes}});
  out["free_pages"] = pages;
  return json::finish(std::move(out), r.warnings);
}

}  // namespace heapscope
