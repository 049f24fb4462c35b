"""What every walk of an allocator other than glibc's must hold, on allocator_fixture
(tests/fixtures/allocator_fixture.c): shared by test_tcmalloc.py and test_jemalloc.py, which describe their
allocator (`Allocator`) and mix these checks into their TestCases.

The fixture allocates blocks of many sizes in two threads, frees some and leaks some, and records them in
its ledger with the allocator's own count of allocated bytes. The same program is captured with the
allocator and with glibc's malloc, so glibc's walk of it is the reference for leaks.
"""

import collections
import dataclasses
import json
import os
import re
import shutil
import struct
import unittest

from heapscope_e2e import (capture_program, fixture_path, heapscope_json, parse_ledger, run_heapscope,
                           work_dir)
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import ParkedProgram
from test_gdb import between_markers, marked, run_gdb

FIXTURE = "allocator_fixture"
LEAK_TAGS = {"leaked-head": "direct", "leaked-node": "indirect", "leaked": "direct"}
# The warning that glibc's arenas hold memory under another allocator (runtime/allocator.h, also_holds_memory).
GLIBC_ALSO = "glibc's malloc also holds memory"


@dataclasses.dataclass(frozen=True)
class Allocator:
    name: str               # the summary's heap.allocator
    version: str            # its heap.version
    preload: str            # the library to LD_PRELOAD; empty when the fixture links the allocator in
    fixture: str            # the fixture program
    allocated_figure: str   # the ledger property: the allocator's own count of allocated bytes
    structures: tuple       # what summary's "Found by" must list
    own_leaks: tuple = ()   # types of blocks the allocator itself leaks (by their vtables)
    mallinfo2: bool = True  # the fixture's ledger has glibc's mallinfo2 line (not when built with musl-gcc)

    @property
    def key(self):
        """A file name for its captures: no spaces (a debugger's command line takes the core's path)."""
        return re.sub(r"[^\w.-]+", "_", f"{self.fixture}-{self.name}") + ("-preloaded" if self.preload else "")

    def environment(self):
        return {"LD_PRELOAD": self.preload} if self.preload else {}

    def require(self):
        if self.preload and not os.path.exists(self.preload):
            raise unittest.SkipTest(f"{self.preload} is not installed (scripts/install-deps)")
        if not os.access(fixture_path(self.fixture), os.X_OK):
            raise unittest.SkipTest(f"fixture {self.fixture} is not built (needs scripts/install-deps' packages)")


_captures = {}


def capture(allocator):
    """(executable, core, ledger) of the fixture run under `allocator`, or under glibc's malloc (None)."""
    key = allocator.key if allocator else FIXTURE + "-glibc"
    if key not in _captures:
        executable = fixture_path(allocator.fixture if allocator else FIXTURE)
        core, ledger_file = capture_program(key, executable, env=allocator.environment() if allocator else None)
        _captures[key] = (executable, core, parse_ledger(ledger_file, allocator.mallinfo2 if allocator else True))
    return _captures[key]


def leaked_ledger_blocks(ledger):
    return [a for a in ledger.live if a.how in LEAK_TAGS]


def leak_signature(core, ledger):
    """What `blocks --state leaked` says of the ledger's blocks: sorted (tag, requested size, verdict), and
    the types of the leaked blocks the ledger does not list (the libraries' own)."""
    leaked = {b["address"]: b for b in heapscope_json("blocks", core, "--state", "leaked")["blocks"]}
    tags = {a.address: a for a in ledger.live}
    ours = sorted((tags[address].how, tags[address].size, block["verdict"])
                  for address, block in leaked.items() if address in tags)
    others = sorted(block.get("type", "") for address, block in leaked.items() if address not in tags)
    return ours, others


def core_file_offset(core, address):
    """Where the byte at `address` of the process lies in the ELF core file (its PT_LOAD segments)."""
    with open(core, "rb") as f:
        header = f.read(64)
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
        if p_type == 1 and p_vaddr <= address < p_vaddr + p_filesz:
            return p_offset + address - p_vaddr
    raise AssertionError(f"0x{address:x} is not in the core's memory")


def read_core(core, address, size):
    with open(core, "rb") as f:
        f.seek(core_file_offset(core, address))
        return f.read(size)


