#include "formatters/html/html_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>

#include "formatters/text/text_util.h"

namespace heapscope::html {

// ---- tables ----

Cell text_cell(std::string text) { return {std::move(text), {}, false}; }
Cell html_cell(std::string html, std::string sort_text) { return {std::move(html), std::move(sort_text), true}; }
Cell number_cell(std::uint64_t value) { return {std::to_string(value), std::to_string(value), false}; }
Cell number_cell(double value, std::string shown) { return {std::move(shown), fmt::format("{}", value), false}; }
Cell bytes_cell(std::uint64_t bytes) { return {text::bytes(bytes), std::to_string(bytes), false}; }
Cell address_cell(std::uint64_t address) { return {text::hex(address), std::to_string(address), false}; }

Table& Table::column(std::string heading, Kind kind) {
  columns_.push_back({std::move(heading), kind});
  return *this;
}

Table& Table::row(std::vector<Cell> cells) {
  cells.resize(columns_.size());  // a short row still has every cell, so sorting finds one per column
  rows_.push_back(std::move(cells));
  return *this;
}

std::string Table::html() const {
  std::string out = fmt::format("<table class=\"sortable\" data-table=\"{}\">\n<thead><tr>", escape(name_));
  for (const Column& c : columns_)
    out += fmt::format("<th scope=\"col\"{}>{}</th>", c.kind == Kind::number ? " data-type=\"number\"" : "",
                       escape(c.heading));
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& cells : rows_) {
    out += "<tr>";
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const Cell& cell = cells[i];
      const bool numeric = columns_[i].kind == Kind::number;
      out += fmt::format("<td{}{}>{}</td>", numeric ? " class=\"num\"" : "",
                         cell.sort.empty() ? std::string() : " data-sort=\"" + escape(cell.sort) + "\"",
                         cell.is_html ? cell.text : escape(cell.text));
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

// ---- charts ----

namespace {

// An inline SVG's opening tag, its accessible name and tooltip the title.
std::string svg_open(std::string_view css_class, int width, int height, std::string_view title) {
  return fmt::format("<svg class=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{1}\" height=\"{2}\" "
                     "viewBox=\"0 0 {1} {2}\" role=\"img\" aria-label=\"{3}\"><title>{3}</title>",
                     css_class, width, height, escape(title));
}

// Chart text is laid out before any browser sees it, so its width is estimated from each character's
// width in em, on the wide side of common sans-serif fonts (DejaVu Sans, Liberation Sans, Segoe UI), with
// a margin: a label that is given room for its estimate fits wherever the page is opened.
double em_width(char32_t c) {
  if (c == ' ' || c == '.' || c == ',' || c == ':' || c == ';' || c == '\'' || c == '|' || c == '!' || c == 'i' ||
      c == 'j' || c == 'l')
    return 0.36;
  if (c == 'f' || c == 't' || c == 'r' || c == 'I' || c == '(' || c == ')' || c == '[' || c == ']' || c == '/' ||
      c == '-')
    return 0.45;
  if (c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '@' || c == '%' || c > 0x2000) return 1.0;
  if (c >= 'A' && c <= 'Z') return 0.78;
  return 0.66;  // digits, other lowercase letters, <, >, _ and the rest
}

// The estimated width in pixels of `text` (UTF-8) at `font_px`.
double text_width(std::string_view text, double font_px) {
  constexpr double kMargin = 1.08;
  double em = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char byte = static_cast<unsigned char>(text[i]);
    if ((byte & 0xC0) == 0x80) continue;  // inside a UTF-8 character, counted at its first byte
    em += em_width(byte < 0x80 ? static_cast<char32_t>(byte) : (byte >= 0xE0 ? 0x2026 : 0xC0));
  }
  return em * font_px * kMargin;
}

// Long labels are cut to fit `room` pixels in the picture; the whole text stays in the bar's tooltip.
std::string fitted_label(const std::string& label, double room, double font_px) {
  if (text_width(label, font_px) <= room) return label;
  const double ellipsis = text_width("\u2026", font_px);
  std::size_t cut = label.size();
  while (cut > 0 && text_width(std::string_view(label).substr(0, cut), font_px) + ellipsis > room) {
    --cut;
    while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  }
  return label.substr(0, cut) + "\u2026";
}

double largest(const std::vector<Bar>& bars) {
  double top = 0;
  for (const Bar& b : bars) top = std::max(top, b.value);
  return top;
}

// A bar's length: in proportion, and at least a pixel when the value is not zero, so small ones show.
double bar_length(double value, double top, double room) {
  if (value <= 0 || top <= 0) return 0;
  return std::max(1.0, room * value / top);
}

// Font sizes of chart text (the page's style: svg.chart 11px, its values 10px).
constexpr double kLabelFont = 11, kValueFont = 10;

// Labels get the room their longest one needs, up to kMaxLabelWidth (longer ones are cut); values right of
// their bars get the room the widest one needs, so "1.1 GiB in 21014736" is never clipped to "…in 2101".
std::string horizontal_bars(const std::vector<Bar>& bars, std::string_view title) {
  constexpr int kMaxLabelWidth = 300, kBarRoom = 320, kRow = 22, kGap = 6;
  double label_room = 40, value_room = 20;
  for (const Bar& b : bars) {
    label_room = std::max(label_room, std::min<double>(kMaxLabelWidth, text_width(b.label, kLabelFont)));
    value_room = std::max(value_room, text_width(b.shown, kLabelFont));
  }
  const int label_width = static_cast<int>(std::ceil(label_room)) + kGap;
  const int width = label_width + kBarRoom + 4 + static_cast<int>(std::ceil(value_room)) + kGap;
  const int height = kRow * static_cast<int>(bars.size()) + 4;
  const double top = largest(bars);
  std::string out = svg_open("chart bars", width, height, title) + "\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const int y = 2 + kRow * static_cast<int>(i);
    const double length = bar_length(b.value, top, kBarRoom);
    out += fmt::format(
        "<g><title>{0}: {1}</title><text x=\"{2}\" y=\"{3}\" text-anchor=\"end\">{4}</text>"
        "<rect x=\"{5}\" y=\"{6}\" width=\"{7:.1f}\" height=\"{8}\"/>"
        "<text x=\"{9:.1f}\" y=\"{3}\">{1}</text></g>\n",
        escape(b.label), escape(b.shown), label_width - kGap, y + 15, escape(fitted_label(b.label, label_room, kLabelFont)),
        label_width, y + 3, length, kRow - 6, label_width + length + 4);
  }
  return out + "</svg>\n";
}

// Columns are as wide as their widest value (drawn above each column) needs; labels below are cut to a column.
std::string vertical_bars(const std::vector<Bar>& bars, std::string_view title) {
  constexpr int kPlotHeight = 160, kLabelHeight = 34, kTop = 18, kGap = 4;
  double value_room = 10;
  for (const Bar& b : bars) value_room = std::max(value_room, text_width(b.shown, kValueFont));
  const int fair_share = 560 / std::max<int>(1, static_cast<int>(bars.size()));
  const int column = std::max({14, fair_share, static_cast<int>(std::ceil(value_room)) + kGap});
  const int width = column * static_cast<int>(bars.size()) + 8, height = kTop + kPlotHeight + kLabelHeight;
  const double top = largest(bars);
  std::string out = svg_open("chart columns", width, height, title) + "\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = 4 + column * static_cast<double>(i), middle = x + column / 2.0;
    const double length = bar_length(b.value, top, kPlotHeight);
    const double y = kTop + kPlotHeight - length;
    out += fmt::format(
        "<g><title>{0}: {1}</title><rect x=\"{2:.1f}\" y=\"{3:.1f}\" width=\"{4}\" height=\"{5:.1f}\"/>"
        "<text x=\"{6:.1f}\" y=\"{7:.1f}\" text-anchor=\"middle\" class=\"value\">{1}</text>"
        "<text x=\"{6:.1f}\" y=\"{8}\" text-anchor=\"middle\">{9}</text></g>\n",
        escape(b.label), escape(b.shown), x + 1, y, column - 2, length, middle, y - 4, kTop + kPlotHeight + 14,
        escape(fitted_label(b.label, column - kGap, kLabelFont)));
  }
  out += fmt::format("<line x1=\"2\" x2=\"{0}\" y1=\"{1}\" y2=\"{1}\" class=\"axis\"/>\n", width - 2, kTop + kPlotHeight);
  return out + "</svg>\n";
}

}  // namespace

