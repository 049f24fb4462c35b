// Text renderers of the graph commands' reports.
#include "formatters/render.h"
#include "formatters/text/text_util.h"

namespace heapscope {

using text::block_line;

namespace {

// A leaks report's groups: bytes, count, size, name and verdicts, then examples (and their text).
std::string leak_group_lines(const LeaksReport& r, const std::vector<LeakGroup>& groups) {
  std::string out;
  for (const LeakGroup& g : groups) {
    std::string kinds;
    auto add = [&](std::uint64_t n, const char* what) {
      if (n) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, what);
    };
    add(g.direct, "direct");
    add(g.indirect, "indirect");
    add(g.cycle, "in cycles");
    std::string examples;
    for (Address a : g.examples) examples += (examples.empty() ? "" : " ") + text::hex(a);
    if (r.by == "site") {
      const std::string estimate = r.sites && !r.sites->exact && g.site
                                       ? fmt::format(" (≈ {} in {:.0f} blocks)", text::bytes(static_cast<std::uint64_t>(g.estimated_bytes)), g.estimated_count)
                                       : "";
      out += fmt::format("{:>10} in {:>7} blocks{}  ({})\n", text::bytes(g.bytes), g.count, estimate, kinds);
      out += g.site ? text::site_lines(*g.site, "           allocated at ", "             ")
                    : "           " + g.type + "\n";
      out += fmt::format("           e.g. {}\n", examples);
      continue;
    }
    out += fmt::format("{:>10} in {:>7} blocks of {:>6} bytes  {}  ({})\n           e.g. {}\n", text::bytes(g.bytes),
                       g.count, g.size, g.type, kinds, examples);
    // Blocks holding text show it: a leaked request buffer says which request it was.
    for (std::size_t i = 0; i < g.examples.size() && i < g.example_texts.size(); ++i)
      if (!g.example_texts[i].empty())
        out += fmt::format("           {}  \"{}\"\n", text::hex(g.examples[i]), g.example_texts[i]);
  }
  return out;
}

// A collector's garbage, after the leaks: what its next collection frees, by group, with its total.
std::string collectable_lines(const LeaksReport& r) {
  if (!r.collectable) return {};
  const LeaksReport::Collectable& c = *r.collectable;
  if (c.total.blocks == 0)
    return fmt::format("\nUnreachable in {}'s heap: nothing (its next collection frees no object)\n", c.collector);
  return fmt::format("\nUnreachable in {}'s heap: the next collection frees these (garbage, not leaks):\n{}"
                     "Unreachable: {} in {} objects, {} of it in whole pages the collection gives back to its free "
                     "pages\n",
                     c.collector, leak_group_lines(r, c.groups), text::bytes(c.total.bytes), c.total.blocks,
                     text::bytes(c.whole_page_bytes));
}

}  // namespace

