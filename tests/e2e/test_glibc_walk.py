"""End-to-end checks of heapscope's glibc heap walk against the fixtures' own ledgers.

Each fixture (tests/fixtures/walk_fixture_c.c, walk_fixture_threads.cpp) records every allocation it
keeps and frees, and glibc's own mallinfo2() taken after its last heap operation. The walk must find
every live allocation, must not call a freed one live, and its totals must reproduce mallinfo2 exactly.
Every check runs twice per fixture: with libc's separate debug file and with --no-debug-files (as on a
machine without libc6-dbg), where the allocator's structures must be found without debug symbols.
"""

import collections
import os
import unittest

from heapscope_e2e import (ARENA_STATES, CHUNK_HEADER, FREE_STATES, MALLINFO2_FIELDS, USED_STATES, BlockIndex,
                           cached_heapscope_json, capture_fixture, debug_flags)


def summary_of(capture, use_debug_files):
    return cached_heapscope_json("summary", capture.core, *debug_flags(use_debug_files))


def blocks_of(capture, use_debug_files, *filters):
    return cached_heapscope_json("blocks", capture.core, *filters, *debug_flags(use_debug_files))


def describe(block):
    return (f"{block['state']} block at {block['address']:#x} (chunk {block['chunk']:#x}, "
            f"{block['chunk_size']} bytes)")


