// HTML views of `top` (largest retained sizes, suspects with their paths as trees) and `roots`.
#include "formatters/html/html_views.h"
#include "formatters/render.h"
#include "formatters/text/retention_parts.h"

namespace heapscope {

namespace html {

namespace {

void add_retained_columns(Table& t) {
  t.column("retained", Table::Kind::number).column("%", Table::Kind::number).column("blocks", Table::Kind::number);
}

void push_retained(std::vector<Cell>& row, const Retained& r) {
  row.push_back(bytes_cell(r.bytes));
  row.push_back(number_cell(r.percent, fmt::format("{:.1f}", r.percent)));
  row.push_back(number_cell(r.blocks));
}

std::string suspect_html(std::size_t number, const Suspect& s) {
  std::string out = fmt::format("<p><strong>{}.</strong> {}</p>\n", number, escape(text::suspect_headline(s)));
  if (s.accumulation_point)
    out += fmt::format("<p class=\"note\">accumulated in {}, which retains {} ({:.1f}%)</p>\n",
                       escape(text::holder_line(*s.accumulation_point)), escape(text::bytes(s.accumulation_retained.bytes)),
                       s.accumulation_retained.percent);
  if (!s.retained_types.empty()) {
    Table types(fmt::format("top.suspect{}.types", number));
    types.column("bytes", Table::Kind::number).column("count", Table::Kind::number).column("type");
    for (const TopTypeRow& t : s.retained_types) types.row({bytes_cell(t.bytes), number_cell(t.count), text_cell(t.type)});
    out += types.html();
  }
  if (s.path) out += tree({path_tree_node(*s.path)}, fmt::format("top.suspect{}.path", number));
  return out;
}

// An owner's label as it is; a part's indented under its owner ("↳ stack", deeper for a part of a part).
std::string part_label(const RootNodeRef& node) {
  if (node.depth == 0) return node.label;
  std::string indent;
  for (std::uint32_t level = 1; level < node.depth; ++level) indent += "\u00a0\u00a0";
  return indent + "\u21b3 " + node.label;
}

std::vector<Bar> root_bars(const std::vector<TopRootRow>& rows, std::size_t at_most) {
  std::vector<Bar> bars;
  for (std::size_t i = 0; i < rows.size() && i < at_most; ++i)
    bars.push_back({rows[i].root.label, static_cast<double>(rows[i].retained.bytes),
                    fmt::format("{} ({:.1f}%)", text::bytes(rows[i].retained.bytes), rows[i].retained.percent)});
  return bars;
}

}  // namespace

void add_top(Page& page, const TopReport& r, int level) {
  page.section("Largest retained sizes by " + r.by, level);
  page.paragraph(text::heap_line(r.heap));
  if (r.by == "block") {
    Table t("top.blocks");
    add_retained_columns(t);
    t.column("address", Table::Kind::number).column("type").column("size", Table::Kind::number);
    for (const TopBlockRow& b : r.blocks) {
      std::vector<Cell> row;
      push_retained(row, b.retained);
      row.push_back(address_cell(b.block.address));
      row.push_back(text_cell(b.block.type));
      row.push_back(number_cell(b.block.size));
      t.row(std::move(row));
    }
    page.append(t.html());
  } else if (r.by == "type") {
    Table t("top.types");
    add_retained_columns(t);
    t.column("instances", Table::Kind::number).column("own bytes", Table::Kind::number).column("type");
    for (const TopTypeRow& type : r.types) {
      std::vector<Cell> row;
      push_retained(row, type.retained);
      row.push_back(number_cell(type.count));
      row.push_back(bytes_cell(type.bytes));
      row.push_back(text_cell(type.type));
      t.row(std::move(row));
    }
    page.append(t.html());
  } else {
    page.append(bar_chart(root_bars(r.roots, r.roots.size()), "Retained bytes by root"));
    Table t("top.roots");
    add_retained_columns(t);
    t.column("root");
    for (const TopRootRow& root : r.roots) {
      std::vector<Cell> row;
      push_retained(row, root.retained);
      row.push_back(text_cell(root.root.label));
      t.row(std::move(row));
    }
    page.append(t.html());
  }
  page.section("Suspects", level);
  if (r.suspects.empty())
    page.paragraph("none: no root or block retains 10% of the heap, and no type piles up under one");
  for (std::size_t i = 0; i < r.suspects.size(); ++i) page.append(suspect_html(i + 1, r.suspects[i]));
  page.warnings(r.warnings);
}

void add_roots(Page& page, const RootsReport& r, int level) {
  page.section("Retained per root kind", level);
  page.paragraph(text::heap_line(r.heap));
  std::vector<Bar> kind_bars;
  for (const RootKindRow& k : r.kinds)
    kind_bars.push_back({k.kind, static_cast<double>(k.retained.bytes),
                         fmt::format("{} ({:.1f}%)", text::bytes(k.retained.bytes), k.retained.percent)});
  page.append(bar_chart(kind_bars, "Retained bytes per root kind"));
  Table kinds("roots.kinds");
  add_retained_columns(kinds);
  kinds.column("roots", Table::Kind::number).column("kind");
  for (const RootKindRow& k : r.kinds) {
    std::vector<Cell> row;
    push_retained(row, k.retained);
    row.push_back(number_cell(k.roots));
    row.push_back(text_cell(k.kind));
    kinds.row(std::move(row));
  }
  page.append(kinds.html());
  if (r.shared.blocks)
    page.paragraph(fmt::format("Held by roots of several kinds: {} ({:.1f}%) in {}", text::bytes(r.shared.bytes),
                               r.shared.percent, text::blocks(r.shared.blocks)));

  page.section("Retained per root", level);
  // The rows are owners, each followed by its parts: counting the rows would count parts as owners.
  page.paragraph(fmt::format("The {} largest of {} owners, each followed by its parts that hold anything.",
                             text::owners_shown(r), r.root_count));
  Table roots("roots.roots");
  add_retained_columns(roots);
  roots.column("kind").column("root");
  for (const TopRootRow& root : r.roots) {
    std::vector<Cell> row;
    push_retained(row, root.retained);
    row.push_back(text_cell(root.root.kind));
    row.push_back(text_cell(part_label(root.root)));
    roots.row(std::move(row));
  }
  page.append(roots.html());
  page.warnings(r.warnings);
}

}  // namespace html

std::string render_html(const TopReport& r) {
  html::Page page("heapscope top (by " + r.by + ")");
  html::add_top(page, r, 2);
  return page.html();
}

std::string render_html(const RootsReport& r) {
  html::Page page("heapscope roots");
  html::add_roots(page, r, 2);
  return page.html();
}

}  // namespace heapscope
