// The HTML toolkit (formatters/html/html_page.h), the HTML and DOT views built on it, and the report bundle
// on an image whose heap cannot be walked.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <regex>

#include "commands/command_line.h"
#include "fake_image.h"
#include "formatters/html/html_page.h"
#include "formatters/render.h"

using namespace heapscope;

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Two paths from one global that share their first block, then part: a prefix to merge.
RetainersReport two_paths_report() {
  RetainersReport r;
  r.query = 0x3000;
  r.target = {0x3000, 24, "Node", "dwarf"};
  r.verdict = "reachable";
  RootRef root{"global", "global g_\"quoted\" <list> in app", 0x601000, ".head"};
  PathStep first{{0x1000, 48, "List<int>", "dwarf"}, 8, ".first", 4096};
  PathStep via_a{{0x2000, 24, "Node", "dwarf"}, 0, ".next", 48};
  PathStep via_b{{0x2800, 24, "Node", "dwarf"}, 16, "", 48};
  PathStep target{{0x3000, 24, "Node", "dwarf"}, std::nullopt, "", 24};
  r.paths.push_back({root, {first, via_a, target}});
  r.paths.push_back({root, {first, via_b, target}});
  return r;
}

}  // namespace

TEST_CASE("html escaping covers markup, entities and both quote kinds") {
  CHECK(html::escape("<a href=\"x\">&'y'</a>") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;y&#39;&lt;/a&gt;");
  CHECK(html::escape("plain text, 1.5 KiB") == "plain text, 1.5 KiB");
  CHECK(html::escape("") == "");
}

TEST_CASE("a sortable table's numeric cells carry their value, not their text, to sort by") {
  html::Table t("demo.rows");
  t.column("bytes", html::Table::Kind::number).column("type").column("where", html::Table::Kind::number);
  t.row({html::bytes_cell(1536), html::text_cell("std::map<int, Node*>"), html::address_cell(0x10)});
  t.row({html::bytes_cell(980), html::text_cell("a & b")});  // a short row still gets every cell
  const std::string out = t.html();
  CHECK(t.rows() == 2);
  CHECK_THAT(out, Catch::Contains("<table class=\"sortable\" data-table=\"demo.rows\">"));
  CHECK_THAT(out, Catch::Contains("<th scope=\"col\" data-type=\"number\">bytes</th><th scope=\"col\">type</th>"));
  CHECK_THAT(out, Catch::Contains("<td class=\"num\" data-sort=\"1536\">1.5 KiB</td>"));
  CHECK_THAT(out, Catch::Contains("<td class=\"num\" data-sort=\"980\">980 B</td>"));
  CHECK_THAT(out, Catch::Contains("<td>std::map&lt;int, Node*&gt;</td>"));
  CHECK_THAT(out, Catch::Contains("<td class=\"num\" data-sort=\"16\">0x10</td>"));
  CHECK_THAT(out, Catch::Contains("<td>a &amp; b</td><td class=\"num\"></td></tr>"));
  CHECK(count_of(out, "<tr>") == 3);
}

TEST_CASE("a sparkline draws one point per value, scaled to the series' own range") {
  const std::string line = html::sparkline({1, 5, 3, 9}, "bytes of <Node>", 100, 20);
  std::smatch points;
  REQUIRE(std::regex_search(line, points, std::regex("points=\"([^\"]*)\"")));
  CHECK(count_of(points[1].str(), ",") == 4);
  CHECK_THAT(points[1].str(), Catch::StartsWith("2.0,18.0 ") && Catch::EndsWith(" 98.0,2.0"));  // min low, max high
  CHECK_THAT(line, Catch::Contains("<title>bytes of &lt;Node&gt;</title>"));
  CHECK_THAT(html::sparkline({4, 4, 4}, "flat", 100, 20), Catch::Contains("points=\"2.0,10.0 50.0,10.0 98.0,10.0\""));
  CHECK(html::sparkline({}, "nothing").find("polyline") == std::string::npos);
}

TEST_CASE("bar charts scale bars to the largest value and escape their labels") {
  const std::vector<html::Bar> bars{{"in_use", 300, "300 B"}, {"free <bins>", 150, "150 B"}, {"top", 0, "0 B"}};
  const std::string horizontal = html::bar_chart(bars, "bytes & states");
  CHECK(count_of(horizontal, "<rect ") == 3);
  CHECK_THAT(horizontal, Catch::Contains("width=\"320.0\"") && Catch::Contains("width=\"160.0\"") &&
                             Catch::Contains("width=\"0.0\""));
  CHECK_THAT(horizontal, Catch::Contains("free &lt;bins&gt;") && Catch::Contains("bytes &amp; states"));
  const std::string vertical = html::bar_chart(bars, "buckets", html::Orientation::vertical);
  CHECK_THAT(vertical, Catch::Contains("class=\"chart columns\"") && Catch::Contains("height=\"160.0\"") &&
                           Catch::Contains("height=\"80.0\""));
}

TEST_CASE("a tree nests details elements, leaves are plain lines") {
  html::TreeNode root{"root &amp; co", {{"middle", {{"leaf", {}}}}, {"other leaf", {}}}};
  const std::string out = html::tree({root}, "t");
  CHECK(count_of(out, "<details open>") == 2);
  CHECK(count_of(out, "<div class=\"leaf\">") == 2);
  CHECK_THAT(out, Catch::Contains("<summary>root &amp; co</summary>"));
}

TEST_CASE("a page is self-contained: one style, one script, no external resource, unique section ids") {
  html::Page page("heapscope <demo>");
  CHECK(page.section("Leaks") == "leaks");
  page.paragraph("1 < 2");
  CHECK(page.section("Leaks", 3) == "leaks-2");
  page.warnings({"w1", "w<2>"});
  page.warnings({"w1"});  // shown already: nothing more
  const std::string out = page.html();
  CHECK(count_of(out, "<style>") == 1);
  CHECK(count_of(out, "<script>") == 1);
  CHECK(count_of(out, "\"use strict\"") == 1);
  CHECK(out.find("console") == std::string::npos);
  CHECK(out.find(" src=") == std::string::npos);
  CHECK(out.find("<link") == std::string::npos);
  CHECK_THAT(out, Catch::Contains("<title>heapscope &lt;demo&gt;</title>") && Catch::Contains("<p>1 &lt; 2</p>"));
  CHECK_THAT(out, Catch::Contains("<section id=\"leaks-2\">\n<h3>Leaks</h3>"));
  CHECK(count_of(out, "<li>w1</li>") == 1);
  CHECK_THAT(out, Catch::Contains("<li>w&lt;2&gt;</li>"));
}

TEST_CASE("retainer paths render as one tree with shared prefixes merged") {
  const std::string out = render_html(two_paths_report());
  // One root, one shared first block, then two branches each ending at the target.
  CHECK(count_of(out, "global g_&quot;quoted&quot; &lt;list&gt; in app, field .head [0x601000]") == 1);
  CHECK(count_of(out, "0x1000 (List&lt;int&gt;, 48 bytes)</span>, <span class=\"retained\">retains 4.0 KiB</span>") == 1);
  CHECK(count_of(out, "<span class=\"node-target\">0x3000 (Node, 24 bytes)</span>") == 2);
  CHECK_THAT(out, Catch::Contains(", pointer at +0x8 (.first)") && Catch::Contains(", pointer at +0x10</span>"));
}

TEST_CASE("retainers as DOT: one node per root and block, escaped labels, field and offset on edges") {
  const std::string dot = render_dot(two_paths_report());
  CHECK_THAT(dot, Catch::StartsWith("digraph retainers {"));
  CHECK(count_of(dot, "shape=ellipse") == 1);
  CHECK(count_of(dot, "shape=box") == 4);  // 0x1000, 0x2000, 0x2800 and the target once
  CHECK(count_of(dot, " -> ") == 5);
  CHECK_THAT(dot, Catch::Contains("label=\"global g_\\\"quoted\\\" <list> in app\\n0x601000\""));
  CHECK_THAT(dot, Catch::Contains("root0 -> block0 [label=\".head\"]"));
  CHECK_THAT(dot, Catch::Contains("block0 -> block1 [label=\"+0x8 .first\"]"));
  CHECK_THAT(dot, Catch::Contains("block1 -> block2 [label=\"+0x0 .next\"]"));
  CHECK_THAT(dot, Catch::Contains("block3 -> block2 [label=\"+0x10\"]"));
  CHECK(count_of(dot, "penwidth=2.5") == 1);
}

TEST_CASE("report on an image without a heap: the summary, and why the other parts are missing") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  const CommandResult json = execute_command_line(session, {"report", "--json"});
  REQUIRE(json.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json.output);
  CHECK(parsed["command"] == "report");
  CHECK(parsed["summary"]["command"] == "summary");
  CHECK(parsed["summary"]["heap"].contains("error"));
  CHECK(parsed["leaks"].is_null());
  CHECK_THAT(parsed["warnings"][0].get<std::string>(), Catch::StartsWith("leaks, top and roots left out"));
  const CommandResult page = execute_command_line(session, {"report", "--format", "html"});
  REQUIRE(page.exit_code == 0);
  CHECK_THAT(page.output, Catch::Contains("<a href=\"#summary\">Summary</a>") && Catch::Contains("Not walked: "));
}
