"""The LLDB plugin on a live local process reads its memory through /proc/PID/mem (as `heapscope attach`
does), not through lldb-server: the leaks it reports there are exactly those `heapscope attach` reports on
the same parked process, and its summary says where memory came from.

leak_shapes is started and parked; `lldb -p PID` runs `heap leaks --json` and `heap summary --names --json` and
detaches; then `heapscope attach PID leaks` runs on the same, unchanged process.
"""

import os
import unittest

from heapscope_e2e import heapscope_json, work_dir
from lldb_session import parked_fixture, require_lldb_and_gdb, run_lldb
from test_leaks import leak_fixture_path

FIXTURE = "leak_shapes"
# Fields that name the image source (the warnings): not the analysis.
SOURCE_FIELDS = frozenset({"warnings"})


def comparable(report):
    return {key: value for key, value in report.items() if key not in SOURCE_FIELDS}


class LiveLldbReadsLikeAttach(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        ledger = os.path.join(work_dir(), "lldb-live-reads.ledger")
        with parked_fixture(leak_fixture_path(FIXTURE), ledger, FIXTURE) as process:
            cls.pid = process.pid
            cls.lldb = run_lldb(["heap leaks --json", "heap summary --names --json", "process detach"],
                                lldb_args=["-p", str(process.pid)])
            cls.attach_leaks = heapscope_json("attach", process.pid, "leaks")
            cls.attach_summary = heapscope_json("attach", process.pid, "summary", "--names")

    def test_memory_comes_from_proc(self):
        target = self.lldb.json_of("heap summary --names --json")["target"]["description"]
        self.assertIn(f"/proc/{self.pid}/mem", target)

    def test_leaks_equal_attachs(self):
        lldb_leaks = self.lldb.json_of("heap leaks --json")
        self.assertGreater(lldb_leaks["totals"]["blocks"], 0, "leak_shapes leaks by design")
        self.assertEqual(comparable(lldb_leaks), comparable(self.attach_leaks))

    def test_heap_summary_equals_attachs(self):
        # The heap's figures and the typed share; module paths are as each source names them (LLDB
        # /lib/..., /proc's maps /usr/lib/...), so the rest is not compared.
        lldb_summary = self.lldb.json_of("heap summary --names --json")
        for part in ("heap", "typed"):
            with self.subTest(part=part):
                self.assertEqual(lldb_summary[part], self.attach_summary[part])


if __name__ == "__main__":
    unittest.main()
