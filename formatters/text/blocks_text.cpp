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
    out += fmt::format("{:<18} {:>12} {:>12}  {:<8} {}{}\n", text::hex(b.address()), b.usable_size(), b.chunk_size(),
                       block_state_name(b.state), b.arena == Block::kNoArena ? "-" : text::hex(r.arena_of(b)), verdict);
  }
  out += fmt::format("{} {}, {} in chunks\n", r.blocks.size(), r.selection, text::bytes(bytes));
  if (r.matched > r.blocks.size())
    out += fmt::format("(the first {} of {} matching blocks: --limit)\n", r.blocks.size(), r.matched);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
