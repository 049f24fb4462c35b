"""Boehm GC 8.2 (Debian's libgc1): the Boehm plug-in (engine/runtime/boehm) walks the collector's heap beside
glibc's malloc, so every command works on a garbage-collected C program, and the collector's registered
finalizers are finalizer roots.

boehm_fixture (tests/fixtures/boehm_fixture.c): three threads' objects of every size and of the three kinds
(GC_malloc, GC_malloc_atomic, GC_malloc_uncollectable), kept, freed with GC_FREE, and leaked, after a
collection freed garbage of its own; collection is then off, so the leaked objects are still allocated in the
core. For a garbage-collected heap "leaked" means unreachable but not yet collected: what the collector's next
collection frees. heapscope's verdict on such an object is the one it gives a lost malloc block (direct,
indirect), and the tests check it for exactly the objects the fixture dropped (its ledger), from the core,
attached, in LLDB and in GDB. The collector's own figures (GC_get_heap_size, GC_get_free_bytes,
GC_get_unmapped_bytes, recorded in the ledger at the stop) are the walk's.

boehm_finalizers (tests/fixtures/boehm_finalizers.c): 200 objects registered with GC_register_finalizer, each
keeping a 9,000-byte buffer alive and held by nothing but its registration: `finalizers` lists the 200 with
what each keeps, `roots` shows them as the finalizer owner kind, and top's first suspect is the values with
finalizers.
"""

import collections
import json
import os
import struct
import subprocess
import unittest

from allocator_walk import (Allocator, AttachChecks, DebuggerChecks, LEAK_TAGS, capture, damaged_copy,
                            discovered_addresses, leak_signature, leaked_ledger_blocks)
from heapscope_e2e import fixture_path, heapscope_json, run_heapscope, work_dir
from test_attach import take_core
from lldb_session import require_lldb_and_gdb, run_lldb
from test_gdb import between_markers, marked, run_gdb

BOEHM = Allocator(
    name="glibc + Boehm GC", version="2.36 + 8.2.2", preload="", fixture="boehm_fixture",
    allocated_figure="GC_get_heap_size", structures=("GC_arrays", "GC_obj_kinds", "GC_thread_key"))
FINALIZERS = Allocator(
    name="glibc + Boehm GC", version="2.36 + 8.2.2", preload="", fixture="boehm_finalizers",
    allocated_figure="GC_get_heap_size", structures=("GC_arrays",))
FIGURES = ("GC_get_heap_size", "GC_get_free_bytes", "GC_get_unmapped_bytes")
RESOURCES = 200
BUFFER_BYTES = 9000
# What a registration keeps alone: its object (16 bytes and the collector's extra byte for interior pointers:
# 32) and its buffer (9,000 and one: 9,008).
OBJECT_AND_BUFFER = 32 + 9008


def collector_arena(summary):
    (arena,) = [a for a in summary["heap"]["arenas"] if a["address"] == collector_arrays(summary)]
    return arena


def collector_arrays(summary):
    return next(d["address"] for d in summary["heap"]["discovery"] if d["structure"] == "GC_arrays")


def in_heaps(arena, address):
    return any(h["start"] <= address < h["end"] for h in arena["heaps"])