std::string sparkline(const std::vector<double>& values, std::string_view title, int width, int height) {
  std::string out = svg_open("sparkline", width, height, title);
  if (values.empty()) return out + "</svg>";
  const auto [low_it, high_it] = std::minmax_element(values.begin(), values.end());
  const double low = *low_it, span = *high_it - low, pad = 2;
  const double step = values.size() > 1 ? (width - 2 * pad) / static_cast<double>(values.size() - 1) : 0;
  auto x_of = [&](std::size_t i) { return pad + step * static_cast<double>(i); };
  // A flat series is a line through the middle; otherwise the largest value touches the top.
  auto y_of = [&](double v) { return span > 0 ? height - pad - (height - 2 * pad) * (v - low) / span : height / 2.0; };
  std::string points;
  for (std::size_t i = 0; i < values.size(); ++i)
    points += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x_of(i), y_of(values[i]));
  if (values.size() > 1) out += fmt::format("<polyline points=\"{}\"/>", points);
  out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\"/>", x_of(values.size() - 1), y_of(values.back()));
  return out + "</svg>";
}

std::string bar_chart(const std::vector<Bar>& bars, std::string_view title, Orientation orientation) {
  return orientation == Orientation::horizontal ? horizontal_bars(bars, title) : vertical_bars(bars, title);
}