def discovered_addresses(core):
    """Where `summary` says the walk found each allocator structure: {structure: address}."""
    return {d["structure"]: d["address"] for d in heapscope_json("summary", core)["heap"]["discovery"]}


def damaged_copy(core, name, writes):
    """A copy of `core` in the work directory with `writes` ({address: bytes}) applied to its memory."""
    copy = os.path.join(work_dir(), name + ".core")
    shutil.copyfile(core, copy)
    unittest.addModuleCleanup(os.remove, copy)
    with open(copy, "r+b") as f:
        for address, data in writes.items():
            f.seek(core_file_offset(core, address))
            f.write(data)
    return copy


class WalkChecks:
    """Mixed into a TestCase whose ALLOCATOR describes the allocator under test."""

    ALLOCATOR = None

    @classmethod
    def setUpClass(cls):
        cls.ALLOCATOR.require()
        cls.executable, cls.core, cls.ledger = capture(cls.ALLOCATOR)
        cls.summary = heapscope_json("summary", cls.core)
        cls.blocks = heapscope_json("blocks", cls.core, "--state", "all")["blocks"]
        cls.used = heapscope_json("blocks", cls.core, "--state", "used")["blocks"]

    def test_the_ledger_has_the_allocators_figure(self):
        self.assertIn(self.ALLOCATOR.allocated_figure, self.ledger.properties)
        self.assertEqual(len(self.ledger.threads), 1)

    def test_summary_names_the_allocator_and_how_it_found_it(self):
        heap = self.summary["heap"]
        self.assertEqual(heap["allocator"], self.ALLOCATOR.name)
        self.assertEqual(heap["version"], self.ALLOCATOR.version)
        self.assertTrue(heap["complete"])
        found = {d["structure"] for d in heap["discovery"]}
        self.assertTrue(set(self.ALLOCATOR.structures) <= found, found)
        self.assertNotIn("mallinfo2", heap)
        self.assertEqual([w for w in self.summary["warnings"] if not w.startswith(GLIBC_ALSO)], [])

    def test_glibcs_arenas_are_reported_beside_the_allocator(self):
        # The fixture's three blocks from glibc's own malloc keep memory in glibc's arenas.
        also = [w for w in self.summary["warnings"] if w.startswith(GLIBC_ALSO)]
        self.assertEqual(len(also), 1, self.summary["warnings"])
        self.assertRegex(also[0], r"^glibc's malloc also holds memory: [1-9]\d* bytes in 1 arena,")
        _, glibc_core, _ = capture(None)
        self.assertFalse(any(w.startswith(GLIBC_ALSO) for w in heapscope_json("summary", glibc_core)["warnings"]))

    def test_summary_speaks_the_allocators_terms(self):
        labels = self.summary["heap"]["state_labels"]
        self.assertNotIn("fastbin", labels)
        self.assertNotIn("top", labels)
        text = run_heapscope("summary", self.core).stdout
        self.assertNotIn("fastbins", text)
        self.assertNotIn("top chunks", text)
        self.assertIn(labels["tcache"], text)

    def test_the_allocators_own_figures_are_the_walks(self):
        figures = self.summary["heap"]["figures"]
        self.assertGreater(len(figures), 0)
        for figure in figures:
            with self.subTest(figure=figure["name"]):
                self.assertIsNotNone(figure["own"])
                self.assertIsNotNone(figure["walk"])
                self.assertEqual(figure["own"], figure["walk"], figure["meaning"])
        self.assertNotIn("DIFFERENT", run_heapscope("summary", self.core).stdout)

    def test_every_live_block_is_a_used_block_with_room(self):
        used = {b["address"]: b for b in self.used}
        for allocation in self.ledger.live:
            with self.subTest(address=hex(allocation.address), size=allocation.size):
                block = used.get(allocation.address)
                self.assertIsNotNone(block, "no used block at the address malloc returned")
                self.assertEqual(block["state"], "in_use")
                self.assertGreaterEqual(block["usable_size"], allocation.size)
                self.assertEqual(block["chunk"], block["address"])  # no header

    def test_freed_blocks_are_not_used(self):
        used = {b["address"] for b in self.used}
        freed = self.ledger.freed_and_not_live()
        self.assertGreater(len(freed), 1000)
        for allocation in freed:
            self.assertNotIn(allocation.address, used)

    def test_blocks_tile_the_arenas(self):
        for arena in self.summary["heap"]["arenas"]:
            states = arena["states"]
            self.assertEqual(sum(s["bytes"] for s in states.values()) + arena["overhead_bytes"],
                             arena["system_bytes"])
            self.assertEqual(sum(h["end"] - h["start"] for h in arena["heaps"]), arena["system_bytes"])
        ordered = sorted(self.blocks, key=lambda b: b["chunk"])
        for before, after in zip(ordered, ordered[1:]):
            self.assertLessEqual(before["chunk"] + before["chunk_size"], after["chunk"])

    def test_caches_and_free_lists_are_told_apart(self):
        states = collections.Counter(b["state"] for b in self.blocks)
        self.assertGreater(states["tcache"], 0)
        self.assertGreater(states["free"], 0)
        self.assertEqual(states["fastbin"] + states["top"] + states["mmapped"], 0)
        by_address = {b["address"]: b for b in self.blocks}
        cached = [a for a in self.ledger.freed_and_not_live()
                  if by_address.get(a.address, {}).get("state") == "tcache"]
        self.assertGreater(len(cached), 0)

    def test_leaks_are_the_ones_glibc_finds(self):
        ours, others = leak_signature(self.core, self.ledger)
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in leaked_ledger_blocks(self.ledger))
        self.assertEqual(ours, expected)
        _, glibc_core, glibc_ledger = capture(None)
        glibc_ours, glibc_others = leak_signature(glibc_core, glibc_ledger)
        self.assertEqual(glibc_ours, expected)
        own = [t for t in others if t in self.ALLOCATOR.own_leaks]
        self.assertEqual([t for t in others if t not in self.ALLOCATOR.own_leaks], glibc_others)
        self.assertEqual(sorted(own), sorted(self.ALLOCATOR.own_leaks))

    def test_every_command_runs(self):
        for command in (["leaks"], ["histogram"], ["top"], ["roots"], ["threads"], ["chains"], ["finalizers"],
                        ["fragmentation"], ["report"]):
            with self.subTest(command=command[0]):
                result = run_heapscope(command[0], self.core, *command[1:])
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertNotIn("unsupported allocator", result.stdout + result.stderr)
        leaked = leaked_ledger_blocks(self.ledger)[0].address
        for command in ("retainers", "refs", "describe"):
            with self.subTest(command=command):
                result = run_heapscope(command, self.core, hex(leaked))
                self.assertEqual(result.returncode, 0, result.stderr)

    def test_the_html_report_shows_the_allocators_figures_and_size_classes(self):
        page_file = os.path.join(work_dir(), self.ALLOCATOR.key + "-report.html")
        result = run_heapscope("report", self.core, "-o", page_file)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(page_file, encoding="utf-8") as f:
            page = f.read()
        os.remove(page_file)
        for table in ("summary.figures", "fragmentation.size_classes", "fragmentation.free_pages"):
            self.assertIn(f'data-table="{table}"', page)
        self.assertNotIn("fastbins bytes", page)

    def test_a_core_diffed_with_itself_keeps_every_block(self):
        result = heapscope_json("diff", self.core, self.core)
        self.assertTrue(result["addresses_compared"])
        addresses = result["addresses"]
        self.assertEqual((addresses["new_blocks"], addresses["gone_blocks"]), (0, 0))
        self.assertEqual(addresses["kept_blocks"], len(self.used))

    def test_fragmentation_has_no_trimming_figures(self):
        report = heapscope_json("fragmentation", self.core)
        self.assertGreater(report["pages"], 0)
        text = run_heapscope("fragmentation", self.core).stdout
        self.assertIn(f"not available for {self.ALLOCATOR.name}", text)

    def test_fragmentation_speaks_the_allocators_terms(self):
        # The arena table's columns are the allocator's block states, as summary names them: no glibc bins,
        # fastbins or top chunks for an allocator that has none.
        text = run_heapscope("fragmentation", self.core).stdout
        # The arena table's heading (its first column is the allocator's word for an arena: mimalloc's thread).
        header = next(line for line in text.splitlines() if " system " in line and " overhead " in line)
        labels = heapscope_json("summary", self.core)["heap"]["state_labels"]
        for glibc_only in ("bins", "fastbins", "top", "tcache"):
            self.assertNotIn(f" {glibc_only} ", f" {header} ", header)
        for label in labels.values():
            self.assertIn(label, header)
        self.assertNotIn("top chunks", text)

    def test_fragmentation_shows_slab_utilisation_and_free_pages(self):
        report = heapscope_json("fragmentation", self.core)
        classes = report["size_classes"]
        self.assertGreater(len(classes), 10)
        states = collections.Counter(b["state"] for b in self.blocks)
        by_size = collections.Counter((b["chunk_size"], b["state"]) for b in self.blocks)
        for c in classes:
            with self.subTest(size=c["object_bytes"]):
                objects = c["in_use"] + c["cached"] + c["free"]
                self.assertGreater(objects, 0)
                self.assertLessEqual(objects * c["object_bytes"], c["slab_bytes"])
                # Every cached and free object of the class is a block of that size and state.
                self.assertLessEqual(c["cached"], by_size[(c["object_bytes"], "tcache")])
                self.assertLessEqual(c["free"], by_size[(c["object_bytes"], "free")])
        self.assertLessEqual(sum(c["cached"] for c in classes), states["tcache"])
        # The bulk class (40-byte requests) was mostly freed: its slabs are far from full.
        bulk = min((c for c in classes if c["object_bytes"] >= 40), key=lambda c: c["object_bytes"])
        self.assertGreater(bulk["free"] + bulk["cached"], bulk["in_use"])
        free_bytes = sum(b["chunk_size"] for b in self.blocks if b["state"] == "free")
        self.assertGreater(len(report["free_pages"]), 0)
        self.assertLessEqual(sum(f["bytes"] for f in report["free_pages"] if f["kind"] != "retained"), free_bytes)
        text = run_heapscope("fragmentation", self.core).stdout
        self.assertRegex(text, r"\n(Slab|Page) utilisation per size class")  # mimalloc's slabs are pages
        self.assertIn("Free pages kept for reuse", text)


