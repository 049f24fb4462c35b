// The HTML toolkit every HTML view is built from: escaping, one self-contained page (inline style and
// script, no external resource, so a report opens anywhere without network access), sortable tables,
// inline-SVG sparklines and bar charts, and collapsible trees. Views produce fragments with these and a Page
// puts them together; a bundle of reports is one Page with the sections of each part.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formatters/markup.h"

namespace heapscope::html {

// Text made safe inside an element or a double- or single-quoted attribute: & < > " ' become entities.
inline std::string escape(std::string_view text) { return markup_escape(text); }

// ---- tables ----

// A cell: the text shown (escaped when rendered) or ready HTML, and the value it sorts by (its data-sort
// attribute; empty: the text). Numeric columns sort by that value, never by the text, so "1.2 KiB" sorts
// after "980 B".
struct Cell {
  std::string text;
  std::string sort;
  bool is_html = false;  // `text` is HTML built by this toolkit (escaped already)
};

Cell text_cell(std::string text);
Cell html_cell(std::string html, std::string sort_text);  // sorts by sort_text
Cell number_cell(std::uint64_t value);                      // shows the number itself
Cell number_cell(double value, std::string shown);
Cell bytes_cell(std::uint64_t bytes);    // "1.5 KiB", sorted by bytes
Cell address_cell(std::uint64_t address);  // "0x55d0…", sorted by address

// A table whose header cells sort it (click: ascending, again: descending) through the page's script; with
// scripts disabled it is a plain table. `name` (data-table) lets tests and scripts find it.
class Table {
 public:
  enum class Kind { text, number };
  explicit Table(std::string name) : name_(std::move(name)) {}
  Table& column(std::string heading, Kind kind = Kind::text);
  Table& row(std::vector<Cell> cells);
  std::size_t rows() const { return rows_.size(); }
  std::string html() const;

 private:
  struct Column {
    std::string heading;
    Kind kind;
  };
  std::string name_;
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// ---- charts (inline SVG) ----

// A small line over `values` (left to right, e.g. one per snapshot), scaled to its own minimum and maximum,
// with a dot on the last value. `title` is the tooltip.
std::string sparkline(const std::vector<double>& values, std::string_view title, int width = 120, int height = 24);

struct Bar {
  std::string label;
  double value = 0;
  std::string shown;  // the value as people read it ("1.5 KiB")
};

// Bars scaled to the largest value: horizontal (one row per bar, label on the left), or vertical (columns,
// label below, for histograms such as page occupancy buckets).
enum class Orientation { horizontal, vertical };
std::string bar_chart(const std::vector<Bar>& bars, std::string_view title,
                      Orientation orientation = Orientation::horizontal);

// ---- trees ----

// A node of a collapsible tree: nested <details>/<summary>, open by default; a node without children is a
// plain line. `label_html` is HTML (escape text going into it).
struct TreeNode {
  std::string label_html;
  std::vector<TreeNode> children;
};
std::string tree(const std::vector<TreeNode>& roots, std::string_view name);

// ---- the page ----

// One HTML document: a title, sections (level 2 or 3, each with an id) listed in a table of contents when
// there are several, one inline <style> and one inline <script>.
class Page {
 public:
  explicit Page(std::string title) : title_(std::move(title)) {}
  // Starts a section; what is appended next goes into it. Returns its id (unique in the page).
  std::string section(std::string_view heading, int level = 2);
  Page& append(std::string_view html);
  Page& paragraph(std::string_view text);                       // <p> with escaped text
  // A "Warnings" list of those not shown on the page yet (a bundle's parts share the session's warnings).
  Page& warnings(const std::vector<std::string>& warnings);
  std::string html() const;

 private:
  struct Section {
    std::string id, heading;
    int level = 2;
    std::string body;
  };
  std::string unique_id(std::string_view heading);
  std::string title_;
  std::string preamble_;  // appended before any section
  std::vector<Section> sections_;
  std::vector<std::string> warnings_shown_;
};

}  // namespace heapscope::html