class WalkChecks:
    """The checks every fixture and debug-file setting share. Not a TestCase itself: the concrete
    classes below mix it in with the fixture name and setting."""

    fixture = ""
    tunables = ""
    use_debug_files = True

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture(cls.fixture, cls.tunables)
        cls.ledger = cls.capture.ledger
        cls.summary = summary_of(cls.capture, cls.use_debug_files)
        cls.heap = cls.summary["heap"]
        cls.block_list = blocks_of(cls.capture, cls.use_debug_files, "--state", "all")
        cls.blocks = cls.block_list["blocks"]
        cls.index = BlockIndex(cls.blocks)

    # ---- the ledger's allocations ----

    def test_every_live_allocation_is_a_used_block_at_its_address(self):
        problems = []
        for allocation in self.ledger.live:
            block = self.index.at(allocation.address)
            if block is None:
                problems.append(f"{allocation.how}({allocation.size}) at {allocation.address:#x}: no block there")
            elif block["state"] not in USED_STATES:
                problems.append(f"{allocation.how}({allocation.size}) at {allocation.address:#x}: {describe(block)}")
            elif block["usable_size"] < allocation.size:
                problems.append(f"{allocation.how}({allocation.size}) at {allocation.address:#x}: usable_size "
                                f"{block['usable_size']} is smaller than requested")
        self.assertEqual(problems, [], f"{len(problems)} of {len(self.ledger.live)} live allocations")

    def test_large_allocations_are_mmapped(self):
        large = [a for a in self.ledger.live if a.how == "mmap"]
        self.assertTrue(large, "the fixture records mmapped allocations")
        for allocation in large:
            block = self.index.at(allocation.address)
            self.assertIsNotNone(block, f"no block at {allocation.address:#x}")
            self.assertEqual(block["state"], "mmapped", describe(block))
            self.assertEqual(block["arena"], 0, describe(block))

    def test_freed_allocations_are_not_used_blocks(self):
        freed = self.ledger.freed_and_not_live()
        self.assertTrue(freed, "the fixture records freed allocations")
        used = [describe(self.index.at(a.address)) for a in freed
                if self.index.at(a.address) is not None and self.index.at(a.address)["state"] in USED_STATES]
        self.assertEqual(used, [])

    def test_freed_allocations_lie_in_free_chunks(self):
        # A freed chunk is in tcache or a fastbin as it is, or in a bin, possibly merged with free
        # neighbours, or merged into top: either way some free-state chunk covers its address.
        problems = []
        for allocation in self.ledger.freed_and_not_live():
            block = self.index.containing(allocation.address - CHUNK_HEADER)
            if block is None or block["state"] not in FREE_STATES:
                where = describe(block) if block else "no chunk"
                problems.append(f"freed {allocation.size} at {allocation.address:#x}: {where}")
        self.assertEqual(problems, [])

    # ---- the block list ----

    def test_block_list_count_and_bytes(self):
        self.assertEqual(self.block_list["command"], "blocks")
        self.assertEqual(self.block_list["count"], len(self.blocks))
        self.assertEqual(self.block_list["bytes"], sum(b["chunk_size"] for b in self.blocks))

    def test_blocks_do_not_overlap_and_are_well_formed(self):
        previous_end, previous = 0, None
        for block in sorted(self.blocks, key=lambda b: b["chunk"]):
            self.assertIn(block["state"], USED_STATES | FREE_STATES, describe(block))
            self.assertGreaterEqual(block["address"], block["chunk"] + CHUNK_HEADER, describe(block))
            self.assertLessEqual(block["address"] + block["usable_size"], block["chunk"] + block["chunk_size"] + 8,
                                 describe(block))
            self.assertGreaterEqual(block["chunk"], previous_end,
                                    f"{describe(block)} overlaps {describe(previous) if previous else ''}")
            previous_end, previous = block["chunk"] + block["chunk_size"], block

    def test_blocks_belong_to_the_summary_arenas(self):
        arenas = {a["address"] for a in self.heap["arenas"]}
        for block in self.blocks:
            if block["state"] == "mmapped":
                self.assertEqual(block["arena"], 0, describe(block))
            else:
                self.assertIn(block["arena"], arenas, describe(block))

    def test_block_states_add_up_to_the_summary_totals(self):
        from_blocks = collections.defaultdict(lambda: {"blocks": 0, "bytes": 0})
        for block in self.blocks:
            from_blocks[block["state"]]["blocks"] += 1
            from_blocks[block["state"]]["bytes"] += block["chunk_size"]
        # Both commands count chunk bytes, so `blocks` must add up to what `summary` totals say. (The
        # mapping bytes of mmapped chunks, lead included, are heap.mmapped: see mallinfo2's hblkhd.)
        for state, total in self.heap["totals"].items():
            with self.subTest(state=state):
                self.assertEqual(dict(from_blocks[state]), total, "blocks --state all vs summary totals")

    def test_state_filters(self):
        used = blocks_of(self.capture, self.use_debug_files, "--state", "used")["blocks"]
        free = blocks_of(self.capture, self.use_debug_files, "--state", "free")["blocks"]
        key = lambda b: (b["chunk"], b["state"], b["usable_size"])  # noqa: E731
        self.assertEqual(sorted(map(key, used)), sorted(key(b) for b in self.blocks if b["state"] in USED_STATES))
        self.assertEqual(sorted(map(key, free)), sorted(key(b) for b in self.blocks if b["state"] in FREE_STATES))

    def test_min_size_filter(self):
        threshold = 4096
        found = {b["chunk"] for b in blocks_of(self.capture, self.use_debug_files, "--min-size", threshold,
                                               "--state", "all")["blocks"]}
        self.assertTrue(found <= {b["chunk"] for b in self.blocks})
        for block in self.blocks:  # whether the filter means usable or chunk size, these are certain
            if block["usable_size"] >= threshold:
                self.assertIn(block["chunk"], found, describe(block))
            if block["chunk_size"] < threshold:
                self.assertNotIn(block["chunk"], found, describe(block))

    # ---- the summary against glibc's own mallinfo2 ----

    def state_bytes(self, states, *names):
        return sum(states[name]["bytes"] for name in names)

    def test_arena_system_bytes_are_all_accounted_for(self):
        for arena in self.heap["arenas"]:
            with self.subTest(arena=hex(arena["address"])):
                accounted = self.state_bytes(arena["states"], *ARENA_STATES) + arena["overhead_bytes"]
                self.assertEqual(arena["system_bytes"], accounted)

    def test_totals_reproduce_mallinfo2(self):
        real = self.ledger.mallinfo2
        arenas = self.heap["arenas"]
        totals = self.heap["totals"]
        main_arenas = [a for a in arenas if a["main"]]
        self.assertEqual(len(main_arenas), 1, "exactly one main arena")
        overhead = sum(a["overhead_bytes"] for a in arenas)
        expected = {
            "arena": sum(a["system_bytes"] for a in arenas),
            "fordblks": self.state_bytes(totals, "free", "fastbin", "top"),
            "uordblks": self.state_bytes(totals, "in_use", "tcache") + overhead,
            "ordblks": len(arenas) + totals["free"]["blocks"],
            "smblks": totals["fastbin"]["blocks"],
            "fsmblks": totals["fastbin"]["bytes"],
            # hblkhd counts whole mappings, so heap.mmapped (mapping bytes) is the one to use; totals
            # count the same blocks in chunk bytes, without a memalign'ed chunk's lead (docs/json.md).
            "hblks": self.heap["mmapped"]["blocks"],
            "hblkhd": self.heap["mmapped"]["bytes"],
            "keepcost": main_arenas[0]["states"]["top"]["bytes"],
        }
        for field, value in expected.items():
            with self.subTest(field=field):
                self.assertEqual(value, real[field])
        self.assertEqual(self.heap["mmapped"]["blocks"], totals["mmapped"]["blocks"])
        self.assertLessEqual(totals["mmapped"]["bytes"], self.heap["mmapped"]["bytes"])

    def test_summary_mallinfo2_is_the_real_one(self):
        reported = self.heap["mallinfo2"]
        for field in MALLINFO2_FIELDS:
            with self.subTest(field=field):
                self.assertEqual(reported.get(field), self.ledger.mallinfo2[field])

    # ---- the process and how the heap was found ----

    def test_summary_describes_the_process(self):
        self.assertEqual(self.summary["command"], "summary")
        self.assertEqual(self.summary["target"]["pid"], self.ledger.pid)
        self.assertEqual(self.heap["allocator"], "glibc")
        # The fixtures ran here, so they used this machine's glibc.
        self.assertEqual(self.heap["glibc_version"], os.confstr("CS_GNU_LIBC_VERSION").split()[-1])
        tids = {t["tid"] for t in self.summary["threads"]}
        self.assertTrue(set(self.ledger.threads) <= tids, f"ledger threads {self.ledger.threads}, summary {tids}")

    def test_discovery_methods(self):
        methods = {d["structure"]: d["method"] for d in self.heap["discovery"]}
        self.assertIn("main_arena", methods)
        if self.use_debug_files:
            self.assertEqual(methods["main_arena"], "debug-symbol")
        else:
            self.assertNotIn("debug-symbol", methods.values(), self.heap["discovery"])


    def test_a_healthy_heap_gives_no_warnings(self):
        # Every cross-check (bins against free chunks, walked bytes against system_mem, mp_'s mmap
        # counters, tcache counts) warns on disagreement: silence means they all agreed.
        self.assertEqual(self.summary["warnings"], [])
        self.assertTrue(self.heap["complete"])