// ---- trees ----

namespace {

void append_node(std::string& out, const TreeNode& node) {
  if (node.children.empty()) {
    out += "<div class=\"leaf\">" + node.label_html + "</div>\n";
    return;
  }
  out += "<details open><summary>" + node.label_html + "</summary><div class=\"children\">\n";
  for (const TreeNode& child : node.children) append_node(out, child);
  out += "</div></details>\n";
}

}  // namespace

std::string tree(const std::vector<TreeNode>& roots, std::string_view name) {
  std::string out = fmt::format("<div class=\"tree\" data-tree=\"{}\">\n", escape(name));
  for (const TreeNode& node : roots) append_node(out, node);
  return out + "</div>\n";
}

// ---- the page ----

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d232b;background:#fff}
header{background:#1f3a5f;color:#fff;padding:12px 24px}header h1{margin:0;font-size:20px}
main{padding:8px 24px 32px;max-width:1200px}
nav.toc{padding:8px 24px;background:#eef2f7;border-bottom:1px solid #d5dde8}
nav.toc ol{margin:0;padding-left:20px}nav.toc ol ol{font-size:13px}
h2{border-bottom:2px solid #1f3a5f;padding-bottom:2px;margin-top:28px}h3{margin-top:20px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d5dde8;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef2f7;white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even){background:#f8fafc}
table.js-sortable th{cursor:pointer;user-select:none}
table.js-sortable th::after{content:"\2195";color:#9aa7b8;padding-left:4px}
table.js-sortable th[aria-sort=ascending]::after{content:"\25B2";color:#1f3a5f}
table.js-sortable th[aria-sort=descending]::after{content:"\25BC";color:#1f3a5f}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
svg.chart{display:block;margin:8px 0;font-size:11px}svg.chart rect{fill:#3d6fb0}
svg.chart text{fill:#1d232b}svg.chart text.value{font-size:10px}svg.chart .axis{stroke:#9aa7b8}
svg.sparkline{vertical-align:middle}svg.sparkline polyline{fill:none;stroke:#3d6fb0;stroke-width:1.5}
svg.sparkline circle{fill:#c0392b}
.tree{margin:6px 0}.tree summary{cursor:pointer}.tree .children{margin-left:14px;padding-left:10px;border-left:1px solid #c6d0dd}
.tree .leaf{padding-left:14px}.node-root{font-weight:600;color:#7a3e00}.node-target{font-weight:600;color:#a01515}
.field{color:#51627a}.retained{color:#2d6a2d}
.warnings{background:#fff7e6;border:1px solid #f0c36d;padding:6px 12px;margin:10px 0}
.note{color:#51627a}
.findings{background:#eef6ee;border:1px solid #9cc79c;padding:6px 12px;margin:12px 0}.findings ul{margin:4px 0}
)";

// Sorting by a header click; everything else on the page works without it.
constexpr const char* kScript = R"(
(function () {
  "use strict";
  if (!document.querySelectorAll || !window.Array || !Array.prototype.forEach) return;
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };
  function sortKey(cell, numeric) {
    if (!cell) return numeric ? -Infinity : "";
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    if (!numeric) return raw.toLowerCase();
    var n = Number(raw);
    return isNaN(n) ? -Infinity : n;
  }
  function sortTable(table, header, index) {
    var body = table.tBodies[0];
    if (!body) return;
    var numeric = header.getAttribute("data-type") === "number";
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var rows = Array.prototype.slice.call(body.rows).map(function (row, i) {
      return { row: row, key: sortKey(row.cells[index], numeric), order: i };
    });
    rows.sort(function (a, b) {
      var c = a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      return (ascending ? c : -c) || a.order - b.order;
    });
    each(rows, function (r) { body.appendChild(r.row); });
    each(header.parentNode.cells, function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }
  each(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tHead.rows.length) return;
    each(table.tHead.rows[0].cells, function (header, index) {
      header.tabIndex = 0;
      header.addEventListener("click", function () { sortTable(table, header, index); });
      header.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, header, index); }
      });
    });
    table.classList.add("js-sortable");
  });
})();
)";

std::string slug(std::string_view heading) {
  std::string out;
  for (char c : heading) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "section" : out;
}

}  // namespace

std::string Page::unique_id(std::string_view heading) {
  const std::string base = slug(heading);
  std::string id = base;
  for (int n = 2;; ++n) {
    const bool taken =
        std::any_of(sections_.begin(), sections_.end(), [&](const Section& s) { return s.id == id; });
    if (!taken) return id;
    id = fmt::format("{}-{}", base, n);
  }
}

std::string Page::section(std::string_view heading, int level) {
  Section s{unique_id(heading), std::string(heading), std::clamp(level, 2, 3), {}};
  sections_.push_back(std::move(s));
  return sections_.back().id;
}

Page& Page::append(std::string_view html) {
  (sections_.empty() ? preamble_ : sections_.back().body) += html;
  return *this;
}

Page& Page::paragraph(std::string_view text) { return append("<p>" + escape(text) + "</p>\n"); }

Page& Page::warnings(const std::vector<std::string>& warnings) {
  std::vector<std::string> fresh;
  for (const std::string& w : warnings)
    if (std::find(warnings_shown_.begin(), warnings_shown_.end(), w) == warnings_shown_.end()) fresh.push_back(w);
  if (fresh.empty()) return *this;
  std::string out = fmt::format("<div class=\"warnings\"><strong>Warnings ({})</strong><ul>\n", fresh.size());
  for (const std::string& w : fresh) out += "<li>" + escape(w) + "</li>\n";
  warnings_shown_.insert(warnings_shown_.end(), fresh.begin(), fresh.end());
  return append(out + "</ul></div>\n");
}

std::string Page::html() const {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "script-src 'unsafe-inline'; img-src data:\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"heapscope\">\n<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n"
      "<header><h1>{0}</h1></header>\n",
      escape(title_), kStyle);
  // A table of contents once there is something to find: several top-level sections.
  const auto top_level = std::count_if(sections_.begin(), sections_.end(), [](const Section& s) { return s.level == 2; });
  if (top_level > 1) {
    out += "<nav class=\"toc\"><strong>Contents</strong>\n<ol>\n";
    bool nested = false;
    for (const Section& s : sections_) {
      if (s.level == 3 && !nested) out += "<ol>\n";
      if (s.level == 2 && nested) out += "</ol></li>\n";
      if (s.level == 2 && &s != &sections_.front() && !nested) out += "</li>\n";
      nested = s.level == 3;
      out += fmt::format("<li><a href=\"#{}\">{}</a>{}", s.id, escape(s.heading), s.level == 3 ? "</li>\n" : "");
    }
    out += nested ? "</ol></li>\n" : "</li>\n";
    out += "</ol>\n</nav>\n";
  }
  out += "<main>\n" + preamble_;
  for (const Section& s : sections_)
    out += fmt::format("<section id=\"{0}\">\n<h{1}>{2}</h{1}>\n{3}</section>\n", s.id, s.level, escape(s.heading),
                       s.body);
  out += fmt::format("</main>\n<script>{}</script>\n</body>\n</html>\n", kScript);
  return out;
}

}  // namespace heapscope::html
