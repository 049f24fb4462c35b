"""jemalloc 5.3 (Debian's libjemalloc.so.2 preloaded, and libjemalloc-dev's libjemalloc.a linked into the
fixture): the jemalloc plug-in (engine/runtime/jemalloc) walks its heap, so every command works on such a
process.

The checks every allocator's walk must pass are in allocator_walk.py; here, what is jemalloc's own: its count
of allocated bytes (mallctl "stats.allocated" after an epoch bump) against the walk, how its globals are
found (the stripped shared library's by its build-id, the static copy's by symbol), damage, and valgrind's
verdict on the same program. How the totals reconcile is in docs/architecture.md ("Reconciling with
jemalloc's own figures").
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

from allocator_walk import (LEAK_TAGS, Allocator, AttachChecks, DebuggerChecks, WalkChecks, capture,
                            damaged_copy, discovered_addresses, read_core)
from heapscope_e2e import fixture_path, heapscope_json, parse_ledger, run_heapscope

STRUCTURES = ("sz_index2size_tab", "bin_infos", "arenas", "arena_emap_global")
SHARED = Allocator(
    name="jemalloc", version="5.3.0", preload="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    fixture="allocator_fixture", allocated_figure="stats.allocated", structures=STRUCTURES)
STATIC = Allocator(
    name="jemalloc", version="5.3.0", preload="", fixture="allocator_fixture_jemalloc_static",
    allocated_figure="stats.allocated", structures=STRUCTURES)
# A thread cache's stacks are one allocation of at most 64 KiB (a cache bin holds at most 8192 pointers).
MAX_CACHE_STACK_BYTES = 64 * 1024
RADIX_TREE_ROOT = 120  # rtree_t: base pointer and init mutex before the root's 2^18 node pointers


class JemallocChecks(WalkChecks):
    """jemalloc's own figures against the walk, for both builds."""

    METHOD = ""  # how the globals are found

    def test_globals_are_found_as_the_build_allows(self):
        found = {d["structure"]: d["method"] for d in self.summary["heap"]["discovery"]}
        for structure in STRUCTURES:
            self.assertEqual(found[structure], self.METHOD, structure)

    def test_allocated_bytes_reconcile_with_stats_allocated(self):
        allocated = self.ledger.properties["stats.allocated"]
        figure = {f["name"]: f for f in self.summary["heap"]["figures"]}["stats.allocated"]
        self.assertEqual((figure["own"], figure["walk"]), (allocated, allocated))
        # The walk's count: the blocks handed out (in use and cached) and each thread cache's stacks, which
        # jemalloc allocates from its arena 0 and the walk keeps as metadata, not a block.
        totals = self.summary["heap"]["totals"]
        stacks = allocated - totals["in_use"]["bytes"] - totals["tcache"]["bytes"]
        threads = len(self.summary["threads"])
        self.assertGreater(stacks, 0)
        self.assertLessEqual(stacks, threads * MAX_CACHE_STACK_BYTES)

    def test_verify_finds_a_sound_heap_sound(self):
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])
        checked = report["checked"]
        self.assertEqual(checked["arenas"], len(self.summary["heap"]["arenas"]))
        self.assertEqual(checked["tcaches"], len(self.summary["threads"]))  # one thread cache per thread
        self.assertEqual(checked["tcache_entries"], sum(1 for b in self.blocks if b["state"] == "tcache"))
        # In jemalloc's words: it has no bins of free chunks, no fastbins.
        text = run_heapscope("verify", self.core).stdout
        self.assertIn("Checked: jemalloc: ", text)
        for glibc_word in ("fastbin", "chunks", "in bins"):
            self.assertNotIn(glibc_word, text)

    def test_large_blocks_lie_inside_their_extents(self):
        # Cache-oblivious large allocations start at a random cache line of their extent's first page.
        large = [b for b in self.used if b["chunk_size"] > 14 * 1024]
        self.assertGreater(len(large), 0)
        self.assertTrue(any(b["address"] % 4096 for b in large))
        self.assertTrue(all(b["address"] % 64 == 0 for b in large))


class JemallocSharedWalk(JemallocChecks, unittest.TestCase):
    ALLOCATOR = SHARED
    METHOD = "known-build, checked"  # Debian's stripped library: placed by its build-id


class JemallocStaticWalk(JemallocChecks, unittest.TestCase):
    ALLOCATOR = STATIC
    METHOD = "symbol, checked"  # the static copy keeps its symbols


class JemallocStaticWithoutTheProgram(unittest.TestCase):
    """Without the program's file, nothing says its static jemalloc serves malloc: libc's heap is walked, nearly
    empty. `leaks` must not call that a clean heap: partial, with a warning first that points at --exe."""

    def test_leaks_is_partial_and_says_why(self):
        STATIC.require()
        _, core, _ = capture(STATIC)
        report = heapscope_json("leaks", core, "--exe", "/nonexistent/program")
        self.assertTrue(report["partial"])
        self.assertIn("links its own malloc", report["warnings"][0])
        self.assertIn("--exe", report["warnings"][0])
        with_program = heapscope_json("leaks", core)
        self.assertFalse(with_program["partial"])
        self.assertFalse(any("links its own malloc" in w for w in with_program["warnings"]))


