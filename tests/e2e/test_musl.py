"""musl 1.2.3's malloc (mallocng): allocator_fixture and allocator_threads built with musl-gcc (Debian's
musl-tools) — static with symbols, stripped, and dynamically linked to musl's libc.so — walked by the musl
plug-in (engine/runtime/musl) from cores, attach, LLDB and GDB.

What is mallocng's own: every block of the ledger is a slot in use whose room holds the request (the block
starts at the slot's 4-byte in-band header), the requested bytes mallocng records in each slot's reserved
bytes add up to the ledger's, its counters (usage_by_class, the metas handed out) equal the walk's, the
leaks are glibc's, `verify` is clean and speaks of meta areas, groups and slots, and damage (a meta area
whose secret is not the process's, a group that does not point back at its meta) gives warnings and a
partial model. How the structures are found is in docs/architecture.md ("How the musl walker finds things").
"""

import collections
import os
import struct
import unittest

from allocator_walk import (LEAK_TAGS, Allocator, AttachChecks, DebuggerChecks, WalkChecks, capture, damaged_copy,
                            leak_signature, leaked_ledger_blocks, read_core)
from heapscope_e2e import capture_program, fixture_path, heapscope_json, parse_ledger, run_heapscope

INBAND_HEADER = 4
MMAP_THRESHOLD = 131052  # requests from here on get a mapping of their own (size class 63)
META_MEM = 16            # struct meta.mem
STATIC = Allocator(name="musl", version="", preload="", fixture="allocator_fixture_musl",
                   allocated_figure="", structures=("__malloc_context", "meta areas"), mallinfo2=False)
STRIPPED = Allocator(name="musl", version="", preload="", fixture="allocator_fixture_musl_stripped",
                     allocated_figure="", structures=("__malloc_context", "meta areas"), mallinfo2=False)
DYNAMIC = Allocator(name="musl", version="1.2.3", preload="", fixture="allocator_fixture_musl_dynamic",
                    allocated_figure="", structures=("__malloc_context", "meta areas"), mallinfo2=False)
THREADS = Allocator(name="musl", version="", preload="", fixture="allocator_threads_musl",
                    allocated_figure="", structures=("__malloc_context", "meta areas"), mallinfo2=False)
MUSL_LOADER = "/lib/ld-musl-x86_64.so.1"


def glibc_capture(fixture):
    """(core, ledger) of the same program built for glibc: the reference for leaks."""
    core, ledger = capture_program(fixture + "-glibc", fixture_path(fixture))
    return core, parse_ledger(ledger)


