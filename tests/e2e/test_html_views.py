"""The HTML views of fragmentation, diff and evolution, and the report's fragmentation and evolution parts,
opened in headless Chromium (headless_chromium.py): every table has the rows of the same command's JSON,
every chart has an area on screen (the occupancy columns one bar per non-empty bucket, the evolution chart
one line per type, one sparkline per table row), and the console stays free of errors.

Cores: scattered_blocks' scattered stop (test_fragmentation) and growing_cache's three stops
(test_snapshots).
"""

import os
import unittest

import headless_chromium
from heapscope_e2e import heapscope_json, run_heapscope, work_dir
from test_fragmentation import capture_both_stops
from test_html_report import SVG_BOXES_SCRIPT, TABLE_ROWS_SCRIPT
from test_snapshots import capture_stops

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


if __name__ == "__main__":
    unittest.main()