class JemallocDamage(unittest.TestCase):
    """Damaged jemalloc structures give a clear error or a partial model with warnings."""

    @classmethod
    def setUpClass(cls):
        SHARED.require()
        _, cls.core, cls.ledger = capture(SHARED)
        found = discovered_addresses(cls.core)
        cls.arenas, cls.emap = found["arenas"], found["arena_emap_global"]

    def test_a_lost_extent_map_is_an_error_naming_jemalloc(self):
        # Every node pointer of the radix tree's root gone: neither the known place nor a scan finds it.
        core = damaged_copy(self.core, "jemalloc-no-extent-map", {self.emap + RADIX_TREE_ROOT: bytes(8 << 18)})
        result = run_heapscope("leaks", core)
        self.assertEqual(result.returncode, 1)
        self.assertIn("and it is jemalloc, but cannot find jemalloc's extent map", result.stderr)
        self.assertNotIn("unsupported allocator", result.stderr)

    def test_a_damaged_arena_gives_a_partial_walk(self):
        second, = struct.unpack("<Q", read_core(self.core, self.arenas + 8, 8))
        self.assertNotEqual(second, 0, "the fixture's second thread uses arena 1")
        core = damaged_copy(self.core, "jemalloc-bad-arena", {self.arenas + 8: struct.pack("<Q", 0x1000)})
        summary = heapscope_json("summary", core)
        self.assertFalse(summary["heap"]["complete"])
        self.assertTrue(any("arena 1 (0x1000) does not look like an arena" in w for w in summary["warnings"]),
                        summary["warnings"])
        # Its thread's cached blocks now show as in use, but every block is still there.
        used = {b["address"] for b in heapscope_json("blocks", core, "--state", "used")["blocks"]}
        self.assertTrue({a.address for a in self.ledger.live} <= used)
        # verify names the damaged slot.
        result = run_heapscope("verify", core, "--json")
        findings = json.loads(result.stdout)["findings"]
        self.assertIn(("arena", 0x1000, "je_arenas[1]"), [(f["kind"], f["chunk"], f["where"]) for f in findings])


class JemallocInDebuggers(DebuggerChecks, unittest.TestCase):
    ALLOCATOR = SHARED


class JemallocAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = SHARED


class JemallocStaticAttach(AttachChecks, unittest.TestCase):
    ALLOCATOR = STATIC


VALGRIND = shutil.which("valgrind")


@unittest.skipIf(VALGRIND is None, "valgrind is not installed (scripts/install-deps installs it)")
class ValgrindAgrees(unittest.TestCase):
    """valgrind replaces whichever malloc a program has, so its leak check is the program's verdict: the
    fixture in exit mode (it exits where it would park, freeing nothing) under memcheck loses exactly the
    blocks heapscope calls leaked on the jemalloc core, direct ones as definitely lost, indirect ones as
    indirectly lost, at their requested sizes."""

    def test_valgrind_loses_what_heapscope_calls_leaked(self):
        SHARED.require()
        with tempfile.TemporaryDirectory(prefix="heapscope-valgrind-") as scratch:
            xml_file, ledger_file = os.path.join(scratch, "lost.xml"), os.path.join(scratch, "ledger")
            result = subprocess.run(
                [VALGRIND, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                 "--xml=yes", f"--xml-file={xml_file}", fixture_path(SHARED.fixture), "--exit"],
                env={**os.environ, "HEAPSCOPE_LEDGER": ledger_file}, capture_output=True, text=True, timeout=600)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            lost = {"Leak_DefinitelyLost": [0, 0], "Leak_IndirectlyLost": [0, 0]}
            for error in ElementTree.parse(xml_file).getroot().iter("error"):
                kind = error.findtext("kind")
                # Under valgrind the heap lies low (around 0x5000000), where plain numbers can land: in about
                # one run in a hundred on a loaded machine, ld.so's `relocate_time` (a cycle count in its .bss)
                # falls inside a 400 KiB leak, which memcheck then calls possibly lost (an interior pointer;
                # seen with its who_points_at). A designed leak (allocated in leak_blocks) that memcheck only
                # "possibly" loses is lost: nothing but such a number points into it.
                if kind == "Leak_PossiblyLost" and any(f.findtext("fn") == "leak_blocks" for f in error.iter("frame")):
                    kind = "Leak_DefinitelyLost"
                if kind in lost:
                    what = error.find("xwhat")
                    lost[kind][0] += int(what.findtext("leakedblocks"))
                    lost[kind][1] += int(what.findtext("leakedbytes"))
            valgrind_ledger = parse_ledger(ledger_file)
        _, core, ledger = capture(SHARED)
        sizes = {a.address: a.size for a in ledger.live}
        heapscope = {"direct": [0, 0], "indirect": [0, 0]}
        for block in heapscope_json("blocks", core, "--state", "leaked")["blocks"]:
            self.assertIn(block["address"], sizes, "a leaked block the ledger does not list")
            heapscope[block["verdict"]][0] += 1
            heapscope[block["verdict"]][1] += sizes[block["address"]]
        # valgrind's definitely lost record counts the bytes it indirectly loses too.
        direct_and_indirect = [heapscope["direct"][0], heapscope["direct"][1] + heapscope["indirect"][1]]
        self.assertEqual(lost["Leak_DefinitelyLost"], direct_and_indirect)
        self.assertEqual(lost["Leak_IndirectlyLost"], heapscope["indirect"])
        # The ledger designed as many leaks under valgrind as the core's walk found.
        self.assertEqual(sum(1 for a in valgrind_ledger.live if a.how in LEAK_TAGS),
                         heapscope["direct"][0] + heapscope["indirect"][0])


if __name__ == "__main__":
    unittest.main()
