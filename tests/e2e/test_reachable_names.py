"""Names of reachable blocks come from the roots (and vtables), never from a leak: a leaked object's fields
may point at chunks it no longer owns. `top` names the reachable blocks alone (Session::reachable_names), so
every command must give a reachable block the name `top` gives it.

stale_field leaks a Connection whose field points at a freed Session's chunk, which malloc gave to a
buffer a void* global keeps: the buffer is reachable and is no Session."""

import unittest

from heapscope_e2e import capture_fixture, heapscope_json


def by_address(blocks):
    return {b["address"]: b for b in blocks}


class StaleFieldNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        capture = capture_fixture("stale_field")
        cls.core = capture.core
        cls.owner = next(a.address for a in capture.ledger.live if a.how == "owner")
        cls.reused = next(a.address for a in capture.ledger.live if a.how == "reused")
        cls.reachable = by_address(heapscope_json("blocks", cls.core, "--state", "reachable", "--limit", "0")["blocks"])
        cls.leaked = by_address(heapscope_json("blocks", cls.core, "--state", "leaked", "--limit", "0")["blocks"])

    def test_the_connection_is_leaked_and_named_by_its_vtable(self):
        self.assertIn(self.owner, self.leaked)
        self.assertEqual(self.leaked[self.owner]["type"], "Connection")

    def test_the_reused_chunk_is_reachable_and_not_named_by_the_stale_field(self):
        self.assertIn(self.reused, self.reachable)
        self.assertNotIn("Session", self.reachable[self.reused]["type"])

    def test_top_names_every_reachable_block_as_blocks_does(self):
        rows = heapscope_json("top", self.core, "-n", "0")["rows"]
        self.assertEqual(len(rows), len(self.reachable))
        for row in rows:
            self.assertEqual(row["type"], self.reachable[row["address"]]["type"], hex(row["address"]))

    def test_leaks_names_the_connection_as_blocks_does(self):
        groups = heapscope_json("leaks", self.core)["groups"]
        self.assertIn("Connection", {g["type"] for g in groups})


if __name__ == "__main__":
    unittest.main()
