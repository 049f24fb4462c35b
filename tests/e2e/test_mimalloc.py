"""mimalloc 2.0.9 (Debian's libmimalloc.so.2, preloaded, and linked into the fixture from libmimalloc-dev,
the program also stripped): the mimalloc plug-in (engine/runtime/mimalloc) walks its heap, so every command
works on such a process.

The checks every allocator's walk must pass are in allocator_walk.py; here, what is mimalloc's own: its
statistics (the segments in use and abandoned, as mi_stats_print_out prints them in the fixture) against
the walk, how its structures are found without any symbol of the library (Debian's is stripped), `verify`
on a sound heap and on damaged ones, and what happens when a segment loses its header. How the figures
reconcile is in docs/architecture.md ("How the mimalloc walker finds things").
"""

import collections
import struct
import unittest

from allocator_walk import (LEAK_TAGS, Allocator, AttachChecks, DebuggerChecks, WalkChecks, capture, damaged_copy,
                            discovered_addresses, leak_signature, read_core)
from heapscope_e2e import capture_program, fixture_path, heapscope_json, parse_ledger, run_heapscope

LIBRARY = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
STRUCTURES = ("segments", "_mi_stats_main", "_mi_heap_main", "heaps")
PRELOADED = Allocator(name="mimalloc", version="2.0.9", preload=LIBRARY, fixture="allocator_fixture",
                      allocated_figure="segments", structures=STRUCTURES)
LINKED = Allocator(name="mimalloc", version="2.0.9", preload="", fixture="allocator_fixture_mimalloc",
                   allocated_figure="segments", structures=STRUCTURES)
STRIPPED = Allocator(name="mimalloc", version="2.0.9", preload="", fixture="allocator_fixture_mimalloc_stripped",
                     allocated_figure="segments", structures=STRUCTURES)

# allocator_threads.c: three threads freeing each other's blocks, one of them ended.
THREADS = Allocator(name="mimalloc", version="2.0.9", preload=LIBRARY, fixture="allocator_threads",
                    allocated_figure="", structures=STRUCTURES)
KEEPER_BLOCK = 1000   # the keeper's blocks, the first FREED_BY_MAIN of them freed by the main thread
FREED_BY_MAIN = 5

SEGMENT_BYTES = 32 << 20
SLICES = 264      # mi_segment_t.slices: the first mi_page_t
PAGE_BYTES = 80   # sizeof(mi_page_t)
PAGE_FREE = 16    # mi_page_t.free
PAGE_USED = 24    # mi_page_t.used
SEGMENT_COOKIE = 216
HEAP_THREAD_DELAYED_FREE = 2840  # mi_heap_t.thread_delayed_free


def pages(core, segment):
    """The pages in use of `segment` in `core`: (slice index, mi_page_t address, its fields)."""
    found = []
    index = 0
    while index < 512:
        entry = segment + SLICES + index * PAGE_BYTES
        count, _, capacity, reserved, free, used, block = struct.unpack(
            "<IIxxHHxxQII", read_core(core, entry, 32))
        if count == 0:
            break
        if index > 0 and block:
            found.append((index, entry, dict(capacity=capacity, reserved=reserved, free=free, used=used, block=block)))
        index += count
    return found


