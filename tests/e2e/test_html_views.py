"""The HTML views of fragmentation, diff and evolution, and the report's fragmentation and evolution parts,
opened in headless Chromium (headless_chromium.py): every table has the rows of the same command's JSON,
every chart has an area on screen (the occupancy columns one bar per non-empty bucket, the evolution chart
one line per type, one sparkline per table row), and the console stays free of errors.

Layout: no chart text overflows its SVG (every label and value of every bar and column chart lies inside
its chart's box, so "1.2 MiB in 25827" never shows as "1.2 MiB in 258": typed_c's core has 24576 records,
so its block counts have five digits); the report leads with its findings (leaks, top, roots,
fragmentation, then the summary with its long thread and module tables); a core without leaks says
"No leaks" with no empty table under it.

Cores: scattered_blocks' scattered stop (test_fragmentation), growing_cache's three stops (test_snapshots),
typed_c, and leak_shapes and all_reachable (tests/fixtures/leaks).
"""

import html
import os
import re
import unittest

import headless_chromium
from heapscope_e2e import capture_fixture, heapscope_json, run_heapscope, work_dir
from test_fragmentation import capture_both_stops
from test_html_report import SVG_BOXES_SCRIPT, TABLE_ROWS_SCRIPT, findings_of, sections_of
from test_leaks import capture_leak_fixture
from test_snapshots import capture_stops

# Every chart text whose box (in the chart's own units) leaves the chart's viewBox.
OVERFLOW_SCRIPT = """
var out = [];
document.querySelectorAll("svg.chart").forEach(function (svg) {
  var box = svg.viewBox.baseVal;
  svg.querySelectorAll("text").forEach(function (text) {
    var b = text.getBBox();
    if (b.x < -0.5 || b.y < -0.5 || b.x + b.width > box.width + 0.5 || b.y + b.height > box.height + 0.5)
      out.push({chart: svg.getAttribute("aria-label"), text: text.textContent,
                x: b.x, width: b.width, chart_width: box.width});
  });
});
return out;"""

CHART_TEXT_SCRIPT = """
return Array.prototype.map.call(document.querySelectorAll("svg.chart text"), function (t) { return t.textContent; });"""

SVG_CHART_LINES_SCRIPT = """
var chart = document.querySelector("figure.chart svg");
return chart ? {width: chart.getBoundingClientRect().width, lines: chart.querySelectorAll("polyline").length}
             : null;"""


