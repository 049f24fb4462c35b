// JSON renderer of the finalizers report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json registration_json(const FinalizerRow& f) {
  ordered_json j = {{"kind", f.kind},
                    {"function", f.function},
                    {"module", f.module},
                    {"function_address", f.function_address},
                    {"object", f.object},
                    {"slot", f.slot},
                    {"tid", f.tid},
                    {"exited_thread", f.exited_thread},
                    {"key", f.key ? ordered_json(*f.key) : ordered_json(nullptr)},
                    {"variable", f.variable},
                    {"label", f.label}};
  json::add_retained(j, f.retained);
  return j;
}

}  // namespace

std::string render_json(const FinalizersReport& r) {
  ordered_json registrations = ordered_json::array();
  for (const FinalizerRow& f : r.registrations) registrations.push_back(registration_json(f));
  ordered_json kinds = ordered_json::array();
  for (const FinalizerKindTotal& k : r.kinds)
    kinds.push_back({{"kind", k.kind}, {"registrations", k.registrations}, {"retained_bytes", k.retained_bytes}});
  ordered_json functions = ordered_json::array();
  for (const FinalizerFunctionGroup& g : r.functions)
    functions.push_back({{"function", g.function},
                         {"module", g.module},
                         {"kind", g.kind},
                         {"registrations", g.registrations},
                         {"retained_bytes", g.retained_bytes},
                         {"retained_blocks", g.retained_blocks}});
  ordered_json total;
  json::add_retained(total, r.total);
  ordered_json out = {{"command", "finalizers"}, {"heap", json::heap_json(r.heap)},
                      {"total", total},          {"kinds", kinds},
                      {"functions", functions},  {"registrations_total", r.registrations_total},
                      {"registrations", registrations}, {"warnings", r.warnings}};
  return json_text(out, 2) + "\n";
}

}  // namespace heapscope
