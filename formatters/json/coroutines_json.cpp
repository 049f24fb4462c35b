// JSON renderer of the coroutines report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;

ordered_json function_json(const CoroutineFunctionRow& f) {
  ordered_json points = ordered_json::array();
  for (const auto& [point, count] : f.suspend_points) points.push_back({{"suspend_point", point}, {"frames", count}});
  return {{"function", f.function}, {"module", f.module},   {"source", f.source},
          {"frames", f.frames},     {"bytes", f.bytes},     {"frame_size", f.frame_size},
          {"promise_type", f.promise_type}, {"suspend_points", points}};
}

ordered_json stack_json(const AsyncStack& s) {
  ordered_json frames = ordered_json::array();
  for (const AsyncStackFrame& f : s.frames)
    frames.push_back({{"function", f.function}, {"suspend_point", f.suspend_point}, {"repeat", f.repeat}});
  return {{"count", s.count},         {"depth", s.depth},         {"bytes", s.bytes}, {"frames", frames},
          {"outermost", s.outermost}, {"innermost", s.innermost}, {"held_by", s.held_by}, {"leaked", s.leaked}};
}

}  // namespace

std::string render_json(const CoroutinesReport& r) {
  ordered_json functions = ordered_json::array();
  for (const CoroutineFunctionRow& f : r.functions) functions.push_back(function_json(f));
  ordered_json out = {{"command", "coroutines"}, {"total_frames", r.total_frames}, {"total_bytes", r.total_bytes}, {"functions", functions}};
  if (r.with_stacks) {
    ordered_json stacks = ordered_json::array();
    for (const AsyncStack& s : r.stacks) stacks.push_back(stack_json(s));
    out["stacks"] = stacks;
  }
  out["warnings"] = r.warnings;
  return json_text(out, 2) + "\n";
}

}  // namespace heapscope
