// JSON renderer of the threads report (schema: docs/json.md).
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "formatters/json/json_parts.h"
#include "formatters/render.h"

namespace heapscope {

namespace {

using nlohmann::ordered_json;



ordered_json frames_json(const std::vector<FrameRetention>& frames) {
  ordered_json out = ordered_json::array();
  for (const FrameRetention& f : frames)
    out.push_back({{"frame", f.frame}, {"label", f.label}, {"variable", f.variable}, {"retained_bytes", f.retained}});
  return out;
}

ordered_json live_thread_json(const LiveThreadRow& t) {
  return {{"tid", t.tid},
          {"name", t.name},
          {"stack_start", t.stack_start},
          {"stack_end", t.stack_end},
          {"stack_size", t.stack_end - t.stack_start},
          {"retained_bytes", t.retained},
          {"stack_retained_bytes", t.stack_retained},
          {"registers_retained_bytes", t.registers_retained},
          {"tls_retained_bytes", t.tls_retained},
          {"frames", frames_json(t.frames)}};
}

ordered_json exited_thread_json(const ExitedThreadRow& t) {
  return {{"pthread", t.pthread},
          {"stack_start", t.stack_start},
          {"stack_end", t.stack_end},
          {"stack_size", t.stack_end - t.stack_start},
          {"in_stack_cache", t.in_stack_cache},
          {"descriptor_retained_bytes", t.descriptor_retained},
          {"holders", t.holders}};
}

ordered_json holder_json(const HandleHolder& h) {
  ordered_json j;
  if (h.block) {
    j = {{"kind", "block"}};
    j.update(json::block(*h.block));
    j["path"] = json::path(h.path);
    j["retained_by"] = h.retained_by;
  } else if (h.root) {
    j = {{"kind", "root"}, {"root_kind", h.root->kind}, {"label", h.root->label}, {"address", h.root->address}};
  }
  j["handles"] = h.handles;
  j["stack_bytes"] = h.stack_bytes;
  return j;
}

}  // namespace

std::string render_json(const ThreadsReport& r) {
  ordered_json threads = ordered_json::array();
  for (const LiveThreadRow& t : r.threads) threads.push_back(live_thread_json(t));
  ordered_json exited_threads = ordered_json::array();
  for (const ExitedThreadRow& t : r.exited) exited_threads.push_back(exited_thread_json(t));
  ordered_json holders = ordered_json::array();
  for (const HandleHolder& h : r.holders) holders.push_back(holder_json(h));
  ordered_json groups = ordered_json::array();
  for (const HandleHolderGroup& g : r.holder_groups)
    groups.push_back({{"holder", g.holder}, {"holders", g.holders}, {"handles", g.handles},
                      {"stack_bytes", g.stack_bytes}});
  ordered_json exited = {{"count", r.exited.size()},
                         {"stack_bytes", r.exited_stack_bytes},
                         {"descriptor_retained_bytes", r.exited_descriptor_retained},
                         {"unheld", r.unheld_handles},
                         {"threads", exited_threads},
                         {"holders", holders},
                         {"holder_groups", groups}};
  ordered_json out = {{"command", "threads"}, {"threads", threads}, {"exited", exited}, {"warnings", r.warnings}};
  return json_text(out, 2) + "\n";
}

}  // namespace heapscope
