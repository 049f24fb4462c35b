"""The retention commands through LLDB give what the CLI gives on the same core: `heap top` on the
10 MB tree, `heap threads` on the exited threads whose handles a std::set keeps."""

import os
import shutil
import unittest

from heapscope_e2e import capture_fixture, capture_program, fixture_path, heapscope_json
from lldb_session import run_lldb


def lldb_json(executable, core, command):
    run = run_lldb([f"target create {executable} --core {core}", f"heap {command} --json"])
    return run.json_of(f"heap {command} --json")


@unittest.skipUnless(shutil.which("lldb-16"), "lldb-16 is not installed")
class RetentionThroughLldb(unittest.TestCase):
    def test_top_names_the_same_suspects(self):
        executable = fixture_path(os.path.join("retention", "retention_tree"))
        core, _ = capture_program("retention-tree", executable)
        cli = heapscope_json("top", core)
        lldb = lldb_json(executable, core, "top")
        self.assertTrue(cli["suspects"])
        self.assertEqual(lldb["suspects"], cli["suspects"])
        self.assertEqual(lldb["rows"], cli["rows"])

    def test_threads_names_the_same_holders_of_exited_threads(self):
        capture = capture_fixture("thread_handles")
        cli = heapscope_json("threads", capture.core)
        lldb = lldb_json(capture.executable, capture.core, "threads")
        self.assertEqual(len(lldb["exited"]["threads"]), 8)
        self.assertEqual(lldb["exited"], cli["exited"])
        by_tid = lambda report: {t["tid"]: t["tls_retained_bytes"] for t in report["threads"]}  # noqa: E731
        self.assertEqual(by_tid(lldb), by_tid(cli))


if __name__ == "__main__":
    unittest.main()
