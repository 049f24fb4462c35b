"""Types from symbols: C++ objects named by their vtables, a heap functor named by std::function's manager
and placed by DWARF at its lambda expression."""

import os
import unittest

from heapscope_e2e import capture_fixture, heapscope_json


def line_of(source, text):
    with open(source, encoding="utf-8") as f:
        return next(number for number, line in enumerate(f, 1) if text in line)


class SymbolTypes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("typed_objects")
        cls.histogram = {row["type"]: row for row in heapscope_json("histogram", cls.capture.core)["types"]}

    def test_objects_are_named_by_their_vtables(self):
        self.assertEqual(self.histogram["shapes::Circle"]["count"], 5)
        self.assertEqual(self.histogram["shapes::Square"]["count"], 3)
        self.assertEqual(self.histogram["shapes::Circle"]["bytes"], 5 * 24)

    def test_a_heap_functor_is_named_by_its_lambda(self):
        lambdas = [name for name in self.histogram if "lambda" in name]
        self.assertEqual(len(lambdas), 1, f"one lambda type expected among {sorted(self.histogram)}")
        self.assertIn("main", lambdas[0])
        self.assertEqual(self.histogram[lambdas[0]]["count"], 1)

    def test_the_lambda_is_placed_at_its_source_line(self):
        source = os.path.join(os.environ["HEAPSCOPE_SOURCE_DIR"], "tests", "fixtures", "typed_objects.cpp")
        (name,) = [name for name in self.histogram if "lambda" in name]
        self.assertTrue(name.endswith(f" (typed_objects.cpp:{line_of(source, 'g_scale = [')})"), name)

    def test_describe_and_blocks_agree_on_the_type(self):
        blocks = heapscope_json("blocks", self.capture.core, "--state", "reachable")["blocks"]
        for block in blocks:
            if block["usable_size"] != 24:
                continue
            described = heapscope_json("describe", self.capture.core, hex(block["address"]))["block"]
            if described["type"].startswith("shapes::"):
                self.assertIn(described["type"], ("shapes::Circle", "shapes::Square"))
                self.assertTrue(any("vtable for" in p["points_to"] for p in
                                    heapscope_json("describe", self.capture.core, hex(block["address"]))["pointers"]))
                return
        self.fail("no typed 24-byte block found")


if __name__ == "__main__":
    unittest.main()