class MuslWalkChecks:
    """Mixed into a TestCase whose ALLOCATOR is one build of allocator_fixture against musl."""

    ALLOCATOR = None
    CONTEXT_FOUND_BY = "symbol"

    @classmethod
    def setUpClass(cls):
        cls.ALLOCATOR.require()
        if cls.ALLOCATOR is DYNAMIC and not os.path.exists(MUSL_LOADER):
            raise unittest.SkipTest(f"{MUSL_LOADER} is not installed (musl, scripts/install-deps)")
        cls.executable, cls.core, cls.ledger = capture(cls.ALLOCATOR)
        cls.summary = heapscope_json("summary", cls.core)
        cls.blocks = heapscope_json("blocks", cls.core, "--state", "all")["blocks"]
        cls.used = heapscope_json("blocks", cls.core, "--state", "used")["blocks"]
        cls.used_at = {b["address"]: b for b in cls.used}

    # What every allocator's walk must hold (allocator_walk.py) that holds for musl's as it is.
    test_freed_blocks_are_not_used = WalkChecks.test_freed_blocks_are_not_used
    test_every_command_runs = WalkChecks.test_every_command_runs
    test_a_core_diffed_with_itself_keeps_every_block = WalkChecks.test_a_core_diffed_with_itself_keeps_every_block
    test_the_html_report_shows_the_allocators_figures_and_size_classes = (
        WalkChecks.test_the_html_report_shows_the_allocators_figures_and_size_classes)
    test_fragmentation_has_no_trimming_figures = WalkChecks.test_fragmentation_has_no_trimming_figures

    def figures(self):
        return {f["name"]: f for f in self.summary["heap"]["figures"]}

    def test_summary_names_musl_and_how_it_found_it(self):
        heap = self.summary["heap"]
        self.assertEqual((heap["allocator"], heap["version"]), ("musl", self.ALLOCATOR.version))
        self.assertTrue(heap["complete"])
        found = {d["structure"]: d["method"] for d in heap["discovery"]}
        self.assertTrue(found["__malloc_context"].startswith(self.CONTEXT_FOUND_BY), found)
        self.assertIn("meta areas", found)
        self.assertEqual(self.summary["warnings"], [])
        self.assertNotIn("mallinfo2", heap)

    def test_every_live_block_is_a_slot_in_use_with_room(self):
        for allocation in self.ledger.live:
            with self.subTest(address=hex(allocation.address), size=allocation.size):
                block = self.used_at.get(allocation.address)
                self.assertIsNotNone(block, "no used block at the address malloc returned")
                self.assertEqual(block["state"], "mmapped" if allocation.size >= MMAP_THRESHOLD else "in_use")
                self.assertGreaterEqual(block["usable_size"], allocation.size)
                self.assertEqual(block["chunk"], block["address"] - INBAND_HEADER)  # the in-band header
                self.assertEqual(block["chunk_size"] % 16, 0)

    def test_the_requested_bytes_are_the_ledgers(self):
        self.assertEqual(self.figures()["requested bytes"]["own"], sum(a.size for a in self.ledger.live))
        self.assertEqual(len(self.used), len(self.ledger.live))

    def test_malloc_contexts_counters_are_the_walks(self):
        figures = self.figures()
        for name in ("usage_by_class", "metas in use"):
            with self.subTest(figure=name):
                self.assertIsNotNone(figures[name]["own"])
                self.assertEqual(figures[name]["own"], figures[name]["walk"], figures[name]["meaning"])
        self.assertNotIn("DIFFERENT", run_heapscope("summary", self.core).stdout)

    def test_blocks_tile_the_groups(self):
        arena, = self.summary["heap"]["arenas"]
        states = arena["states"]
        self.assertEqual(sum(s["bytes"] for s in states.values()) + arena["overhead_bytes"], arena["system_bytes"])
        self.assertEqual(sum(h["end"] - h["start"] for h in arena["heaps"]), arena["system_bytes"])
        ordered = sorted(self.blocks, key=lambda b: b["chunk"])
        for before, after in zip(ordered, ordered[1:]):
            self.assertLessEqual(before["chunk"] + before["chunk_size"], after["chunk"])
        states = collections.Counter(b["state"] for b in self.blocks)
        self.assertGreater(states["free"], 0)
        self.assertGreater(states["mmapped"], 0)
        self.assertEqual(states["tcache"] + states["fastbin"] + states["top"], 0)

    def test_leaks_are_the_ones_glibc_finds(self):
        ours, others = leak_signature(self.core, self.ledger)
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in leaked_ledger_blocks(self.ledger))
        self.assertEqual(len(expected), 8)  # a chain and two lone blocks from each thread
        self.assertEqual(ours, expected)
        glibc_core, glibc_ledger = glibc_capture("allocator_fixture")
        self.assertEqual(leak_signature(glibc_core, glibc_ledger)[0], expected)
        self.assertEqual(others, [])

    def test_verify_finds_a_sound_heap_sound_in_mallocngs_words(self):
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])
        self.assertEqual(report["checked"]["chunks"], len(self.blocks))
        self.assertEqual(report["checked"]["heaps"], self.figures()["metas in use"]["walk"])
        text = run_heapscope("verify", self.core).stdout
        self.assertIn("no problems found", text)
        self.assertIn("meta areas", text)
        self.assertIn("groups", text)
        self.assertNotIn("fastbins", text)

    def test_summary_and_fragmentation_speak_of_groups(self):
        text = run_heapscope("summary", self.core).stdout
        self.assertRegex(text, r"\nContext +groups +system +in use +free")
        fragmentation = run_heapscope("fragmentation", self.core).stdout
        self.assertIn("Group utilisation per size class", fragmentation)
        self.assertIn("freed slots", fragmentation)
        self.assertIn("not available for musl", fragmentation)
        report = heapscope_json("fragmentation", self.core)
        for c in report["size_classes"]:
            self.assertEqual(c["object_bytes"] % 16, 0)
            self.assertLessEqual((c["in_use"] + c["free"]) * c["object_bytes"], c["slab_bytes"])


class MuslStaticWalk(MuslWalkChecks, unittest.TestCase):
    ALLOCATOR = STATIC


class MuslStrippedWalk(MuslWalkChecks, unittest.TestCase):
    ALLOCATOR = STRIPPED
    CONTEXT_FOUND_BY = "scan"


class MuslDynamicWalk(MuslWalkChecks, unittest.TestCase):
    ALLOCATOR = DYNAMIC
    CONTEXT_FOUND_BY = "scan"


