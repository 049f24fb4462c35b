"""A worker thread's local std::vector of 5 MB: retained by that thread, that frame, that variable —
the same through the CLI and through LLDB."""

import shutil
import unittest

from heapscope_e2e import capture_fixture, heapscope_json
from lldb_session import run_lldb

FIVE_MB = 5 << 20


class WorkerVector(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("worker_vector")
        cls.worker_tid = cls.capture.ledger.threads[0]
        cls.roots = heapscope_json("roots", cls.capture.core, "-n", "0")

    def frame_roots(self, roots):
        """The variable's rows (its frame retains the same, one level up in the ownership tree)."""
        return [r for r in roots["roots"] if r["kind"] == "stack" and "park_with_batch()" in r["label"]
                and "variable" in r["label"]]

    def test_the_vector_is_retained_by_the_worker_frame_and_variable(self):
        rows = self.frame_roots(self.roots)
        self.assertEqual(len(rows), 1, self.roots["roots"][:5])
        self.assertIn(f"(tid {self.worker_tid}) frame #", rows[0]["label"])
        self.assertIn("variable batch", rows[0]["label"])
        self.assertGreaterEqual(rows[0]["retained_bytes"], FIVE_MB)

    def test_threads_attributes_it_to_the_worker(self):
        threads = {t["tid"]: t for t in heapscope_json("threads", self.capture.core)["threads"]}
        worker = threads[self.worker_tid]
        self.assertGreaterEqual(worker["stack_retained_bytes"], FIVE_MB)
        self.assertEqual(worker["frames"][0]["variable"], "batch")
        self.assertGreaterEqual(worker["frames"][0]["retained_bytes"], FIVE_MB)

    def test_the_buffer_is_typed_from_the_local_variable(self):
        # Only the frame's local std::vector<char> points to it: DWARF types it through the local.
        (buffer,) = [b for b in heapscope_json("blocks", self.capture.core)["blocks"] if b["usable_size"] >= FIVE_MB]
        self.assertEqual(buffer["type"], "char[]")

    @unittest.skipUnless(shutil.which("lldb-16"), "lldb-16 is not installed")
    def test_lldb_gives_the_same_roots(self):
        lldb_roots = run_lldb([f"target create {self.capture.executable} --core {self.capture.core}",
                               "heap roots -n 0 --json"]).json_of("heap roots -n 0 --json")
        rows = self.frame_roots(lldb_roots)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["retained_bytes"], self.frame_roots(self.roots)[0]["retained_bytes"])
        self.assertEqual(rows[0]["label"], self.frame_roots(self.roots)[0]["label"])


if __name__ == "__main__":
    unittest.main()