class BoehmWalk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        BOEHM.require()
        cls.executable, cls.core, cls.ledger = capture(BOEHM)
        cls.summary = heapscope_json("summary", cls.core)
        cls.blocks = heapscope_json("blocks", cls.core, "--state", "all")["blocks"]
        cls.used = {b["address"]: b for b in heapscope_json("blocks", cls.core, "--state", "used")["blocks"]}
        cls.arena = collector_arena(cls.summary)

    def test_summary_names_both_heaps_and_how_the_collector_was_found(self):
        heap = self.summary["heap"]
        self.assertEqual(heap["allocator"], BOEHM.name)
        self.assertEqual(heap["version"], BOEHM.version)
        self.assertTrue(heap["complete"])
        found = {d["structure"]: d["method"] for d in heap["discovery"]}
        self.assertTrue(set(BOEHM.structures) <= set(found), found)
        self.assertEqual(found["GC_arrays"], "symbol, size checked")
        self.assertEqual(self.summary["warnings"], [])
        self.assertEqual(len(self.ledger.threads), 3)

    def test_every_live_object_is_a_used_block_of_the_collectors_heap_with_room(self):
        self.assertGreater(len(self.ledger.live), 180)
        for allocation in self.ledger.live:
            with self.subTest(address=hex(allocation.address), size=allocation.size, how=allocation.how):
                block = self.used.get(allocation.address)
                self.assertIsNotNone(block, "no used block at the address GC_malloc returned")
                self.assertEqual(block["state"], "in_use")
                self.assertGreaterEqual(block["usable_size"], allocation.size)
                self.assertEqual(block["chunk"], block["address"])  # objects have no header
                self.assertTrue(in_heaps(self.arena, allocation.address))

    def test_freed_objects_are_on_free_lists(self):
        freed = self.ledger.freed_and_not_live()  # the collector reuses freed objects at once: some are live again
        self.assertGreater(len(freed), 30)
        by_address = {b["address"]: b for b in self.blocks}
        # The collector hands a freed object out again at once, to its own allocations too (a thread's
        # descriptor, a grown table), which the ledger does not record: a few may be in use again.
        reused = [a for a in freed if a.address in self.used]
        self.assertLessEqual(len(reused), 3, reused)
        for allocation in freed:
            if allocation.size <= 2048 and allocation not in reused:  # an object of its block, on a free list
                self.assertIn(by_address[allocation.address]["state"], ("free", "tcache"))

    def test_free_lists_and_threads_local_free_lists_are_told_apart(self):
        states = collections.Counter(b["state"] for b in self.blocks if in_heaps(self.arena, b["chunk"]))
        self.assertGreater(states["free"], 1000)  # the collected garbage and GC_FREE'd objects
        self.assertGreater(states["tcache"], 0)   # what the threads' allocations left on their own lists
        self.assertEqual(states["fastbin"] + states["top"] + states["mmapped"], 0)
        self.assertEqual(self.summary["heap"]["state_labels"]["tcache"], "tcache")  # glibc's heading leads

    def test_the_collectors_figures_are_the_walks_and_the_programs(self):
        figures = {f["name"]: f for f in self.summary["heap"]["figures"]}
        for name in FIGURES:
            with self.subTest(figure=name):
                figure = figures[name + "()"]
                self.assertEqual(figure["own"], self.ledger.properties[name])
                self.assertEqual(figure["walk"], figure["own"], figure["meaning"])
        self.assertEqual(self.arena["system_bytes"], self.ledger.properties["GC_get_heap_size"])
        self.assertNotIn("DIFFERENT", run_heapscope("summary", self.core).stdout)

    def test_blocks_tile_the_collectors_heap(self):
        states = self.arena["states"]
        self.assertEqual(sum(s["bytes"] for s in states.values()) + self.arena["overhead_bytes"],
                         self.arena["system_bytes"])
        self.assertEqual(sum(h["end"] - h["start"] for h in self.arena["heaps"]), self.arena["system_bytes"])
        ordered = sorted(self.blocks, key=lambda b: b["chunk"])
        for before, after in zip(ordered, ordered[1:]):
            self.assertLessEqual(before["chunk"] + before["chunk_size"], after["chunk"])

    def test_leaks_are_the_objects_the_program_dropped(self):
        ours, others = leak_signature(self.core, self.ledger)
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in leaked_ledger_blocks(self.ledger))
        self.assertEqual(len(expected), 12)  # four a thread
        self.assertEqual(ours, expected)
        # Nothing else of the collector's heap is unreachable but the fixture's own garbage (objects of 48 to
        # 144 requested bytes, 64 KiB buffers) that a stale conservative pointer (a register at GC_gcollect) kept through
        # its collection: the collector's bookkeeping (headers, mark stacks, free and reclaim lists) keeps
        # nothing alive, its finalization tables are roots, and unmarked objects awaiting the sweep are free.
        leaked = heapscope_json("blocks", self.core, "--state", "leaked")["blocks"]
        ledger = {a.address for a in self.ledger.live}
        strays = [b for b in leaked if in_heaps(self.arena, b["chunk"]) and b["address"] not in ledger]
        # The garbage's requests are 48 to 144 bytes; with the one byte the collector adds to each object when
        # interior pointers count (GC_all_interior_pointers, Debian's default) a 144-byte one takes 160.
        garbage_sizes = {48, 64, 80, 96, 112, 128, 144, 160, 65536 + 16}
        self.assertEqual([b for b in strays if b["chunk_size"] not in garbage_sizes], [])
        self.assertLessEqual(len(strays), 8)

    def test_verify_checks_the_collectors_structures(self):
        result = run_heapscope("verify", self.core)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])
        self.assertRegex(result.stdout, r"Checked: Boehm GC: \d+ heap sections? \(\d+ stretch(es)?\), \d+ block headers?, "
                                        r"[1-9]\d* free-list entries, [1-9]\d* on 3 threads' local free lists")
        (boehm,) = report["checked_in_own_words"]
        self.assertTrue(boehm.startswith("Boehm GC: "), boehm)

    def test_fragmentation_shows_block_use_per_object_size_and_free_runs(self):
        report = heapscope_json("fragmentation", self.core)
        sizes = {c["object_bytes"]: c for c in report["size_classes"]}
        self.assertGreater(len(sizes), 15)
        self.assertTrue(all(size % 16 == 0 and size <= 2048 for size in sizes))
        for c in sizes.values():
            self.assertEqual(c["slab_bytes"], c["slabs"] * 4096)
            self.assertLessEqual((c["in_use"] + c["cached"] + c["free"]) * c["object_bytes"], c["slab_bytes"])
        kinds = {f["kind"]: f for f in report["free_pages"]}
        self.assertEqual(kinds["free blocks"]["bytes"], self.ledger.properties["GC_get_free_bytes"])
        self.assertEqual(kinds["unmapped blocks"]["bytes"], self.ledger.properties["GC_get_unmapped_bytes"])
        # glibc's trimming rules for glibc's arena; none for the collector's.
        trim = {a["address"]: a["trim_known"] for a in report["arenas"]}
        self.assertEqual(sorted(trim.values()), [False, True])
        self.assertFalse(trim[self.arena["address"]])
        text = run_heapscope("fragmentation", self.core).stdout
        self.assertIn("free blocks", text)
        self.assertIn("malloc_trim(0) returned", text)
        self.assertIn("not available: heapscope knows no trimming rules of this heap's allocator", text)

    def test_describe_says_the_collector_keeps_no_allocation_sites(self):
        gc_object = next(a.address for a in self.ledger.live if a.how == "GC_malloc")
        describe = heapscope_json("describe", self.core, hex(gc_object))
        self.assertIn("Boehm GC's, which keeps no allocation stacks", describe["no_site"])
        self.assertNotIn("heapscope record", describe["no_site"])

    def test_every_command_runs(self):
        for command in (["leaks"], ["histogram"], ["top"], ["roots"], ["threads"], ["chains"], ["finalizers"],
                        ["fragmentation"], ["report", "-o", "/dev/null"]):
            with self.subTest(command=command[0]):
                result = run_heapscope(command[0], self.core, *command[1:])
                self.assertEqual(result.returncode, 0, result.stderr)
        leaked = leaked_ledger_blocks(self.ledger)[0].address
        for command in ("retainers", "refs", "describe"):
            with self.subTest(command=command):
                result = run_heapscope(command, self.core, hex(leaked))
                self.assertEqual(result.returncode, 0, result.stderr)


class BoehmInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = BOEHM


class BoehmAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = BOEHM


class BoehmFinalizers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        FINALIZERS.require()
        cls.executable, cls.core, cls.ledger = capture(FINALIZERS)
        cls.resources = [a for a in cls.ledger.live if a.how == "resource"]
        cls.buffers = [a for a in cls.ledger.live if a.how == "buffer"]

    def test_finalizers_lists_the_200_registrations_with_what_each_keeps(self):
        report = heapscope_json("finalizers", self.core, "-n", "1000")
        ours = [r for r in report["registrations"] if r["kind"] == "gc_finalizer"]
        self.assertEqual(len(ours), RESOURCES)
        self.assertEqual(sorted(r["object"] for r in ours), sorted(a.address for a in self.resources))
        for registration in ours:
            with self.subTest(object=hex(registration["object"])):
                self.assertEqual(registration["function"], "close_resource")
                self.assertEqual(registration["label"],
                                 f"GC finalizer close_resource of object 0x{registration['object']:x}")
                self.assertIn(registration["retained_bytes"], (32, OBJECT_AND_BUFFER))
        # Each keeps its object and buffer alone, but a buffer a stale word also points to (libgc's hint for
        # its next mmap is the end of its last one, where a buffer may start; the collector scans that word
        # too) is held by both.
        alone = [r for r in ours if r["retained_bytes"] == OBJECT_AND_BUFFER]
        self.assertGreaterEqual(len(alone), RESOURCES - 2)
        (group,) = [g for g in report["functions"] if g["function"] == "close_resource"]
        self.assertEqual(group["registrations"], RESOURCES)
        text = run_heapscope("finalizers", self.core).stdout
        self.assertIn("gc_finalizer", text)
        self.assertIn("close_resource", text)

    def test_nothing_the_registrations_hold_is_leaked(self):
        leaked = {b["address"] for b in heapscope_json("blocks", self.core, "--state", "leaked")["blocks"]}
        for allocation in self.resources + self.buffers:
            self.assertNotIn(allocation.address, leaked)

    def test_roots_show_the_registrations_as_their_own_owner_kind(self):
        roots = heapscope_json("roots", self.core)
        (kind,) = [k for k in roots["kinds"] if k["kind"] == "finalizer"]
        self.assertGreaterEqual(kind["retained_bytes"], (RESOURCES - 2) * OBJECT_AND_BUFFER)

    def test_tops_first_suspect_is_the_values_with_finalizers(self):
        top = heapscope_json("top", self.core)
        first = top["suspects"][0]
        self.assertEqual(first["holder"]["label"], "values with finalizers")
        self.assertEqual(first["holder"]["root_kind"], "finalizer")
        self.assertGreaterEqual(first["retained_bytes"], (RESOURCES - 2) * OBJECT_AND_BUFFER)
        self.assertGreater(first["retained_percent"], 90)
        self.assertEqual(first["retained_types"][0]["count"], first["retained_blocks"] - RESOURCES)
        text = run_heapscope("top", self.core).stdout
        self.assertIn("values with finalizers", text)


