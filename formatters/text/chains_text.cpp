// Text renderer of the chains report.
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace {

// "1 edge from a root, retains 145.2 KiB" or "leaked: no root reaches it".
std::string reach_line(const ChainRow& c) {
  if (c.leaked) return "leaked: no root reaches it";
  std::string out = fmt::format("{} edge{} from a root", *c.depth, *c.depth == 1 ? "" : "s");
  if (c.head_retained) out += ", retains " + text::bytes(*c.head_retained);
  return out;
}

}  // namespace

std::string render_text(const ChainsReport& r) {
  std::string out = fmt::format("{} chain{} of at least {} blocks of one type: {} blocks, {} in all\n", r.chains,
                                r.chains == 1 ? "" : "s", r.min_length, r.chained_blocks, text::bytes(r.chained_bytes));
  if (r.rows.size() < r.chains) out += fmt::format("The {} with the most bytes:\n", r.rows.size());
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const ChainRow& c = r.rows[i];
    out += fmt::format("\n  {}. {} blocks of {}, {}{}\n", i + 1, c.length, c.type, text::bytes(c.bytes),
                       c.ring ? ", a ring" : "");
    out += fmt::format("     head 0x{:x}: {}\n     tail 0x{:x}\n", c.head.address, reach_line(c), c.tail.address);
    text::append_path(out, c.path);
  }
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
