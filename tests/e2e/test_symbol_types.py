"""Types from symbols: C++ objects named by their vtables, a heap functor named by std::function's manager
and placed by DWARF at its lambda expression; on a stripped copy (no symbol names a vtable), the same
objects named by the RTTI their vtables point to."""

import os
import shutil
import subprocess
import unittest

from heapscope_e2e import capture_fixture, capture_program, fixture_path, heapscope_json, work_dir


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


def capture_stripped_copy(name):
    """A copy of fixture `name` with every symbol and all DWARF stripped, captured."""
    directory = os.path.join(work_dir(), "stripped")
    os.makedirs(directory, exist_ok=True)
    original = fixture_path(name)
    executable = os.path.join(directory, name + "_stripped")
    if not os.path.exists(executable) or os.path.getmtime(executable) < os.path.getmtime(original):
        shutil.copy2(original, executable + ".new")
        subprocess.run(["strip", "--strip-all", executable + ".new"], check=True)
        os.replace(executable + ".new", executable)
    core, _ = capture_program(name + "_stripped", executable)
    return executable, core


class StrippedTypes(unittest.TestCase):
    def test_a_stripped_programs_objects_are_named_by_their_rtti(self):
        executable, core = capture_stripped_copy("typed_objects")
        symbols = subprocess.run(["nm", executable], capture_output=True, text=True)
        self.assertIn("no symbols", symbols.stderr, "the copy must have no symbol table")
        histogram = {row["type"]: row for row in heapscope_json("histogram", core)["types"]}
        self.assertEqual(histogram["shapes::Circle"]["count"], 5)
        self.assertEqual(histogram["shapes::Square"]["count"], 3)
        self.assertEqual(histogram["shapes::Circle"]["bytes"], 5 * 24)

    def test_without_rtti_objects_are_grouped_by_their_vtables(self):
        executable, core = capture_stripped_copy("typed_objects_nortti")
        histogram = heapscope_json("histogram", core)["types"]
        by_vtable = sorted((row["count"], row["type"]) for row in histogram if row["type"].startswith("class with vtable"))
        # Circle's five and Square's three, each under its own vtable in the executable's read-only data.
        self.assertEqual([count for count, _ in by_vtable], [3, 5], by_vtable)
        for _, name in by_vtable:
            self.assertRegex(name, r"^class with vtable typed_objects_nortti_stripped\+0x[0-9a-f]+$")


if __name__ == "__main__":
    unittest.main()