class NoDebugFileChecks(WalkChecks):
    use_debug_files = False

    def test_same_blocks_as_with_debug_files(self):
        key = lambda b: (b["address"], b["state"], b["usable_size"])  # noqa: E731
        with_debug = blocks_of(self.capture, True, "--state", "all")["blocks"]
        self.assertEqual(sorted(map(key, self.blocks)), sorted(map(key, with_debug)))


class CFixtureChecks:
    fixture = "walk_fixture_c"

    def test_every_chunk_state_is_present(self):
        # The fixture arranges each kind of chunk; a walk that misses one kind would pass the rest.
        states = {b["state"] for b in self.blocks}
        self.assertEqual(states, USED_STATES | FREE_STATES)


class ThreadsFixtureChecks:
    fixture = "walk_fixture_threads"

    def test_each_worker_has_an_arena(self):
        self.assertGreaterEqual(len(self.heap["arenas"]), 5)

    def test_an_arena_spans_two_heaps(self):
        heap_counts = [len(a["heaps"]) for a in self.heap["arenas"]]
        self.assertGreaterEqual(max(heap_counts), 2, heap_counts)

    def test_summary_lists_every_thread(self):
        self.assertGreaterEqual(len(self.ledger.threads), 6)
        self.assertEqual({t["tid"] for t in self.summary["threads"]}, set(self.ledger.threads))


class HugetlbThreadsFixture(ThreadsFixtureChecks, NoDebugFileChecks, unittest.TestCase):
    """glibc.malloc.hugetlb=2: non-main heaps are aligned to 4 huge pages instead of 64 MiB (whether or
    not huge pages could be had), and main_arena takes its memory with mmap instead of sbrk."""
    tunables = "glibc.malloc.hugetlb=2"

    def test_heaps_follow_the_huge_page_alignment(self):
        heaps = [h for a in self.heap["arenas"] if not a["main"] for h in a["heaps"]]
        self.assertTrue(heaps)
        self.assertLessEqual(max(h["end"] - h["start"] for h in heaps), 8 << 20)
        self.assertGreater(max(len(a["heaps"]) for a in self.heap["arenas"]), 8)

    def test_large_allocations_are_mmapped(self):
        # With hugetlb=2 this glibc serves the fixture's large blocks from the heaps: its own counters say
        # it mapped none, and the walk must agree.
        self.assertEqual(self.ledger.mallinfo2["hblks"], 0)
        self.assertEqual(self.heap["mmapped"]["blocks"], 0)


class CFixtureWithDebugFiles(CFixtureChecks, WalkChecks, unittest.TestCase):
    pass


class CFixtureWithoutDebugFiles(CFixtureChecks, NoDebugFileChecks, unittest.TestCase):
    pass


class ThreadsFixtureWithDebugFiles(ThreadsFixtureChecks, WalkChecks, unittest.TestCase):
    pass


class ThreadsFixtureWithoutDebugFiles(ThreadsFixtureChecks, NoDebugFileChecks, unittest.TestCase):
    pass


if __name__ == "__main__":
    unittest.main()
