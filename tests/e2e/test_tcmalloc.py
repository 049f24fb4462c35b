"""gperftools tcmalloc (libtcmalloc_minimal.so.4 preloaded): the tcmalloc plug-in
(engine/runtime/tcmalloc) walks its heap, so every command works on such a process.

The checks every allocator's walk must pass are in allocator_walk.py; here, what is tcmalloc's own: its
count of allocated bytes (MallocExtension_GetNumericProperty("generic.current_allocated_bytes")) against
the walk, how its hidden statics are placed, and damage to them. How the in-use total reconciles is in
docs/architecture.md ("Reconciling with tcmalloc's own figures").
"""

import struct
import unittest

from allocator_walk import (Allocator, AttachChecks, DebuggerChecks, WalkChecks, capture, damaged_copy,
                            discovered_addresses)
from heapscope_e2e import heapscope_json, run_heapscope

TCMALLOC = Allocator(
    name="tcmalloc", version="2.10", preload="/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    fixture="allocator_fixture", allocated_figure="generic.current_allocated_bytes",
    structures=("pageheap_lock_", "sizemap_", "central_cache_", "pageheap_", "thread_heaps_"),
    # tcmalloc 2.10 leaks one object of its own: the default MallocExtension it creates at start-up and
    # replaces with its implementation (typed by its vtable).
    own_leaks=("MallocExtension",))


class TcmallocWalk(WalkChecks, unittest.TestCase):
    ALLOCATOR = TCMALLOC

    def test_hidden_statics_are_placed_by_the_known_build(self):
        found = {d["structure"]: d["method"] for d in self.summary["heap"]["discovery"]}
        # Debian's build is known: its hidden statics are placed by its build-id, then checked.
        for structure in ("sizemap_", "central_cache_", "pageheap_"):
            self.assertTrue(found[structure].startswith("known-build"), found[structure])

    def test_verify_says_there_are_no_checks(self):
        result = run_heapscope("verify", self.core)
        self.assertEqual(result.returncode, 1)
        self.assertIn("tcmalloc has no checks of its own structures", result.stderr)

    def test_in_use_bytes_are_tcmallocs_allocated_bytes(self):
        in_use = sum(b["chunk_size"] for b in self.used)
        self.assertEqual(in_use, self.ledger.properties[TCMALLOC.allocated_figure])
        totals = self.summary["heap"]["totals"]
        self.assertEqual(totals["in_use"]["bytes"], in_use)
        self.assertEqual(totals["mmapped"]["blocks"], 0)


class TcmallocDamage(unittest.TestCase):
    """Damaged tcmalloc structures give a clear error or a partial model with warnings (gperftools 2.10's
    layout: SizeMap is 4232 bytes; a CentralFreeList is 1216 bytes with size_class_ at +8)."""

    @classmethod
    def setUpClass(cls):
        TCMALLOC.require()
        _, cls.core, cls.ledger = capture(TCMALLOC)
        found = discovered_addresses(cls.core)
        cls.sizemap, cls.central = found["sizemap_"], found["central_cache_"]

    def test_a_lost_size_map_is_an_error_naming_tcmalloc(self):
        core = damaged_copy(self.core, "tcmalloc-no-sizemap", {self.sizemap: bytes(4232)})
        result = run_heapscope("leaks", core)
        self.assertEqual(result.returncode, 1)
        self.assertIn("and it is tcmalloc (gperftools), but cannot find tcmalloc's size map", result.stderr)
        self.assertNotIn("unsupported allocator", result.stderr)

    def test_a_damaged_central_list_gives_a_partial_walk(self):
        core = damaged_copy(self.core, "tcmalloc-bad-central-list",
                            {self.central + 1216 * 5 + 8: struct.pack("<Q", 77)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any("central free list of size class 5" in w for w in summary["warnings"]),
                        summary["warnings"])
        used = {b["address"] for b in heapscope_json("blocks", core, "--state", "used")["blocks"]}
        self.assertTrue({a.address for a in self.ledger.live} <= used)


class TcmallocInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = TCMALLOC


class TcmallocAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = TCMALLOC


if __name__ == "__main__":
    unittest.main()