class HtmlViews(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = headless_chromium.available()
        if missing:
            raise unittest.SkipTest(missing)
        cls.directory = os.path.join(work_dir(), "html-views")
        os.makedirs(cls.directory, exist_ok=True)
        (cls.scattered, _), _ = capture_both_stops()
        cls.stops, _ = capture_stops("growing_cache-html-stops")  # its own cores: test_snapshots recaptures its
        cls.browser = headless_chromium.Chromium(1280, 1000)

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()

    def written(self, name, *args):
        path = os.path.join(self.directory, name)
        result = run_heapscope(*args, "-o", path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("html)", result.stdout)
        return path

    def opened(self, path):
        """The page's tables (name → rows) and charts, after checking the browser logged nothing."""
        self.browser.open("file://" + path)
        self.assertEqual(self.browser.browser_log(), [], f"the browser reported problems on {path}")
        return self.browser.run_script(TABLE_ROWS_SCRIPT), self.browser.run_script(SVG_BOXES_SCRIPT)

    def test_fragmentation_page(self):
        report = heapscope_json("fragmentation", self.scattered)
        rows, charts = self.opened(self.written("fragmentation.html", "fragmentation", self.scattered))
        self.assertEqual(rows["fragmentation.arenas"], len(report["arenas"]))
        self.assertEqual(rows["fragmentation.sparse"], len(report["sparse_types"]))
        self.assertEqual(rows["fragmentation.blocker_types"], len(report["blocker_types"]))
        self.assertEqual(rows["fragmentation.blockers"], sum(len(a["blockers"]) for a in report["arenas"]))
        columns = [c for c in charts if c["cls"] == "chart columns"]
        self.assertEqual(len(columns), 2, "one histogram for pages, one for regions")
        page_buckets = [b["count"] for b in report["page_fill"]]
        for chart in columns:
            self.assertGreater(chart["width"] * chart["height"], 0)
        # The first bucket holds nearly every page: its column is the tallest drawn.
        self.assertGreater(page_buckets[0], 0.9 * report["pages"])

    def test_diff_page(self):
        diff = heapscope_json("diff", self.stops[0], self.stops[1])
        rows, _ = self.opened(self.written("diff.html", "diff", self.stops[0], self.stops[1]))
        self.assertEqual(rows["diff.types"], len(diff["types"]))
        self.assertEqual(rows["diff.roots"], len(diff["roots"]))
        self.assertEqual(rows["diff.new_by_type"], len(diff["addresses"]["by_type"]))
        first_type = self.browser.run_script(
            'return document.querySelector("table[data-table=\\"diff.types\\"]").tBodies[0].rows[0].lastChild.textContent;')
        self.assertEqual(first_type, diff["types"][0]["type"])
        trees = self.browser.run_script('return document.querySelectorAll("[data-tree=\\"diff.samples\\"] details").length;')
        self.assertGreater(trees, 0, "new blocks' retainer paths as trees")

    def test_evolution_page_and_report_part(self):
        evolution = heapscope_json("evolution", *self.stops)
        rows, _ = self.opened(self.written("evolution.html", "evolution", *self.stops))
        self.assertEqual(rows["evolution.types"], len(evolution["series"]))
        chart = self.browser.run_script(SVG_CHART_LINES_SCRIPT)
        self.assertIsNotNone(chart, "the evolution chart is inline in the page")
        self.assertGreater(chart["width"], 0)
        self.assertEqual(chart["lines"], len(evolution["series"]))
        sparklines = self.browser.run_script(
            'return document.querySelectorAll("table[data-table=\\"evolution.types\\"] svg").length;')
        self.assertEqual(sparklines, len(evolution["series"]))

        report = self.written("report.html", "report", self.stops[2], "--earlier", self.stops[0],
                              "--earlier", self.stops[1])
        rows, _ = self.opened(report)
        self.assertIn("fragmentation.arenas", rows)
        self.assertEqual(rows["evolution.types"], len(evolution["series"]))
        # The findings say how the heap grew, and which type grew most.
        with open(report, encoding="utf-8") as f:
            findings = findings_of(f.read())
        self.assertIn(f"Growth over {len(evolution['points'])} cores: in use ", findings)
        most = max(evolution["series"], key=lambda series: series["growth_bytes"])
        self.assertIn(f"Grew most: {html.escape(most['type'])} (+", findings)


    # ---- layout ----

    def test_no_chart_text_overflows_its_chart(self):
        many_blocks = capture_fixture("typed_c").core
        pages = {"report": self.written("layout-report.html", "report", many_blocks),
                 "summary": self.written("layout-summary.html", "summary", many_blocks),
                 "fragmentation": self.written("layout-fragmentation.html", "fragmentation", many_blocks),
                 "leaks": self.written("layout-leaks.html", "leaks", capture_leak_fixture("leak_shapes").core)}
        for name, path in pages.items():
            with self.subTest(page=name):
                self.opened(path)
                texts = self.browser.run_script(CHART_TEXT_SCRIPT)
                self.assertTrue(texts, "the page has charts")
                if name == "summary":  # five-digit block counts, shown whole
                    self.assertTrue(any(re.search(r" in \d{5}$", t) for t in texts), texts)
                self.assertEqual(self.browser.run_script(OVERFLOW_SCRIPT), [])

    def test_the_report_leads_with_its_findings(self):
        with open(self.written("layout-order.html", "report", self.scattered), encoding="utf-8") as f:
            page = f.read()
        parts = [s for s in sections_of(page) if s in ("leaks", "top", "roots", "fragmentation", "summary")]
        self.assertEqual(parts, ["leaks", "top", "roots", "fragmentation", "summary"])
        self.assertLess(page.index('id="leaks"'), page.index('data-table="summary.threads"'))
        self.assertLess(page.index('data-table="summary.arenas"'), page.index('data-table="summary.modules"'))

    def test_no_leaks_is_a_sentence_without_an_empty_table(self):
        with open(self.written("layout-no-leaks.html", "leaks", capture_leak_fixture("all_reachable").core),
                  encoding="utf-8") as f:
            page = f.read()
        self.assertIn("No leaks", page)
        self.assertNotIn('data-table="leaks.groups"', page)


if __name__ == "__main__":
    unittest.main()