class MimallocChecks(WalkChecks):
    """mimalloc's own figures against the walk, for every way the program gets mimalloc."""

    def test_the_statistics_are_the_programs(self):
        figures = {f["name"]: f for f in self.summary["heap"]["figures"]}
        for name in ("segments", "segments_abandoned"):
            with self.subTest(figure=name):
                printed = self.ledger.properties[name]
                self.assertEqual((figures[name]["own"], figures[name]["walk"]), (printed, printed))
        segments = [d for d in self.summary["heap"]["discovery"] if d["structure"] == "segments"]
        self.assertEqual(len(segments), 1)
        self.assertIn(f"({self.ledger.properties['segments']} segments)", segments[0]["method"])

    def test_structures_are_found_without_the_librarys_symbols(self):
        found = {d["structure"]: d["method"] for d in self.summary["heap"]["discovery"]}
        self.assertEqual(found["_mi_stats_main"], "scan, checked")
        self.assertEqual(found["_mi_heap_main"], "page owner in libmimalloc's data")
        self.assertTrue(found["segments"].startswith("scan of 32 MiB boundaries, cookie-checked"))

    def test_each_thread_is_an_arena_of_segments(self):
        arenas = self.summary["heap"]["arenas"]
        self.assertEqual(len(arenas), len(self.summary["threads"]))
        self.assertEqual(sum(a["main"] for a in arenas), 1)
        for arena in arenas:
            for heap in arena["heaps"]:
                self.assertEqual(heap["start"] % SEGMENT_BYTES, 0)

    def test_verify_finds_a_sound_heap_sound(self):
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])
        checked = report["checked"]
        self.assertEqual(checked["heaps"], self.ledger.properties["segments"])
        self.assertEqual(checked["tcache_entries"], sum(1 for b in self.blocks if b["state"] == "tcache"))
        text = run_heapscope("verify", self.core).stdout
        self.assertIn("mimalloc 2.0.9): no problems found", text)
        self.assertIn("segments", text)
        self.assertNotIn("fastbins", text)

    def test_summary_speaks_of_threads_and_segments(self):
        text = run_heapscope("summary", self.core).stdout
        self.assertRegex(text, r"\nThread +segments +system +in use +free +deferred free")
        self.assertNotRegex(text, r"\nArena ")

    def test_fragmentation_speaks_of_threads_segments_and_pages(self):
        text = run_heapscope("fragmentation", self.core).stdout
        header = next(line for line in text.splitlines() if line.startswith("thread "))
        self.assertIn(" segments ", header)
        self.assertIn("Page utilisation per size class", text)
        self.assertNotIn("slab", text.lower())
        self.assertIn("free spans", text)

    def test_blocks_have_their_pages_size(self):
        # Every block of the walk is a block of its page: the ledger's requests fit mimalloc's size classes.
        by_size = collections.Counter(b["chunk_size"] for b in self.used)
        self.assertIn(8, by_size)
        self.assertTrue(all(size % 8 == 0 for size in by_size))


class MimallocPreloadedWalk(MimallocChecks, unittest.TestCase):
    ALLOCATOR = PRELOADED


class MimallocLinkedWalk(MimallocChecks, unittest.TestCase):
    ALLOCATOR = LINKED


class MimallocStrippedWalk(MimallocChecks, unittest.TestCase):
    ALLOCATOR = STRIPPED


