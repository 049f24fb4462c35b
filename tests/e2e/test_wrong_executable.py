"""End-to-end checks of a core analysed without its exact executable: another program given with --exe, an
--exe that does not exist, the executable moved away after the core was taken (a core from another
machine), and GDB started with the wrong program. The executable's writable segments are in the core
whether or not a file matches them, so they stay roots: the leaks are exactly those found with the right
executable, the result is not partial, and the output says first that the executable's symbols are missing.

leak_shapes (tests/fixtures/leaks) holds a block reachable only from g_data_anchor, an initialised global in
its executable's .data, which a core holds in the executable's file-backed writable page: dropping that
page as a root because no file matches it would report the block (and the leak count) wrong.
"""

import os
import shutil
import unittest

from heapscope_e2e import capture_program, fixture_path, heapscope_json, run_heapscope, work_dir
from test_gdb import json_between_markers, marked, run_gdb
from test_leaks import capture_leak_fixture, parse_leak_ledger

MISSING_SYMBOLS = "No symbols for "


def leak_totals(leaks):
    return leaks["totals"]["blocks"], leaks["totals"]["bytes"]


def capture_moved_away():
    """A core of a copy of leak_shapes, taken from a directory that is then removed: the core records a
    path where no executable is any more."""
    directory = os.path.join(work_dir(), "moved-away")
    os.makedirs(directory, exist_ok=True)
    executable = os.path.join(directory, "leak_shapes")
    shutil.copy2(capture_leak_fixture("leak_shapes").executable, executable)
    try:
        core, ledger_file = capture_program("leak_shapes-moved-away", executable)
    finally:
        os.remove(executable)
    return core, ledger_file


class CoreWithoutItsExecutable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.right = heapscope_json("leaks", cls.capture.core)
        cls.other_program = fixture_path("walk_fixture_c")

    def assert_same_leaks_said_without_symbols(self, leaks, text, core=None):
        reference = self.right if core is None else heapscope_json("leaks", core)
        self.assertGreater(leak_totals(reference)[0], 0)
        self.assertEqual(leak_totals(leaks), leak_totals(reference))
        self.assertFalse(leaks["partial"], leaks["warnings"])
        self.assertIn("leak_shapes", leaks["modules_without_symbols"])
        self.assertTrue(text.startswith(MISSING_SYMBOLS), text[:300])
        self.assertIn("leak_shapes", text.splitlines()[0])

    def test_another_program_as_exe(self):
        leaks = heapscope_json("leaks", self.capture.core, "--exe", self.other_program)
        text = run_heapscope("leaks", self.capture.core, "--exe", self.other_program).stdout
        self.assert_same_leaks_said_without_symbols(leaks, text)
        self.assertTrue(any("build-id mismatch" in w for w in leaks["warnings"]), leaks["warnings"])

    def test_nonexistent_exe(self):
        leaks = heapscope_json("leaks", self.capture.core, "--exe", "/nonexistent/leak_shapes")
        text = run_heapscope("leaks", self.capture.core, "--exe", "/nonexistent/leak_shapes").stdout
        self.assert_same_leaks_said_without_symbols(leaks, text)

    def test_executable_moved_away(self):
        core, ledger_file = capture_moved_away()
        _, expectations = parse_leak_ledger(ledger_file)
        leaks = heapscope_json("leaks", core)
        text = run_heapscope("leaks", core).stdout
        self.assert_same_leaks_said_without_symbols(leaks, text, core=self.capture.core)
        # Exactly the ledger's leaks: the blocks the executable's globals hold are reachable.
        leaked = {b["address"] for b in heapscope_json("blocks", core, "--state", "leaked")["blocks"]}
        self.assertEqual(leaked, {e.address for e in expectations if e.verdict == "leaked"})
        global_roots = heapscope_json("roots", core)
        labels = [r["label"] for r in global_roots["roots"] if r["kind"] == "global"]
        self.assertTrue(any("leak_shapes" in label for label in labels), labels)

    def test_gdb_with_the_wrong_executable(self):
        result = run_gdb(marked("leaks", "heap leaks --json"), self.other_program, self.capture.core)
        leaks = json_between_markers(result, "leaks")
        self.assertEqual(leak_totals(leaks), leak_totals(self.right))
        self.assertFalse(leaks["partial"], leaks["warnings"])
        self.assertIn("leak_shapes", leaks["modules_without_symbols"])


if __name__ == "__main__":
    unittest.main()
