// Text renderers of the retention reports: top and roots.
#include <algorithm>

#include "formatters/render.h"
#include "formatters/text/retention_parts.h"

namespace heapscope {

namespace {

void append_suspects(std::string& out, const std::vector<Suspect>& suspects) {
  out += "\nSuspects:\n";
  if (suspects.empty()) out += "  none: no root or block retains 10% of the heap, and no type piles up under one\n";
  for (std::size_t i = 0; i < suspects.size(); ++i) {
    const Suspect& s = suspects[i];
    out += fmt::format("  {}. {}\n", i + 1, text::suspect_headline(s));
    if (s.accumulation_point)
      out += fmt::format("     accumulated in {}, which retains {} ({:.1f}%)\n", text::holder_line(*s.accumulation_point),
                         text::bytes(s.accumulation_retained.bytes), s.accumulation_retained.percent);
    for (const TopTypeRow& t : s.retained_types)
      out += fmt::format("     {:>10} in {:>8} × {}\n", text::bytes(t.bytes), t.count, t.type);
    text::append_path(out, s.path);
  }
}

// Owners flush left, their parts indented under them.
void append_root_rows(std::string& out, const std::vector<TopRootRow>& rows) {
  for (const TopRootRow& row : rows)
    out += fmt::format("{}  {:{}}{}\n", text::retained_cells(row.retained), "", 2 * row.root.depth, row.root.label);
}

}  // namespace

std::string render_text(const TopReport& r) {
  std::string out = text::heap_line(r.heap);
  const std::string header = fmt::format("{:>10} {:>7} {:>9}", "retained", "%", "blocks");
  if (r.by == "block") {
    out += fmt::format("\nLargest retained sizes by block:\n{}  block\n", header);
    for (const TopBlockRow& b : r.blocks) out += fmt::format("{}  {}\n", text::retained_cells(b.retained), text::block_line(b.block));
  } else if (r.by == "type" || r.by == "site") {
    const bool sites = r.by == "site";
    out += fmt::format("\nLargest retained sizes by {}:\n{} {:>9} {:>10}  {}\n",
                       sites ? "allocation site (outermost blocks of each)" : "type (outermost instances)", header,
                       sites ? "blocks" : "instances", "own bytes", sites ? "allocated at" : "type");
    for (const TopTypeRow& t : r.types)
      out += fmt::format("{} {:>9} {:>10}  {}\n", text::retained_cells(t.retained), t.count, text::bytes(t.bytes), t.type);
  } else {
    out += fmt::format("\nLargest retained sizes by owner (and what in it holds them):\n{}  root\n", header);
    append_root_rows(out, r.roots);
  }
  append_suspects(out, r.suspects);
  text::append_warnings(out, r.warnings);
  return out;
}

std::string render_text(const RootsReport& r) {
  std::string out = text::heap_line(r.heap);
  const std::string header = fmt::format("{:>10} {:>7} {:>9}", "retained", "%", "blocks");
  out += fmt::format("\nRetained per owner kind:\n{} {:>6}  kind\n", header, "owners");
  for (const RootKindRow& k : r.kinds) {
    out += fmt::format("{} {:>6}  {}\n", text::retained_cells(k.retained), k.roots, k.kind);
    for (const RootPartTotal& p : k.parts)
      if (p.bytes) out += fmt::format("{:>10} {:>7} {:>9} {:>6}    of which {} alone\n", text::bytes(p.bytes), "", p.blocks, "", p.kind);
    if (k.together.blocks)
      out += fmt::format("{} {:>6}    of which held by several {} owners together, none alone\n",
                         text::retained_cells(k.together), "", k.kind);
  }
  if (r.shared.blocks)
    out += fmt::format("{} {:>6}  (held by roots of several kinds)\n", text::retained_cells(r.shared), "");
  out += fmt::format("\nRetained per owner ({} of {}), with the parts of it that hold anything:\n{}  root\n",
                     text::owners_shown(r), r.root_count, header);
  append_root_rows(out, r.roots);
  text::append_warnings(out, r.warnings);
  return out;
}

}  // namespace heapscope