class MimallocDamage(unittest.TestCase):
    """Damaged mimalloc structures give a partial model with warnings, and verify names them."""

    @classmethod
    def setUpClass(cls):
        PRELOADED.require()
        _, cls.core, cls.ledger = capture(PRELOADED)
        cls.first_segment = discovered_addresses(cls.core)["segments"]
        cls.pages = pages(cls.core, cls.first_segment)

    def test_a_free_list_leaving_its_page_is_a_finding(self):
        index, entry, page = next(p for p in self.pages if p[2]["free"])
        core = damaged_copy(self.core, "mimalloc-bad-free-list", {entry + PAGE_FREE: struct.pack("<Q", 0x1000)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any(f"free list of page 0x{entry:x}" in w for w in summary["warnings"]), summary["warnings"])
        findings = heapscope_json("verify", core)["findings"]
        self.assertIn(("free_list", 0x1000), [(f["kind"], f["chunk"]) for f in findings])
        used = {b["address"] for b in heapscope_json("blocks", core, "--state", "used")["blocks"]}
        self.assertTrue({a.address for a in self.ledger.live} <= used)

    def test_a_wrong_used_count_is_a_finding_but_not_damage_to_the_walk(self):
        index, entry, page = self.pages[0]
        core = damaged_copy(self.core, "mimalloc-bad-used", {entry + PAGE_USED: struct.pack("<I", page["used"] + 7)})
        findings = heapscope_json("verify", core)["findings"]
        self.assertEqual([(f["kind"], f["chunk"]) for f in findings], [("used_count", entry)])
        self.assertTrue(heapscope_json("summary", core)["heap"]["complete"])

    def test_a_segment_with_a_foreign_cookie_is_not_walked_and_the_walk_says_so(self):
        cookie, = struct.unpack("<Q", read_core(self.core, self.first_segment + SEGMENT_COOKIE, 8))
        core = damaged_copy(self.core, "mimalloc-bad-cookie",
                            {self.first_segment + SEGMENT_COOKIE: struct.pack("<Q", cookie ^ 0x5a5a)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any("do not carry this process's cookie" in w for w in summary["warnings"]),
                        summary["warnings"])
        leaks = heapscope_json("leaks", core)
        self.assertTrue(leaks["partial"])

    def test_a_lost_segment_header_is_a_segment_less(self):
        core = damaged_copy(self.core, "mimalloc-no-header", {self.first_segment + 224: bytes(48)})
        result = run_heapscope("summary", core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("mimalloc", result.stdout)


class MimallocThreads(unittest.TestCase):
    """allocator_threads: blocks freed by another thread (the keeper heap's thread-delayed list, its full
    page's thread-free list) and a thread that ended (its segment abandoned, its blocks freed into it by the
    main thread) — the same leaks as under glibc's malloc, every kept block, mimalloc's figures."""

    @classmethod
    def setUpClass(cls):
        THREADS.require()
        _, cls.core, cls.ledger = capture(THREADS)
        glibc_core, glibc_ledger = capture_program("allocator_threads-glibc", fixture_path("allocator_threads"))
        cls.glibc_core, cls.glibc_ledger = glibc_core, parse_ledger(glibc_ledger)
        cls.summary = heapscope_json("summary", cls.core)
        cls.blocks = {b["address"]: b for b in heapscope_json("blocks", cls.core, "--state", "all")["blocks"]}

    def test_the_leaks_are_glibcs(self):
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in self.ledger.live if a.how in LEAK_TAGS)
        self.assertEqual(len(expected), 9)  # a chain and a lone block from each thread
        ours, others = leak_signature(self.core, self.ledger)
        glibc_ours, glibc_others = leak_signature(self.glibc_core, self.glibc_ledger)
        self.assertEqual(ours, expected)
        self.assertEqual(glibc_ours, expected)
        self.assertEqual(others, glibc_others)

    def test_every_kept_block_is_in_use_with_room(self):
        for allocation in self.ledger.live:
            with self.subTest(address=hex(allocation.address)):
                block = self.blocks.get(allocation.address)
                self.assertIsNotNone(block)
                self.assertEqual(block["state"], "in_use")
                self.assertGreaterEqual(block["usable_size"], allocation.size)

    def test_blocks_freed_by_another_thread_are_deferred(self):
        freed = self.ledger.freed_and_not_live()
        self.assertEqual(len(freed), FREED_BY_MAIN + 40)
        for allocation in freed:
            with self.subTest(address=hex(allocation.address), size=allocation.size):
                self.assertEqual(self.blocks[allocation.address]["state"], "tcache")
        # The first block the main thread freed into the keeper's full page is on the keeper heap's
        # thread-delayed list (mi_heap_t.thread_delayed_free), the rest on the page's thread-free list.
        keeper_heap, = [a["address"] for a in self.summary["heap"]["arenas"] if a["address"] and not a["main"]]
        delayed, = struct.unpack("<Q", read_core(self.core, keeper_heap + HEAP_THREAD_DELAYED_FREE, 8))
        self.assertIn(delayed, {a.address for a in freed if a.size == KEEPER_BLOCK})

    def test_the_ended_threads_segment_is_abandoned(self):
        heap = self.summary["heap"]
        figures = {f["name"]: f for f in heap["figures"]}
        self.assertEqual((figures["segments_abandoned"]["own"], figures["segments_abandoned"]["walk"]), (1, 1))
        self.assertEqual(figures["segments"]["own"], figures["segments"]["walk"])
        owners = [a["address"] for a in heap["arenas"]]
        self.assertEqual(len(owners), 3)
        self.assertIn(0, owners)  # the abandoned segment has no owner
        self.assertEqual([w for w in self.summary["warnings"] if "glibc's malloc also holds" not in w], [])

    def test_verify_counts_every_deferred_block(self):
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])
        deferred = sum(1 for b in self.blocks.values() if b["state"] == "tcache")
        self.assertEqual(report["checked"]["tcache_entries"], deferred)
        self.assertEqual(report["checked"]["arenas"], 3)


class MimallocThreadsInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = THREADS


class MimallocThreadsAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = THREADS


class MimallocInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = PRELOADED


class MimallocLinkedInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = LINKED


class MimallocAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = PRELOADED


class MimallocStrippedAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = STRIPPED


if __name__ == "__main__":
    unittest.main()
