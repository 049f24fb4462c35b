#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

std::string render_text(const BlocksReport& r) {
  std::string out = fmt::format("{:<18} {:>12} {:>12}  {:<8} {}\n", "address", "usable", "chunk", "state", "arena");
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < r.blocks.size(); ++i) {
    const Block& b = r.blocks[i];
    bytes += b.chunk_size();
    const std::string verdict =
        i < r.verdicts.size() ? fmt::format("  {}{}", r.verdicts[i], r.possibly[i] ? " (possibly)" : "") : "";
    // The block's name when it has one, and the text it starts with.
    std::string what = i < r.type_ids.size() && r.type_ids[i] ? "  " + r.type_names[r.type_ids[i]] : "";
    if (i < r.texts.size() && !r.texts[i].empty()) what += fmt::format("  \"{}\"", r.texts[i]);
    out += fmt::format("{:<18} {:>12} {:>12}  {:<8} {}{}{}\n", text::hex(b.address()), b.usable_size(), b.chunk_size(),
                       block_state_name(b.state), b.arena == Block::kNoArena ? "-" : text::hex(r.arena_of(b)), verdict,
                       what);
  }
  out += fmt::format("{} {}, {} in chunks\n", r.blocks.size(), r.selection, text::bytes(bytes));
  if (r.matched > r.blocks.size())
    out += fmt::format("(the first {} of {} matching blocks: --limit)\n", r.blocks.size(), r.matched);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
