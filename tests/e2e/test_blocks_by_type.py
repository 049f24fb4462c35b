"""End-to-end checks of the way from "type X grows" to addresses of X without a script: `histogram` gives
example addresses per type, `blocks --type X` lists the blocks of one type (as histogram names it) and
`--limit N` cuts the list to its first N, saying how many matched. On leak_shapes' core (tests/fixtures/leaks),
whose blocks are typed from DWARF.
"""

import unittest

from heapscope_e2e import heapscope_json, run_heapscope
from test_leaks import capture_leak_fixture


class BlocksByType(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core = capture_leak_fixture("leak_shapes").core
        cls.histogram = heapscope_json("histogram", cls.core)["types"]

    def test_histogram_rows_give_example_addresses_of_their_type(self):
        self.assertTrue(self.histogram)
        for row in self.histogram[:5]:
            with self.subTest(type=row["type"]):
                self.assertEqual(len(row["examples"]), min(3, row["count"]))
                listed = heapscope_json("blocks", self.core, "--type", row["type"])
                addresses = [b["address"] for b in listed["blocks"]]
                self.assertEqual(row["examples"], sorted(addresses)[:3])
        text = run_heapscope("histogram", self.core).stdout
        self.assertIn(f"e.g. {hex(self.histogram[0]['examples'][0])}", text)
        self.assertEqual(len(heapscope_json("histogram", self.core, "--examples", "1")["types"][0]["examples"]), 1)

    def test_blocks_of_one_type_are_all_of_that_type_and_all_of_them(self):
        row = max(self.histogram, key=lambda r: r["count"])
        listed = heapscope_json("blocks", self.core, "--type", row["type"])
        self.assertEqual(listed["count"], row["count"])
        self.assertEqual(listed["matched"], row["count"])
        self.assertEqual({b["type"] for b in listed["blocks"]}, {row["type"]})
        self.assertIn(f"of type {row['type']}", listed["selection"])

    def test_limit_keeps_the_lowest_addresses_and_says_how_many_matched(self):
        row = max(self.histogram, key=lambda r: r["count"])
        self.assertGreater(row["count"], 2, "leak_shapes has a type with several blocks")
        every = heapscope_json("blocks", self.core, "--type", row["type"])["blocks"]
        limited = heapscope_json("blocks", self.core, "--type", row["type"], "--limit", "2")
        self.assertEqual([b["address"] for b in limited["blocks"]], [b["address"] for b in every[:2]])
        self.assertEqual(limited["count"], 2)
        self.assertEqual(limited["matched"], row["count"])
        text = run_heapscope("blocks", self.core, "--type", row["type"], "--limit", "2").stdout
        self.assertIn(f"the first 2 of {row['count']} matching blocks", text)

    def test_a_type_with_no_blocks_lists_none(self):
        listed = heapscope_json("blocks", self.core, "--type", "no such type")
        self.assertEqual(listed["blocks"], [])
        self.assertEqual(listed["matched"], 0)


if __name__ == "__main__":
    unittest.main()
