"""`heapscope threads` on the thread_handles fixture (tests/fixtures/thread_handles.cpp): eight threads
finished without being joined, their pthread_t kept in the global std::set g_handles, so glibc keeps
their descriptors and 8 MiB stack mappings; and one parked thread whose thread_local vector holds a
1 MiB buffer (ledger: `live <address> 1048576 tls-cache`, `thread <tid>` of its owner)."""

import unittest

from heapscope_e2e import capture_fixture, heapscope_json, run_heapscope

UNJOINED = 8
MIB = 1024 * 1024


class Threads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("thread_handles")
        cls.report = heapscope_json("threads", cls.capture.core)
        cls.exited = cls.report["exited"]
        (cls.cache,) = [a for a in cls.capture.ledger.live if a.how == "tls-cache"]
        (cls.cache_owner,) = cls.capture.ledger.threads

    def test_reports_the_unjoined_threads_and_their_mapped_stacks(self):
        self.assertEqual(self.exited["count"], UNJOINED)
        self.assertEqual(len(self.exited["threads"]), UNJOINED)
        self.assertGreater(self.exited["stack_bytes"], UNJOINED * 7 * MIB)
        self.assertEqual(self.exited["stack_bytes"], sum(t["stack_size"] for t in self.exited["threads"]))
        for thread in self.exited["threads"]:
            self.assertGreater(thread["stack_size"], 7 * MIB)
            self.assertLessEqual(thread["stack_start"], thread["pthread"])
            self.assertLess(thread["pthread"], thread["stack_end"])

    def test_the_set_nodes_hold_every_handle(self):
        handles = {t["pthread"] for t in self.exited["threads"]}
        held_by_set = set()
        for holder in self.exited["holders"]:
            if holder["kind"] != "block":
                continue
            self.assertIn("g_handles", holder["path"]["root"]["label"])
            self.assertIn("g_handles", holder["retained_by"])
            self.assertEqual(len(holder["handles"]), 1, "a std::set node holds one value")
            held_by_set.update(holder["handles"])
        self.assertEqual(held_by_set, handles)
        self.assertEqual(self.exited["unheld"], 0)
        for thread in self.exited["threads"]:
            self.assertGreaterEqual(thread["holders"], 1)

    def test_holders_are_grouped_under_the_set(self):
        groups = [g for g in self.exited["holder_groups"] if "g_handles" in g["holder"]]
        self.assertEqual(len(groups), 1)
        self.assertEqual(groups[0]["holders"], UNJOINED)
        self.assertEqual(groups[0]["handles"], UNJOINED)
        self.assertEqual(groups[0]["stack_bytes"], self.exited["stack_bytes"])

    def test_the_thread_local_cache_is_its_owners_tls(self):
        (owner,) = [t for t in self.report["threads"] if t["tid"] == self.cache_owner]
        self.assertGreaterEqual(owner["tls_retained_bytes"], self.cache.size)
        self.assertLess(owner["stack_retained_bytes"], self.cache.size)
        for other in self.report["threads"]:
            if other["tid"] != self.cache_owner:
                self.assertLess(other["tls_retained_bytes"], self.cache.size)
        self.assertGreater(owner["stack_size"], 7 * MIB)

    def test_text_names_the_set_as_holder(self):
        result = run_heapscope("threads", self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"Exited threads glibc still holds: {UNJOINED}", result.stdout)
        self.assertRegex(result.stdout, r"g_handles in thread_handles \(8×\) holds 8 pthread_t of exited threads "
                                        r"\(8 stacks, [0-9.]+ MiB mapped\)")


if __name__ == "__main__":
    unittest.main()