class DebuggerChecks:
    """The debuggers' `heap leaks` on the allocator's core says what the CLI says."""

    ALLOCATOR = None

    def test_lldb_and_gdb_find_the_leaks(self):
        self.ALLOCATOR.require()
        require_lldb_and_gdb()
        executable, core, _ = capture(self.ALLOCATOR)
        # A collector's garbage (what its next collection frees) is counted apart from the leaks.
        def counted(report):
            garbage = report["collectable"]
            return report["totals"], garbage and {k: garbage[k] for k in ("blocks", "bytes", "whole_page_bytes")}
        cli = heapscope_json("leaks", core)
        self.assertGreater(cli["totals"]["blocks"] + (cli["collectable"] or {"blocks": 0})["blocks"], 0)
        lldb = run_lldb([f"target create {executable} --core {core}", "heap leaks --json"])
        self.assertEqual(counted(lldb.json_of("heap leaks --json")), counted(cli))
        gdb = run_gdb(marked("leaks", "heap leaks --json"), executable, core)
        self.assertEqual(counted(json.loads(between_markers(gdb, "leaks"))), counted(cli))


class AttachChecks:
    """`heapscope attach` on the running fixture finds its ledger's blocks and leaks."""

    ALLOCATOR = None

    def test_attach_finds_the_ledgers_leaks(self):
        self.ALLOCATOR.require()
        ledger_file = os.path.join(work_dir(), self.ALLOCATOR.key + "-attach.ledger")
        environment = [f"{name}={value}" for name, value in self.ALLOCATOR.environment().items()]
        command = ["env", *environment, f"HEAPSCOPE_LEDGER={ledger_file}", fixture_path(self.ALLOCATOR.fixture)]
        with ParkedProgram(*command) as program:
            summary = heapscope_json("attach", program.pid, "summary")
            leaked = {b["address"]: b
                      for b in heapscope_json("attach", program.pid, "blocks", "--state", "leaked")["blocks"]}
            ledger = parse_ledger(ledger_file, self.ALLOCATOR.mallinfo2)
            used = {b["address"] for b in heapscope_json("attach", program.pid, "blocks", "--state", "used")["blocks"]}
        self.assertEqual(ledger.pid, program.pid)
        self.assertEqual(summary["heap"]["allocator"], self.ALLOCATOR.name)
        for allocation in leaked_ledger_blocks(ledger):
            self.assertIn(allocation.address, leaked)
            self.assertEqual(leaked[allocation.address]["verdict"], LEAK_TAGS[allocation.how])
        self.assertTrue({a.address for a in ledger.live} <= used)
