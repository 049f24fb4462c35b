"""The unjoined-threads scenario diagnosed from the debugger prompt: thread_handles
(tests/fixtures/thread_handles.cpp) parked and attached with `lldb -p`, `heap threads` run live, and the
CLI on the core gdb writes at the same stop. Both must name the global std::set g_handles as the holder of
the eight exited threads' pthread_t — and so of their eight mapped stacks — and agree on every exited
thread and holder."""

import unittest

from heapscope_e2e import fixture_path, heapscope_json
from lldb_session import LiveScenario, require_lldb_and_gdb

UNJOINED = 8
MIB = 1024 * 1024


class UnjoinedThreadsLive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        scenario = LiveScenario("thread-handles", fixture_path("thread_handles"), ["heap threads --json"])
        cls.live = scenario.lldb.json_of("heap threads --json")["exited"]
        cls.core = heapscope_json("threads", scenario.core)["exited"]

    def assert_set_holds_every_stack(self, exited):
        self.assertEqual(exited["count"], UNJOINED)
        (group,) = [g for g in exited["holder_groups"] if "g_handles" in g["holder"]]
        self.assertEqual((group["holders"], group["handles"]), (UNJOINED, UNJOINED))
        self.assertEqual(group["stack_bytes"], exited["stack_bytes"])
        self.assertGreater(group["stack_bytes"], UNJOINED * 7 * MIB)
        self.assertEqual(exited["unheld"], 0)

    def test_live_names_the_set_as_holder_of_eight_stacks(self):
        self.assert_set_holds_every_stack(self.live)

    def test_core_of_the_same_stop_names_the_same(self):
        self.assert_set_holds_every_stack(self.core)
        self.assertEqual(self.live, self.core)


if __name__ == "__main__":
    unittest.main()