class MuslThreads(unittest.TestCase):
    """allocator_threads: three threads freeing each other's blocks, one ended — the same leaks as under
    glibc's malloc, every kept block in use with room, both live threads' stacks scanned."""

    @classmethod
    def setUpClass(cls):
        THREADS.require()
        _, cls.core, cls.ledger = capture(THREADS)
        cls.used = {b["address"]: b for b in heapscope_json("blocks", cls.core, "--state", "used")["blocks"]}

    def test_the_leaks_are_glibcs(self):
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in self.ledger.live if a.how in LEAK_TAGS)
        self.assertEqual(len(expected), 9)
        ours, others = leak_signature(self.core, self.ledger)
        glibc_core, glibc_ledger = glibc_capture("allocator_threads")
        self.assertEqual(ours, expected)
        self.assertEqual(leak_signature(glibc_core, glibc_ledger)[0], expected)
        self.assertEqual(others, [])

    def test_every_kept_block_is_in_use_with_room(self):
        for allocation in self.ledger.live:
            with self.subTest(address=hex(allocation.address)):
                block = self.used.get(allocation.address)
                self.assertIsNotNone(block)
                self.assertGreaterEqual(block["usable_size"], allocation.size)
        for allocation in self.ledger.freed_and_not_live():
            self.assertNotIn(allocation.address, self.used)

    def test_each_threads_stack_and_tls_are_roots(self):
        # Blocks held by nothing but the keeper's stack, its thread-local variable and the main thread's stack
        # (allocator_threads.c: STACK_BLOCK, TLS_BLOCK, MAIN_STACK_BLOCK).
        threads = heapscope_json("threads", self.core)["threads"]
        self.assertEqual(len(threads), 2)  # the main thread and the keeper; the leaver ended
        main_tid, keeper_tid = (t["tid"] for t in threads)
        for size, holder, tid in ((1234, "stack", keeper_tid), (1240, "static TLS", keeper_tid),
                                  (1250, "stack", main_tid)):
            with self.subTest(size=size):
                block, = [a for a in self.ledger.live if a.size == size]
                text = run_heapscope("retainers", self.core, hex(block.address)).stdout
                self.assertRegex(text, rf"\n  {holder} of thread \d \(tid {tid}\)")
        self.assertEqual(heapscope_json("summary", self.core)["warnings"], [])

    def test_verify_is_clean(self):
        self.assertEqual(heapscope_json("verify", self.core)["findings"], [])


class MuslDamage(unittest.TestCase):
    """Damaged mallocng structures give a partial model with warnings, and verify names them."""

    @classmethod
    def setUpClass(cls):
        STATIC.require()
        _, cls.core, cls.ledger = capture(STATIC)
        found = {d["structure"]: d["address"] for d in heapscope_json("summary", cls.core)["heap"]["discovery"]}
        cls.first_area = found["meta areas"]

    def test_a_meta_area_with_a_foreign_secret_is_not_walked_and_the_walk_says_so(self):
        secret, = struct.unpack("<Q", read_core(self.core, self.first_area, 8))
        core = damaged_copy(self.core, "musl-bad-secret", {self.first_area: struct.pack("<Q", secret ^ 0x5a5a)})
        result = run_heapscope("summary", core)
        self.assertEqual(result.returncode, 0, result.stderr)
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any("list of meta areas is damaged" in w for w in summary["warnings"]), summary["warnings"])
        self.assertTrue(heapscope_json("leaks", core)["partial"])

    def test_a_group_that_does_not_point_back_is_a_finding(self):
        meta = self.first_area + 24  # the area's first meta
        group, = struct.unpack("<Q", read_core(self.core, meta + META_MEM, 8))
        core = damaged_copy(self.core, "musl-bad-group", {group: struct.pack("<Q", 0x1234560)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any(f"group at 0x{group:x}" in w for w in summary["warnings"]), summary["warnings"])
        findings = heapscope_json("verify", core)["findings"]
        self.assertIn(("group", group), [(f["kind"], f["chunk"]) for f in findings])
        self.assertEqual(run_heapscope("leaks", core).returncode, 0)


class MuslSimpleMalloc(unittest.TestCase):
    """A static program that never frees gets musl's bump allocator, which keeps no record of its blocks: every
    command says so, never an empty heap."""

    def test_the_bump_allocator_is_named_not_walked(self):
        executable = fixture_path("musl_simple_malloc")
        if not os.access(executable, os.X_OK):
            raise unittest.SkipTest("fixture musl_simple_malloc is not built (needs musl-tools)")
        core, _ = capture_program("musl_simple_malloc", executable)
        result = run_heapscope("leaks", core)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("and it is musl malloc, but the program is linked with musl's simple bump allocator",
                      result.stderr)
        summary = run_heapscope("summary", core)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        self.assertIn("simple bump allocator", summary.stdout)


class MuslRecorder(unittest.TestCase):
    """heapscope's allocation-site recorder is a glibc library: `heapscope record` says so of a program that runs
    on musl's dynamic linker rather than start it with a library it cannot load."""

    def test_record_refuses_a_musl_program(self):
        DYNAMIC.require()
        result = run_heapscope("record", "--", fixture_path(DYNAMIC.fixture))
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"runs on musl's C library (its interpreter is {MUSL_LOADER})", result.stderr)


class MuslInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = STATIC


class MuslThreadsInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = THREADS


class MuslAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = STATIC


class MuslStrippedAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = STRIPPED


class MuslThreadsAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = THREADS


if __name__ == "__main__":
    unittest.main()