class BoehmFinalizersInDebuggers(unittest.TestCase):
    """LLDB's and GDB's `heap finalizers` and `heap top` on the finalizers core say what the CLI says."""

    def test_lldb_and_gdb_list_the_registrations_and_the_suspect(self):
        FINALIZERS.require()
        require_lldb_and_gdb()
        executable, core, _ = capture(FINALIZERS)
        cli_finalizers = heapscope_json("finalizers", core)
        cli_top = heapscope_json("top", core)
        lldb = run_lldb([f"target create {executable} --core {core}", "heap finalizers --json", "heap top --json"])
        gdb = run_gdb(marked("finalizers", "heap finalizers --json") + marked("top", "heap top --json"), executable, core)
        for name, finalizers, top in (
                ("lldb", lldb.json_of("heap finalizers --json"), lldb.json_of("heap top --json")),
                ("gdb", json.loads(between_markers(gdb, "finalizers")), json.loads(between_markers(gdb, "top")))):
            with self.subTest(debugger=name):
                self.assertEqual(finalizers["kinds"], cli_finalizers["kinds"])
                self.assertEqual(finalizers["functions"], cli_finalizers["functions"])
                self.assertEqual(top["suspects"][0]["holder"]["label"], "values with finalizers")
                self.assertEqual(top["suspects"][0]["retained_bytes"], cli_top["suspects"][0]["retained_bytes"])


