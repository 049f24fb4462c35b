"""End-to-end checks of the HTML and DOT outputs on leak_shapes' core (tests/fixtures/leaks): the pages of
`heapscope report CORE -o r.html`, `leaks --format html` and `retainers --format html` opened in headless
Chromium (chromedriver's W3C protocol, headless_chromium.py), `retainers --format dot` run through
Graphviz, and `heap report -o FILE` in LLDB.

In the browser: every table has as many rows as the same command's JSON has entries, every SVG chart has an
area on screen, a click on a numeric header sorts the rows by value (not by "1.5 KiB" text) and a second
click reverses them, the console stays free of errors, and a screenshot is not blank.
"""

import html
import os
import re
import shutil
import subprocess
import unittest

import headless_chromium
from heapscope_e2e import heapscope_json, run_heapscope, work_dir
from lldb_session import require_lldb_and_gdb, run_lldb
from test_leaks import capture_leak_fixture

DOT_TIMEOUT_SECONDS = 60
# The leaks view charts this many of the largest groups (formatters/html/graph_html.cpp).
CHARTED_GROUPS = 12

TABLE_ROWS_SCRIPT = """
var rows = {};
document.querySelectorAll("table[data-table]").forEach(function (t) {
  rows[t.getAttribute("data-table")] = t.tBodies[0].rows.length;
});
return rows;"""

SVG_BOXES_SCRIPT = """
return Array.prototype.map.call(document.querySelectorAll("svg"), function (svg) {
  var box = svg.getBoundingClientRect();
  return {cls: svg.getAttribute("class"), width: box.width, height: box.height,
          bars: Array.prototype.map.call(svg.querySelectorAll("rect"), function (r) {
            return r.getBoundingClientRect().width; })};
});"""

COLUMN_SCRIPT = """
var table = document.querySelector(arguments[0]), column = arguments[1];
return {sort: table.tHead.rows[0].cells[column].getAttribute("aria-sort"),
        cells: Array.prototype.map.call(table.tBodies[0].rows, function (row) {
          return [row.cells[column].getAttribute("data-sort"), row.cells[column].textContent];
        })};"""


def sections_of(page):
    return re.findall(r'<section id="([^"]+)">', page)


def tables_of(page):
    return re.findall(r'<table class="sortable" data-table="([^"]+)">', page)


def findings_of(page):
    """The text of the report's findings box (formatters/html/report_html.cpp)."""
    start = page.index('data-findings="report"')
    return page[start:page.index("</div>", start)]


def holder_text(holder):
    """A suspect's holder as the report's sentences name it."""
    return html.escape(holder["label"] if holder["kind"] == "root" else hex(holder["address"]))


def expected_report_rows(report):
    """{data-table name: rows} the report page must show, from `report --json`."""
    summary, top = report["summary"], report["top"]
    assert top["by"] == "block", "report ranks blocks in its top part unless --top-by says otherwise"
    rows = {
        "summary.threads": len(summary["threads"]),
        "summary.modules": len(summary["modules"]),
        "summary.discovery": len([d for d in summary["heap"]["discovery"] if d["structure"] != "arena"]),
        "summary.arenas": len(summary["heap"]["arenas"]),
        "leaks.groups": len(report["leaks"]["groups"]),
        "top.blocks": len(top["rows"]),
        "roots.kinds": len(report["roots"]["kinds"]),
        "roots.roots": len(report["roots"]["roots"]),
        "fragmentation.arenas": len(report["fragmentation"]["arenas"]),
        "fragmentation.sparse": len(report["fragmentation"]["sparse_types"]),
        "fragmentation.blockers": sum(len(a["blockers"]) for a in report["fragmentation"]["arenas"]),
        "fragmentation.blocker_types": len(report["fragmentation"]["blocker_types"]),
    }
    outside = summary.get("outside_malloc")
    if outside and outside["bytes"]:
        rows["summary.outside_malloc"] = len(outside["largest"])
    for number, suspect in enumerate(top["suspects"], 1):
        if suspect["kind"] == "big_retainer" and suspect["retained_types"]:
            rows[f"top.suspect{number}.types"] = len(suspect["retained_types"])
    return rows


class HtmlReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = headless_chromium.available()
        if missing:
            raise unittest.SkipTest(missing)
        cls.capture = capture_leak_fixture("leak_shapes")
        core = cls.capture.core
        cls.directory = os.path.join(work_dir(), "html-report")
        os.makedirs(cls.directory, exist_ok=True)

        cls.report_file = os.path.join(cls.directory, "r.html")
        written = run_heapscope("report", core, "-o", cls.report_file)
        if written.returncode != 0:
            raise AssertionError(f"heapscope report -o failed: {written.stderr}")
        cls.wrote_message = written.stdout
        cls.report = heapscope_json("report", core)

        cls.leaks_file = cls.write_output("leaks.html", "leaks", core, "--format", "html")
        cls.leaks = heapscope_json("leaks", core)

        # A block a global holds: its retainer paths as a page and as a graph.
        cls.held = next(e.address for e in cls.capture.expected("reachable", "global") if not e.interior)
        cls.retainers = heapscope_json("retainers", core, hex(cls.held), "--paths", 3)
        cls.retainers_file = cls.write_output("retainers.html", "retainers", core, hex(cls.held), "--paths", 3,
                                              "--format", "html")
        cls.dot_file = cls.write_output("retainers.dot", "retainers", core, hex(cls.held), "--paths", 3,
                                        "--format", "dot")
        cls.browser = headless_chromium.Chromium(1280, 1000)

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()

    @classmethod
    def write_output(cls, name, *args):
        result = run_heapscope(*args)
        if result.returncode != 0:
            raise AssertionError(f"heapscope {' '.join(map(str, args))} failed: {result.stderr}")
        path = os.path.join(cls.directory, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(result.stdout)
        return path

    def open(self, path):
        self.browser.open("file://" + path)
        errors = [entry for entry in self.browser.browser_log() if entry.get("level") in ("SEVERE", "WARNING")]
        self.assertEqual(errors, [], f"the browser reported problems on {path}")

    def read(self, path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    # ---- the files ----

    def test_report_writes_one_html_file_chosen_by_its_extension(self):
        self.assertIn(f"wrote {self.report_file}", self.wrote_message)
        self.assertIn("html)", self.wrote_message)
        page = self.read(self.report_file)
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertEqual(sections_of(page)[:1], ["leaks"])  # findings first (test_html_layout)
        for part in ("summary", "leaks", "top", "roots"):
            self.assertIn(part, sections_of(page))
            self.assertIn(f'<a href="#{part}">', page, "the table of contents links every part")

    def test_the_report_opens_with_its_findings(self):
        page = self.read(self.report_file)
        self.assertLess(page.index('data-findings="report"'), page.index('<section id="leaks">'))
        findings = findings_of(page)
        leaks, top = self.report["leaks"], self.report["top"]
        largest = leaks["groups"][0]
        self.assertIn(f"Leaks: ", findings)
        self.assertIn(f"in {leaks['totals']['blocks']} blocks; the largest group: ", findings)
        self.assertIn(f"in {largest['count']} block{'s' if largest['count'] != 1 else ''} of {largest['size']} bytes, "
                      f"{html.escape(largest['type'])}.", findings)
        self.assertTrue(top["suspects"], "leak_shapes' globals hold most of its heap")
        self.assertIn("Largest retention suspect: " + holder_text(top["suspects"][0]["holder"]), findings)
        possibly_share = leaks["totals"]["possibly"]["bytes"] / top["heap"]["in_use_bytes"]
        self.assertEqual("`blocks --state possibly`" in findings, possibly_share > 0.10, possibly_share)
        self.assertNotIn("Growth over", findings, "one core: nothing to grow from")

    def test_the_roots_part_counts_owners_not_their_parts(self):
        roots = self.report["roots"]
        owners = sum(1 for row in roots["roots"] if row["depth"] == 0)
        self.assertLess(owners, len(roots["roots"]), "leak_shapes' owners have parts that hold something")
        shown = re.search(r"<p>The \d+ largest of \d+ [^<]*</p>", self.read(self.report_file))
        self.assertIsNotNone(shown, "the roots part says how many owners it shows")
        self.assertEqual(shown.group(0), f"<p>The {owners} largest of {roots['root_count']} owners, each followed by "
                                         "its parts that hold anything.</p>")

    def test_pages_are_self_contained(self):
        for path in (self.report_file, self.leaks_file, self.retainers_file):
            page = self.read(path)
            self.assertEqual(page.count("<script"), 1, path)
            self.assertEqual(page.count("<style"), 1, path)
            self.assertNotRegex(page, r"<(link|img|iframe)\b|\ssrc=", path)
            addresses = set(re.findall(r"https?://[^\s\"'<>]+", page))
            self.assertLessEqual(addresses, {"http://www.w3.org/2000/svg"}, path)

    # ---- in the browser ----

    def test_report_tables_have_the_rows_of_the_json(self):
        self.open(self.report_file)
        self.assertEqual(self.browser.run_script(TABLE_ROWS_SCRIPT), expected_report_rows(self.report))
        self.assertGreater(len(self.report["leaks"]["groups"]), 3, "leak_shapes leaks several kinds of block")

    def test_leaks_page_table_and_chart_match_the_leaks_json(self):
        self.open(self.leaks_file)
        self.assertEqual(self.browser.run_script(TABLE_ROWS_SCRIPT), {"leaks.groups": len(self.leaks["groups"])})
        charts = self.browser.run_script(SVG_BOXES_SCRIPT)
        self.assertEqual(len(charts), 1)
        expected_bars = min(CHARTED_GROUPS, len(self.leaks["groups"]))
        self.assertEqual(len(charts[0]["bars"]), expected_bars)
        self.assertTrue(all(width > 0 for width in charts[0]["bars"]), charts[0])

    def test_every_chart_of_the_report_has_an_area_on_screen(self):
        self.open(self.report_file)
        charts = self.browser.run_script(SVG_BOXES_SCRIPT)
        self.assertGreaterEqual(len(charts), 3, "block states, leak groups and root kinds")
        for chart in charts:
            self.assertGreater(chart["width"], 0, chart)
            self.assertGreater(chart["height"], 0, chart)
            self.assertTrue(any(width > 0 for width in chart["bars"]), chart)

    def test_a_click_on_a_numeric_header_sorts_by_value_and_a_second_click_reverses(self):
        self.open(self.leaks_file)
        table = 'table[data-table="leaks.groups"]'
        shown = {}
        for column, values in ((0, [g["bytes"] for g in self.leaks["groups"]]),
                               (1, [g["count"] for g in self.leaks["groups"]])):
            header = self.browser.find(f"{table} thead th:nth-child({column + 1})")
            self.browser.click(header)
            ascending = self.browser.run_script(COLUMN_SCRIPT, table, column)
            self.assertEqual(ascending["sort"], "ascending")
            self.assertEqual([int(sort) for sort, _ in ascending["cells"]], sorted(values))
            self.browser.click(header)
            descending = self.browser.run_script(COLUMN_SCRIPT, table, column)
            self.assertEqual(descending["sort"], "descending")
            self.assertEqual([int(sort) for sort, _ in descending["cells"]], sorted(values, reverse=True))
            shown[column] = [text for _, text in descending["cells"]]
        # The bytes column shows "1.5 KiB"-style text and sorts by the value behind it; counts show themselves.
        for text in shown[0]:
            self.assertRegex(text, r"^\d+(\.\d)? (B|KiB|MiB|GiB)$")
        self.assertEqual(shown[1], [str(n) for n in sorted((g["count"] for g in self.leaks["groups"]), reverse=True)])

    def test_retainer_paths_render_as_open_trees_ending_at_the_block(self):
        self.open(self.retainers_file)
        tree = self.browser.run_script("""
            var t = document.querySelector('[data-tree="retainers.paths"]');
            return {open: t.querySelectorAll("details[open]").length, height: t.getBoundingClientRect().height,
                    targets: Array.prototype.map.call(t.querySelectorAll(".node-target"),
                                                      function (n) { return n.textContent; }),
                    text: t.textContent};""")
        paths = self.retainers["paths"]
        self.assertTrue(paths, "a block a global holds has a path")
        self.assertEqual(len(tree["targets"]), len(paths), "each path ends at the target")
        for target in tree["targets"]:
            self.assertTrue(target.startswith(hex(self.retainers["target"]["address"])), target)
        self.assertGreater(tree["open"], 0)
        self.assertGreater(tree["height"], 0)
        for path in paths:
            self.assertIn(path["root"]["label"], tree["text"])
            for step in path["steps"]:
                self.assertIn(hex(step["address"]), tree["text"])

    def test_no_console_errors_and_the_screenshot_is_not_blank(self):
        self.open(self.report_file)
        messages = self.browser.browser_log()
        self.assertEqual(messages, [], "the page's script logs nothing and raises nothing")
        png = self.browser.screenshot_png()
        with open(os.path.join(self.directory, "report.png"), "wb") as f:
            f.write(png)
        self.assertGreater(headless_chromium.distinct_colours(png), 16, "a rendered page, not a blank one")

    # ---- DOT ----

    def test_retainers_dot_parses_and_holds_every_node_and_field_of_the_paths(self):
        graph = self.read(self.dot_file)
        self.assertTrue(graph.startswith("digraph retainers {"))
        for path in self.retainers["paths"]:
            self.assertIn(path["root"]["label"].replace('"', '\\"'), graph)
            for step in path["steps"]:
                self.assertIn(hex(step["address"]), graph)
                if "offset" in step:
                    self.assertIn(f'"+{step["offset"]:#x}' + (f' {step["field"]}' if step["field"] else ""), graph)
        if shutil.which("dot") is None:
            self.skipTest("graphviz is not installed (scripts/install-deps installs it)")
        result = subprocess.run(["dot", "-Tsvg", self.dot_file], capture_output=True, text=True,
                                timeout=DOT_TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "", "graphviz found nothing to warn about")
        self.assertIn("<svg", result.stdout)
        self.assertEqual(result.stdout.count('class="node"'), len(re.findall(r"^  (root|block)\d+ \[", graph, re.M)))

    # ---- LLDB ----

    def test_heap_report_in_lldb_writes_the_same_page_sections(self):
        require_lldb_and_gdb()
        path = os.path.join(self.directory, "lldb-report.html")
        if os.path.exists(path):
            os.remove(path)
        lldb = run_lldb([f"target create {self.capture.executable} --core {self.capture.core}",
                         f"heap report -o {path}"])
        self.assertIn(f"wrote {path}", lldb.output_of(f"heap report -o {path}"))
        page, cli_page = self.read(path), self.read(self.report_file)
        self.assertEqual(sections_of(page), sections_of(cli_page))
        self.assertEqual(tables_of(page), tables_of(cli_page))


if __name__ == "__main__":
    unittest.main()
