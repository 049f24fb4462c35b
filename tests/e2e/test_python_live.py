"""CPython objects read the same live and from a core, in every frontend, and named by their own types.

A python3 process (Debian's, PYTHONMALLOC=malloc) holding instances of a user class, strings and lists
(tests/fixtures/python_objects_census.py) is analysed at one stop by `heapscope attach`, by the LLDB plugin
attached to it and by GDB attached to it, then cored by gdb at the same stop: every frontend gives the
core's leak verdicts (the objects were once recognised only in cores: live, every GC-tracked object read as
possibly leaked). CPython 3.11 puts two words before the PyGC_Head of a class's instances whose dicts it
manages: those objects are reached 32 bytes into their blocks, and their split dicts' values past a prefix;
neither may be "possibly leaked". The types' names come from the interpreter's own type objects, checked
against the census the fixture took with gc.get_objects() just before the core."""

import json
import os
import unittest

from heapscope_e2e import RemovesItsCore, heapscope_json, work_dir
from lldb_session import parked_fixture, require_lldb_and_gdb, run_lldb
from test_attach import take_core
from test_gdb import json_between_markers, marked, run_gdb

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python_objects_census.py")
ORDERS, STRINGS, LISTS = 30_000, 200_000, 50_000


def verdict_figures(leaks):
    """What every frontend must agree on: the verdicts' totals and what was recognised."""
    return {"totals": leaks["totals"], "object_headers": leaks["object_headers"],
            "held_by_idioms": leaks["held_by_idioms"]}


@unittest.skipUnless(os.access(PYTHON, os.X_OK), "Debian's python3 is not installed")
class PythonObjectsLiveAndFromCores(RemovesItsCore, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        directory = work_dir()
        ledger = os.path.join(directory, "python-census.ledger")
        cls.core = os.path.join(directory, "python-census.core")
        if os.path.exists(cls.core):
            os.remove(cls.core)
        with parked_fixture(PYTHON, ledger, "python_objects_census", env={"PYTHONMALLOC": "malloc"},
                            args=(SCRIPT, str(ORDERS), str(STRINGS), str(LISTS))) as process:
            pid = process.pid
            # A debugger's SIGSTOP wakes the interpreter from its sleep, which allocates a little as it
            # goes back to sleep: the debuggers first, so that every analysis sees the heap the core holds.
            cls.lldb = run_lldb(["heap leaks --json", "process detach"], lldb_args=["-p", str(pid)])
            cls.gdb = run_gdb(marked("leaks", "heap leaks --json") + ["detach"], "-p", str(pid))
            cls.attach = heapscope_json("attach", pid, "leaks")
            take_core(pid, cls.core)
        with open(ledger, encoding="utf-8") as f:
            cls.ledger = json.load(f)
        cls.from_core = heapscope_json("leaks", cls.core)
        cls.histogram = heapscope_json("histogram", cls.core)

    def test_attach_reads_what_the_core_holds(self):
        self.assertEqual(verdict_figures(self.attach), verdict_figures(self.from_core))

    def test_lldb_reads_what_the_core_holds(self):
        self.assertEqual(verdict_figures(self.lldb.json_of("heap leaks --json")), verdict_figures(self.from_core))

    def test_gdb_reads_what_the_core_holds(self):
        self.assertEqual(verdict_figures(json_between_markers(self.gdb, "leaks")), verdict_figures(self.from_core))

    def test_objects_are_recognised(self):
        headers = self.from_core["object_headers"]
        self.assertIsNotNone(headers)
        version = self.ledger["version"]
        self.assertIn(f"CPython {version[0]}.{version[1]}", headers["layout"])
        self.assertGreaterEqual(headers["blocks"], ORDERS + LISTS)

    def test_nothing_held_is_possibly_leaked(self):
        # Every object hangs from a global list; before the pre-header was read, each Order, its values
        # and what they hold (some 180,000 blocks) were "possibly leaked".
        possibly = self.from_core["totals"]["possibly"]["blocks"]
        self.assertLess(possibly, ORDERS // 100, self.from_core["totals"])
        self.assertEqual(self.from_core["totals"]["blocks"], 0, "a process whose objects all hang from globals")

    def rows(self):
        return {row["type"]: row for row in self.histogram["types"]}

    def test_user_class_instances_are_named_by_their_class(self):
        order = self.rows().get("Order")
        self.assertIsNotNone(order, sorted(self.rows())[:50])
        self.assertEqual(order["naming"], "runtime")
        self.assertEqual(order["count"], self.ledger["census"]["Order"])

    def test_builtin_types_match_the_census(self):
        rows, census = self.rows(), self.ledger["census"]
        # GC-tracked types the census counts: every list, every dict the interpreter tracks (dicts of atoms
        # only may be untracked, so heapscope's count is at least the census').
        self.assertEqual(rows["list"]["count"], census["list"])
        self.assertGreaterEqual(rows["dict"]["count"], census["dict"])
        self.assertEqual(rows["list"]["naming"], "runtime")
        # Strings are not GC-tracked: the fixture made STRINGS of them, and the interpreter has its own.
        self.assertGreaterEqual(rows["str"]["count"], STRINGS)
        self.assertEqual(rows["Order.__dict__ values"]["count"], ORDERS)
        self.assertGreaterEqual(rows["list items"]["count"], LISTS)


if __name__ == "__main__":
    unittest.main()