class BoehmCollectorRules(unittest.TestCase):
    """The collector's own rules (tests/fixtures/boehm_collector_rules.c), against the collection the fixture
    runs after its core is taken: what only an atomic object, a malloc'ed table, an excluded global or an
    anonymous mapping holds is garbage the next collection frees, reported apart from the leaks; what a normal
    object, a registered root or a lost uncollectable object holds is kept, and the lost uncollectable object
    is a leak."""

    FREED = {"atomic", "malloced", "excluded", "anonymous"}
    KEPT = {"normal", "registered", "uncollectable"}

    @classmethod
    def setUpClass(cls):
        cls.core = os.path.join(work_dir(), "boehm_collector_rules.core")
        program = subprocess.Popen([fixture_path("boehm_collector_rules")], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        try:
            cls.objects = collections.defaultdict(set)
            for line in program.stdout:
                if line.strip() == "READY":
                    break
                label, address = line.split()
                cls.objects[label].add(int(address, 16))
            take_core(program.pid, cls.core)
            program.stdin.write("collect\n")
            program.stdin.flush()
            cls.freed = {}
            for line in program.stdout:
                words = line.split()
                if words == ["done"]:
                    break
                if words[:1] != ["freed"]:
                    raise AssertionError(f"boehm_collector_rules printed {line!r}, not what its collection freed")
                cls.freed[words[1]] = int(words[2])
            program.stdin.write("exit\n")
            program.stdin.flush()
            program.wait(timeout=30)
        finally:
            if program.poll() is None:
                program.kill()
                program.wait()
        cls.leaks = heapscope_json("leaks", cls.core)
        cls.leaked = {b["address"] for b in heapscope_json("blocks", cls.core, "--state", "leaked")["blocks"]}

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.core):
            os.remove(cls.core)

    def test_the_collection_frees_what_its_rules_leave_unreached(self):
        per_group = len(self.objects["normal"])
        self.assertEqual(self.freed, {group: per_group if group in self.FREED else 0 for group in self.FREED | self.KEPT})
        for group in self.FREED:
            self.assertEqual(self.objects[group] - self.leaked, set(), f"{group}: the collection frees them")
        for group in self.KEPT:
            self.assertEqual(self.objects[group] & self.leaked, set(), f"{group}: the collection keeps them")

    def test_garbage_is_counted_apart_from_the_leaks(self):
        collectable = self.leaks["collectable"]
        self.assertEqual(collectable["collector"], "Boehm GC")
        garbage = {a for g in collectable["groups"] for a in g["examples"]}
        self.assertGreaterEqual(collectable["blocks"], len(self.FREED) * len(self.objects["normal"]))
        self.assertTrue(garbage & set().union(*(self.objects[g] for g in self.FREED)), garbage)
        # The lost uncollectable holder is a leak, never garbage: the collector never frees it.
        (holder,) = self.objects["holder"]
        self.assertIn(holder, {a for g in self.leaks["groups"] for a in g["examples"]})
        self.assertNotIn(holder, garbage)
        self.assertEqual(self.leaks["totals"]["blocks"] + collectable["blocks"], len(self.leaked))

    def test_the_text_says_what_the_next_collection_frees(self):
        text = run_heapscope("leaks", self.core).stdout
        self.assertIn("Unreachable in Boehm GC's heap: the next collection frees these (garbage, not leaks)", text)
        page = run_heapscope("leaks", self.core, "--html").stdout
        self.assertIn("Unreachable in Boehm GC&#39;s heap, garbage its next collection frees", page.replace("&#x27;", "&#39;"))


class BoehmDamage(unittest.TestCase):
    """Damaged collector structures give warnings, findings and a partial model, never a crash or a hang
    (Debian 12's 8.2.2 layout of GC_arrays: the heap sections' array pointer at +0x169e8, the normal kind's
    free list heads at +0x5b8, the finalizer table at +0x148)."""

    @classmethod
    def setUpClass(cls):
        BOEHM.require()
        _, cls.core, cls.ledger = capture(BOEHM)
        cls.arrays = discovered_addresses(cls.core)["GC_arrays"]

    def test_a_lost_section_array_leaves_the_collectors_heap_unwalked_with_a_warning(self):
        core = damaged_copy(self.core, "boehm-no-sections", {self.arrays + 0x169e8: struct.pack("<Q", 0x4141414141414141)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any(w.startswith("Boehm GC heap_section") for w in summary["warnings"]), summary["warnings"])
        for command in ("leaks", "top", "verify"):
            with self.subTest(command=command):
                result = run_heapscope(command, core)
                self.assertEqual(result.returncode, 0, result.stderr)
        findings = heapscope_json("verify", core)["findings"]
        self.assertEqual([f["kind"] for f in findings], ["heap_section"])

    def test_a_damaged_free_list_is_a_finding_and_the_rest_is_walked(self):
        head_of_48_bytes = self.arrays + 0x5b8 + 3 * 8
        core = damaged_copy(self.core, "boehm-bad-free-list", {head_of_48_bytes: struct.pack("<Q", 0x12345)})
        report = heapscope_json("verify", core)
        (finding,) = report["findings"]
        self.assertEqual(finding["kind"], "free_list_link")
        self.assertEqual(finding["where"], "free list of 48-byte normal objects")
        used = {b["address"] for b in heapscope_json("blocks", core, "--state", "used")["blocks"]}
        self.assertTrue({a.address for a in self.ledger.live} <= used)

    def test_a_damaged_finalizer_table_is_a_warning(self):
        _, core, _ = capture(FINALIZERS)
        arrays = discovered_addresses(core)["GC_arrays"]
        damaged = damaged_copy(core, "boehm-bad-finalizer-table", {arrays + 0x148: struct.pack("<Q", 0x4141414141414141)})
        result = run_heapscope("finalizers", damaged)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = heapscope_json("finalizers", damaged)
        self.assertEqual([r for r in report["registrations"] if r["kind"] == "gc_finalizer"], [])
        self.assertTrue(any("Boehm GC's finalizer table" in w for w in report["warnings"]), report["warnings"])


if __name__ == "__main__":
    unittest.main()
