"""Stacks of exited threads are dead memory: pointers left there do not keep blocks alive."""

import unittest

from heapscope_e2e import capture_fixture, heapscope_json


class ExitedThreads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("exited_threads")
        cls.dead_stack_blocks = {a.address for a in cls.capture.ledger.live if a.how == "dead-stack"}
        cls.leaked = {b["address"]: b for b in
                      heapscope_json("blocks", cls.capture.core, "--state", "leaked")["blocks"]}

    def test_fixture_left_a_block_per_thread(self):
        self.assertEqual(len(self.dead_stack_blocks), 10)

    def test_blocks_only_on_dead_stacks_are_leaked(self):
        self.assertEqual(self.dead_stack_blocks - set(self.leaked), set())

    def test_nothing_else_is_leaked(self):
        # The exited threads' descriptors are roots (their pthread_t handles are kept), so their DTVs and
        # TLS blocks stay reachable: only the dead-stack blocks are leaks.
        self.assertEqual(set(self.leaked) - self.dead_stack_blocks, set())
        for address in self.dead_stack_blocks:
            self.assertEqual(self.leaked[address]["verdict"], "direct")


if __name__ == "__main__":
    unittest.main()
