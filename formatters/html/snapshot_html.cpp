// HTML views of `snapshot diff` / `heapscope diff` (growth per type and per root, new blocks by address with
// sample paths as trees) and of `evolution` (the line chart, and a table with a sparkline per type).
#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/svg/line_chart.h"
#include "formatters/text/retention_parts.h"
#include "formatters/text/snapshot_time.h"
#include "formatters/text/text_util.h"

namespace heapscope {

namespace html {

namespace {

Cell signed_bytes_cell(std::int64_t delta) {
  return number_cell(static_cast<double>(delta), text::signed_amount(delta, text::bytes));
}

Cell signed_count_cell(std::int64_t delta) {
  return number_cell(static_cast<double>(delta), text::signed_amount(delta, [](std::uint64_t n) { return std::to_string(n); }));
}

std::string point_line(const SnapshotInfo& s) {
  return fmt::format("{}: {}, captured {}; {} in {}", s.name, s.target, text::capture_time(s.capture_time_ns),
                     text::bytes(s.in_use_bytes), text::blocks(s.in_use_blocks));
}

Table diff_table(const std::vector<DiffRow>& rows, const std::string& name, bool roots) {
  Table t("diff." + name);
  t.column("Δ bytes", Table::Kind::number).column("Δ count", Table::Kind::number);
  t.column("bytes before", Table::Kind::number).column("bytes after", Table::Kind::number);
  t.column("count before", Table::Kind::number).column("count after", Table::Kind::number);
  if (roots) t.column("kind");
  t.column(roots ? "root" : "type");
  for (const DiffRow& row : rows) {
    std::vector<Cell> cells{signed_bytes_cell(row.delta_bytes), signed_count_cell(row.delta_count),
                            bytes_cell(row.before_bytes),      bytes_cell(row.after_bytes),
                            number_cell(row.before_count),     number_cell(row.after_count)};
    if (roots) cells.push_back(text_cell(row.kind));
    cells.push_back(text_cell(row.name));
    t.row(std::move(cells));
  }
  return t;
}

// The SVG document without its XML declaration, so it can sit inline in the page.
std::string inline_svg(std::string svg_document) {
  if (svg_document.rfind("<?xml", 0) == 0) svg_document.erase(0, svg_document.find("?>") + 2);
  return "<figure class=\"chart\">" + svg_document + "</figure>\n";
}

}  // namespace

void add_diff(Page& page, const DiffReport& r, int level) {
  page.section("Growth by type", level);
  page.paragraph("before — " + point_line(r.before));
  page.paragraph("after — " + point_line(r.after));
  std::vector<Bar> bars;
  for (const DiffRow& row : r.types)
    if (row.delta_bytes > 0 && bars.size() < 10)
      bars.push_back({row.name, static_cast<double>(row.delta_bytes), text::signed_amount(row.delta_bytes, text::bytes)});
  if (!bars.empty()) page.append(bar_chart(bars, "Bytes gained per type"));
  page.append(diff_table(r.types, "types", false).html());
  if (r.types.size() < r.type_count) page.paragraph(fmt::format("{} of {} types shown", r.types.size(), r.type_count));
  page.section("Growth by root", level);
  page.append(diff_table(r.roots, "roots", true).html());
  if (r.roots.size() < r.root_count) page.paragraph(fmt::format("{} of {} roots shown", r.roots.size(), r.root_count));
  page.section("Blocks by address", level);
  if (!r.addresses_compared) {
    page.paragraph("Not compared: the two states are of different processes, so their addresses say nothing "
                   "about each other.");
  } else {
    page.paragraph(fmt::format("{} new ({}), {} gone ({}), {} kept at the same address with the same size and type",
                               text::blocks(r.new_blocks), text::bytes(r.new_bytes), text::blocks(r.gone_blocks),
                               text::bytes(r.gone_bytes), text::blocks(r.kept_blocks)));
    Table t("diff.new_by_type");
    t.column("new", Table::Kind::number).column("new bytes", Table::Kind::number);
    t.column("gone", Table::Kind::number).column("gone bytes", Table::Kind::number).column("type");
    for (const AddressDiffRow& row : r.new_by_type)
      t.row({number_cell(row.new_count), bytes_cell(row.new_bytes), number_cell(row.gone_count),
             bytes_cell(row.gone_bytes), text_cell(row.type)});
    page.append(t.html());
    std::vector<TreeNode> samples;
    for (const NewBlockSample& s : r.samples)
      samples.push_back(s.path ? path_tree_node(*s.path)
                               : TreeNode{escape(text::block_line(s.block) + ": no path from a root"), {}});
    if (!samples.empty()) {
      page.paragraph("New blocks of the types with the largest net growth (new bytes less gone bytes), and what "
                     "holds them now:");
      page.append(tree(samples, "diff.samples"));
    }
  }
  page.warnings(r.warnings);
}

void add_evolution(Page& page, const EvolutionReport& r, int level) {
  page.section("Bytes per type over time", level);
  for (const SnapshotInfo& p : r.points) page.paragraph(point_line(p));
  page.append(inline_svg(render_svg(r)));
  Table t("evolution.types");
  t.column("steady").column("growth", Table::Kind::number).column("first", Table::Kind::number);
  t.column("last", Table::Kind::number).column("trend").column("type");
  for (const EvolutionSeries& s : r.series) {
    std::vector<double> values(s.bytes.begin(), s.bytes.end());
    t.row({text_cell(s.steady ? "grows at every step" : ""), signed_bytes_cell(s.growth_bytes),
           bytes_cell(s.bytes.empty() ? 0 : s.bytes.front()), bytes_cell(s.bytes.empty() ? 0 : s.bytes.back()),
           html_cell(sparkline(values, s.type), std::to_string(s.growth_bytes)), text_cell(s.type)});
  }
  page.append(t.html());
  if (r.series.size() < r.type_count)
    page.paragraph(fmt::format("{} of {} types shown", r.series.size(), r.type_count));
  page.warnings(r.warnings);
}

}  // namespace html

std::string render_html(const DiffReport& r) {
  html::Page page("heapscope diff: " + r.before.name + " → " + r.after.name);
  html::add_diff(page, r, 2);
  return page.html();
}

std::string render_html(const EvolutionReport& r) {
  html::Page page("heapscope evolution");
  html::add_evolution(page, r, 2);
  return page.html();
}

}  // namespace heapscope
