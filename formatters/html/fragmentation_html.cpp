// HTML view of `fragmentation`: per-arena table, the page and region occupancy histograms as bar charts,
// and the types holding nearly empty pages and blocking trims, with their sample paths as trees.
#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/text/retention_parts.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace html {

namespace {

std::vector<Bar> fill_bars(const FillBuckets& buckets, std::string_view unit) {
  std::vector<Bar> bars;
  for (int i = 0; i < kFillBucketCount; ++i)
    bars.push_back({fmt::format("{}–{}%", i * 10, i * 10 + 10), static_cast<double>(buckets[i]),
                    fmt::format("{} {}", buckets[i], unit)});
  return bars;
}

Table arena_table(const FragmentationReport& r) {
  Table t("fragmentation.arenas");
  t.column("arena", Table::Kind::number).column("heaps", Table::Kind::number).column("system", Table::Kind::number);
  const std::vector<ArenaStateColumn> states = arena_state_columns(r);
  for (const ArenaStateColumn& c : states) t.column(c.heading, Table::Kind::number);
  for (const char* c : {"largest free", "trim on free", "malloc_trim returns", "malloc_trim madvises"})
    t.column(c, Table::Kind::number);
  const bool trim = r.trim_unavailable.empty();  // else the trim figures are "n/a", not 0
  for (const ArenaFragmentation& a : r.arenas) {
    auto trim_cell = [&](std::uint64_t bytes) { return trim && a.trim_known ? bytes_cell(bytes) : text_cell("n/a"); };
    std::vector<Cell> cells{html_cell(escape(text::hex(a.address)) + (a.is_main ? " (main)" : ""), std::to_string(a.address)),
                            number_cell(a.heaps), bytes_cell(a.system_bytes)};
    for (const ArenaStateColumn& c : states) cells.push_back(bytes_cell(a.*c.bytes));
    for (Cell cell : {bytes_cell(a.largest_free_chunk), trim_cell(a.trim_on_free), trim_cell(a.malloc_trim_returned),
                      trim_cell(a.malloc_trim_madvised)})
      cells.push_back(std::move(cell));
    t.row(std::move(cells));
  }
  return t;
}

Table blocker_table(const FragmentationReport& r) {
  Table t("fragmentation.blockers");
  t.column("arena", Table::Kind::number).column("chunk", Table::Kind::number).column("type").column("state");
  t.column("bytes above", Table::Kind::number).column("returnable if freed", Table::Kind::number);
  for (const ArenaFragmentation& a : r.arenas)
    for (const TrimBlocker& b : a.blockers)
      t.row({address_cell(a.address), address_cell(b.chunk), text_cell(b.block.type), text_cell(b.state),
             bytes_cell(b.bytes_above), bytes_cell(b.returnable_if_freed)});
  return t;
}

void add_type_rows(Page& page, const std::vector<FragmentationTypeRow>& rows, const std::string& name) {
  Table t("fragmentation." + name);
  t.column("blocks", Table::Kind::number).column("bytes", Table::Kind::number).column("type");
  for (const FragmentationTypeRow& row : rows) t.row({number_cell(row.count), bytes_cell(row.bytes), text_cell(row.type)});
  page.append(t.html());
  std::vector<RetainerPath> paths;
  std::vector<TreeNode> samples;
  for (const FragmentationTypeRow& row : rows)
    for (const FragmentationSample& s : row.samples) {
      if (s.path) paths.push_back(*s.path);
      else samples.push_back({escape(text::block_line(s.block) + ": no path from a root"), {}});
    }
  for (TreeNode& merged : merged_path_trees(paths)) samples.push_back(std::move(merged));
  if (!samples.empty()) {
    page.paragraph("Sample retainer paths:");
    page.append(tree(samples, "fragmentation." + name + ".paths"));
  }
}

// A slab allocator's size classes and the free pages it keeps (nothing for glibc).
void add_size_classes(Page& page, const FragmentationReport& r, int level) {
  if (!r.size_classes.empty()) {
    page.section(r.terms.size_class_heading(), level);
    Table classes("fragmentation.size_classes");
    classes.column("size", Table::Kind::number).column(r.terms.slab + "s", Table::Kind::number).column("bytes", Table::Kind::number);
    classes.column("in use", Table::Kind::number).column(r.terms.cached, Table::Kind::number).column("free", Table::Kind::number);
    for (const SizeClassUse& c : r.size_classes)
      classes.row({number_cell(c.object_bytes), number_cell(c.slabs), bytes_cell(c.slab_bytes), number_cell(c.in_use),
                   number_cell(c.cached), number_cell(c.free)});
    page.append(classes.html());
  }
  if (!r.free_pages.empty()) {
    page.section("Free pages kept for reuse", level);
    Table pages("fragmentation.free_pages");
    pages.column("kind").column("bytes", Table::Kind::number).column("runs", Table::Kind::number).column("what");
    for (const FreePages& f : r.free_pages)
      pages.row({text_cell(f.kind), bytes_cell(f.bytes), number_cell(f.runs), text_cell(f.meaning)});
    page.append(pages.html());
  }
}

}  // namespace

void add_fragmentation(Page& page, const FragmentationReport& r, int level) {
  if (r.partial)
    page.paragraph(fmt::format("PARTIAL: {} of damaged heap were not walked and are not counted (see the warnings).",
                               text::bytes(r.skipped_bytes)));
  page.section("Arenas", level);
  page.append(arena_table(r).html());
  add_size_classes(page, r, level);
  page.section("Page occupancy", level);
  page.paragraph(fmt::format("{} pages of {} and {} regions of {} (top chunks and mmapped chunks excluded), by "
                             "the share of their bytes live blocks use. Most pages in the lowest buckets means "
                             "a fragmented heap.",
                             r.pages, text::bytes(r.page_bytes), r.regions, text::bytes(r.region_bytes)));
  page.append(bar_chart(fill_bars(r.page_fill, "pages"), "Pages by share used", Orientation::vertical));
  page.append(bar_chart(fill_bars(r.region_fill, "regions"), "Regions by share used", Orientation::vertical));
  page.section("Live blocks in nearly empty pages", level);
  page.paragraph(fmt::format("{} in {} of {} type{} start in pages at most 10% used.", text::blocks(r.sparse_blocks),
                             text::bytes(r.sparse_bytes), r.sparse_type_count, r.sparse_type_count == 1 ? "" : "s"));
  add_type_rows(page, r.sparse_types, "sparse");
  page.section("Trim blockers", level);
  page.append(blocker_table(r).html());
  add_type_rows(page, r.blocker_types, "blocker_types");
  page.warnings(r.warnings);
}

}  // namespace html

std::string render_html(const FragmentationReport& r) {
  html::Page page("heapscope fragmentation");
  html::add_fragmentation(page, r, 2);
  return page.html();
}

}  // namespace heapscope
