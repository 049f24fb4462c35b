// JSON renderer of the verify report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json address_or_null(Address a) { return a ? ordered_json(a) : ordered_json(nullptr); }

ordered_json finding_json(const HeapFinding& f) {
  return {{"kind", f.kind}, {"chunk", address_or_null(f.chunk)}, {"expected", f.expected}, {"found", f.found},
          {"last_good_chunk", address_or_null(f.last_good)}, {"arena", address_or_null(f.arena)},
          {"heap", address_or_null(f.heap)}, {"where", f.where}, {"affects", f.affects}};
}

ordered_json checked_json(const HeapCheckCounts& c) {
  return {{"arenas", c.arenas}, {"heaps", c.heaps}, {"chunks", c.chunks}, {"bin_entries", c.bin_entries},
          {"fastbin_entries", c.fastbin_entries}, {"tcaches", c.tcaches}, {"tcache_entries", c.tcache_entries}};
}

}  // namespace

std::string render_json(const VerifyReport& r) {
  ordered_json findings = ordered_json::array();
  for (const HeapFinding& f : r.result.findings) findings.push_back(finding_json(f));
  ordered_json out = {{"command", "verify"}, {"allocator", r.allocator}, {"version", r.version},
                      {"problems", r.result.findings.size() + r.result.findings_dropped},
                      {"checked", checked_json(r.result.checked)},
                      {"checked_in_own_words", r.result.checked_in_own_words}, {"findings", findings},
                      {"findings_not_listed", r.result.findings_dropped}, {"not_checked", r.result.notes}};
  return json::finish(std::move(out), r.warnings);
}

}  // namespace heapscope