std::string render_text(const LeaksReport& r) {
  std::string out = text::missing_symbols_note(r.modules_without_symbols);
  if (r.groups.empty()) out += std::string(no_leaks_sentence(r)) + "\n";
  if (r.sites) out += r.sites->sentence + "\n\n";
  out += leak_group_lines(r, r.groups);
  out += fmt::format("\nLeaked: {} in {} blocks (direct {} in {}, indirect {} in {}, in cycles {} in {})\n",
                     text::bytes(r.leaked.bytes), r.leaked.blocks, text::bytes(r.direct.bytes), r.direct.blocks,
                     text::bytes(r.indirect.bytes), r.indirect.blocks, text::bytes(r.cycle.bytes), r.cycle.blocks);
  if (!r.named.empty()) out += "Named: " + text::naming_shares(r.named, r.leaked.bytes) + "\n";
  if (r.possibly.blocks)
    out += fmt::format("Possibly leaked (reachable only through interior pointers): {} in {} blocks\n",
                       text::bytes(r.possibly.bytes), r.possibly.blocks);
  if (const std::string why = possibly_explanation(r); !why.empty()) out += "  " + why + "\n";
  if (!r.held_by_idioms.empty()) {
    out += "Reachable through interior-pointer idioms alone (valgrind's \"reachable via heuristic\"):";
    for (const LeaksReport::IdiomTotal& t : r.held_by_idioms)
      out += fmt::format(" {} {} in {} blocks;", idiom_group_name(t), text::bytes(t.total.bytes), t.total.blocks);
    out.back() = '\n';
  }
  out += collectable_lines(r);
  out += std::string(kLeakBytesLegend) + "\n";
  if (!r.object_headers.empty())
    out += fmt::format("Object headers recognised: {} in {} blocks; a pointer to the object past one counts as a "
                       "pointer to its block, and the header's list links are not references\n",
                       r.object_headers, r.object_header_blocks);
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const RetainersReport& r) {
  std::string out = fmt::format("Block {}: {}\n", block_line(r.target), r.verdict);
  out += text::allocated_at_lines(r.allocated_at);
  if (r.paths.empty())
    out += r.depth_limited ? "No path from a root within --max-depth.\n" : "leaked: no path from any root\n";
  for (std::size_t i = 0; i < r.paths.size(); ++i) {
    const RetainerPath& p = r.paths[i];
    out += fmt::format("\nPath {} ({} step{}):\n  {}\n", i + 1, p.steps.size(), p.steps.size() == 1 ? "" : "s",
                       text::root_line(p.root));
    for (const PathStep& s : p.steps)
      out += fmt::format("  → {}, retains {}{}\n", text::landing_line(s.into, s.block), text::bytes(s.retained),
                         text::pointer_place(s));
  }
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const RefsReport& r) {
  std::string out = fmt::format("{} referrers of {}:\n", r.referrers.size(), block_line(r.target));
  for (const Referrer& ref : r.referrers) {
    const std::string lands = " → " + text::landing_line(ref.into, r.target);
    if (ref.block)
      out += fmt::format("  block {} at +0x{:x}{}{}\n", block_line(*ref.block), ref.offset,
                         ref.field.empty() ? "" : " (" + ref.field + ")", lands);
    else if (ref.root)
      out += fmt::format("  {}{}{}\n", ref.root->label,
                         ref.root->address ? fmt::format(" [0x{:x}]", ref.root->address) : "", lands);
  }
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const DescribeReport& r) {
  std::string out = fmt::format("Block {}\n  chunk 0x{:x}, chunk size {}, state {}, arena {}\n  verdict: {}{}\n",
                                block_line(r.block), r.chunk, r.chunk_size, r.state,
                                r.arena ? text::hex(r.arena) : "- (own mapping)", r.verdict,
                                r.possibly ? " (only through interior pointers: possibly leaked)" : "");
  if (r.block.naming != "none") out += fmt::format("  named by: {}\n", r.block.naming);
  out += text::allocated_at_lines(r.allocated_at, r.no_site);
  if (!r.text.empty()) out += fmt::format("  text: \"{}\"\n", r.text);
  for (std::size_t row = 0; row < r.dump.size(); row += 16) {
    std::string hex, ascii;
    for (std::size_t i = row; i < row + 16 && i < r.dump.size(); ++i) {
      hex += fmt::format("{:02x} ", r.dump[i]);
      ascii += (r.dump[i] >= 32 && r.dump[i] < 127) ? static_cast<char>(r.dump[i]) : '.';
    }
    out += fmt::format("  0x{:x}: {:<48} {}\n", r.dump_address + row, hex, ascii);
  }
  if (!r.pointers.empty()) out += "Pointers it holds:\n";
  for (const PointerSlot& p : r.pointers)
    out += fmt::format("  +0x{:<4x} {}0x{:x} → {}\n", p.offset, p.field.empty() ? "" : p.field + " ", p.value,
                       p.points_to);
  if (!r.fields_type.empty()) out += fmt::format("Fields of {}:\n", r.fields_type);
  for (const FieldRow& f : r.fields) {
    // "  +0x10   .series (series)", then its fields two spaces deeper; gdb-like "name (type) = value".
    std::string line = fmt::format("  +0x{:<6x} {:{}}{}", f.offset, "", 2 * f.depth, f.label);
    if (!f.type.empty() && f.label.rfind("<base ", 0) != 0) line += (f.label.empty() ? "(" : " (") + f.type + ")";
    if (!f.value.empty()) line += " = " + f.value;
    if (!f.points_to.empty()) line += " → " + f.points_to;
    out += line + "\n";
  }
  if (r.fields_truncated) out += "  … more fields (--fields N shows more)\n";
  text::append_warnings(out, r.warnings);
  return out;
}

namespace {

std::string histogram_by_site_text(const HistogramReport& r) {
  const bool estimates = r.sites && !r.sites->exact;
  std::string out = r.sites ? r.sites->sentence + "\n" : "";
  out += fmt::format("{:>10} {:>12} {:>10} {:>12}{}  {}\n", "count", "bytes", "leaked", "leaked bytes",
                     estimates ? fmt::format(" {:>12} {:>12}", "est. count", "est. bytes") : "", "allocated at");
  for (const HistogramRow& h : r.rows) {
    const std::string estimate = !estimates ? ""
                                 : h.site   ? fmt::format(" {:>12.0f} {:>12.0f}", h.estimated_count, h.estimated_bytes)
                                            : fmt::format(" {:>12} {:>12}", "-", "-");
    const std::string lead = fmt::format("{:>10} {:>12} {:>10} {:>12}{}  ", h.count, h.bytes, h.leaked_count,
                                         h.leaked_bytes, estimate);
    out += lead + (h.site ? text::site_lines(*h.site, "", std::string(lead.size(), ' '))
                          : "(no allocation site: not sampled)\n");
  }
  out += fmt::format("{} allocated blocks, {} with an allocation site\n", r.allocated_blocks, r.typed_blocks);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace

std::string render_text(const HistogramReport& r) {
  if (r.by == "site") return histogram_by_site_text(r);
  const bool by_source = r.by == "source";
  std::string out = fmt::format("{:>10} {:>12} {:>10} {:>12}  {}\n", "count", "bytes", "leaked", "leaked bytes",
                                by_source ? "declared at: types" : "type");
  for (const HistogramRow& h : r.rows) {
    std::string what = h.type;
    if (by_source) {
      what = (h.source.empty() ? std::string("(no source)") : h.source) + ":";
      for (const std::string& t : h.types) what += " " + t + ";";
      what.pop_back();
    } else if (!h.source.empty() && h.type.find(h.source) == std::string::npos) {
      what += "  [" + h.source + "]";
    }
    out += fmt::format("{:>10} {:>12} {:>10} {:>12}  {}\n", h.count, h.bytes, h.leaked_count, h.leaked_bytes, what);
    if (!h.examples.empty()) {
      std::string examples;
      for (Address a : h.examples) examples += (examples.empty() ? "" : " ") + text::hex(a);
      out += fmt::format("{:>10} e.g. {}\n", "", examples);
    }
  }
  out += fmt::format("{} allocated blocks, {} with a known type\n", r.allocated_blocks, r.typed_blocks);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
