#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "formatters/render.h"

namespace heapscope {

std::string render_json(const BlocksReport& r) {
  // Built as text: a large core lists millions of blocks, and a json tree of them would cost several
  // hundred bytes per block.
  std::string out = "{\n  \"command\": \"blocks\",\n  \"selection\": " + json_text(nlohmann::json(r.selection)) +
                    ",\n  \"blocks\": [";
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < r.blocks.size(); ++i) {
    const Block& b = r.blocks[i];
    bytes += b.chunk_size();
    const std::string verdict =
        i < r.verdicts.size()
            ? fmt::format(", \"verdict\": \"{}\", \"possibly\": {}", r.verdicts[i], r.possibly[i] ? "true" : "false")
            : "";
    std::string type =
        i < r.type_ids.size() && is_allocated(b.state)
            ? ", \"type\": " + nlohmann::json(r.type_ids[i] ? r.type_names[r.type_ids[i]]
                                                              : fmt::format("unknown ({} bytes)", b.usable_size()))
                                     .dump() +
                  ", \"naming\": " + json_text(nlohmann::json(r.type_namings[r.type_ids[i]]))
            : std::string();
    if (i < r.texts.size() && !r.texts[i].empty()) type += ", \"text\": " + json_text(nlohmann::json(r.texts[i]));
    out += fmt::format("{}\n    {{\"address\": {}, \"chunk\": {}, \"usable_size\": {}, \"chunk_size\": {}, "
                       "\"state\": \"{}\", \"arena\": {}{}{}}}",
                       i ? "," : "", b.address(), b.chunk, b.usable_size(), b.chunk_size(),
                       block_state_name(b.state), r.arena_of(b), verdict, type);
  }
  out += fmt::format("\n  ],\n  \"count\": {},\n  \"matched\": {},\n  \"bytes\": {},\n  \"warnings\": {}\n}}\n",
                     r.blocks.size(), r.matched, bytes, json_text(nlohmann::json(r.warnings)));
  return out;
}

}  // namespace heapscope
