"""gperftools tcmalloc (libtcmalloc_minimal.so.4 preloaded): the tcmalloc plug-in
(engine/runtime/tcmalloc) walks its heap, so every command works on such a process.

tcmalloc_fixture (tests/fixtures/tcmalloc_fixture.c) allocates blocks of many sizes in two threads, frees
some and leaks some, and records them in its ledger with tcmalloc's own count of allocated bytes
(MallocExtension_GetNumericProperty("generic.current_allocated_bytes")). The same program is captured with
and without the preload, so glibc's walk of it is the reference for leaks.

How the in-use total reconciles with generic.current_allocated_bytes is in docs/architecture.md
("Reconciling with tcmalloc's own figures").
"""

import collections
import json
import os
import shutil
import struct
import unittest

from heapscope_e2e import (capture_program, fixture_path, heapscope_json, parse_ledger, run_heapscope,
                           work_dir)
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import ParkedProgram
from test_gdb import between_markers, marked, run_gdb

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
FIXTURE = "tcmalloc_fixture"
ALLOCATED_BYTES = "generic.current_allocated_bytes"
LEAK_TAGS = {"leaked-head": "direct", "leaked-node": "indirect", "leaked": "direct"}
# The structures the plug-in locates (summary's "Found by").
STRUCTURES = ("pageheap_lock_", "sizemap_", "central_cache_", "pageheap_", "thread_heaps_")

_captures = {}


def capture(preload):
    """(executable, core, ledger) of the fixture run with tcmalloc preloaded, or with glibc's malloc."""
    key = FIXTURE + ("-tcmalloc" if preload else "-glibc")
    if key not in _captures:
        executable = fixture_path(FIXTURE)
        core, ledger_file = capture_program(key, executable, env={"LD_PRELOAD": TCMALLOC} if preload else None)
        _captures[key] = (executable, core, parse_ledger(ledger_file))
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


def require_tcmalloc():
    if not os.path.exists(TCMALLOC):
        raise unittest.SkipTest(f"{TCMALLOC} is not installed (scripts/install-deps)")


class TcmallocWalk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tcmalloc()
        cls.executable, cls.core, cls.ledger = capture(preload=True)
        cls.summary = heapscope_json("summary", cls.core)
        cls.blocks = heapscope_json("blocks", cls.core, "--state", "all")["blocks"]
        cls.used = heapscope_json("blocks", cls.core, "--state", "used")["blocks"]

    def test_the_ledger_has_tcmalloc_figures(self):
        self.assertIn(ALLOCATED_BYTES, self.ledger.properties)
        self.assertEqual(len(self.ledger.threads), 1)

    def test_summary_names_tcmalloc_and_how_it_found_it(self):
        heap = self.summary["heap"]
        self.assertEqual(heap["allocator"], "tcmalloc")
        self.assertEqual(heap["version"], "2.10")
        self.assertTrue(heap["complete"])
        found = {d["structure"]: d["method"] for d in heap["discovery"]}
        for structure in STRUCTURES:
            self.assertIn(structure, found)
        # Debian's build is known: its hidden statics are placed by its build-id, then checked.
        for structure in ("sizemap_", "central_cache_", "pageheap_"):
            self.assertTrue(found[structure].startswith("known-build"), found[structure])
        self.assertNotIn("mallinfo2", heap)
        self.assertEqual(self.summary["warnings"], [])

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

    def test_in_use_bytes_are_tcmallocs_allocated_bytes(self):
        in_use = sum(b["chunk_size"] for b in self.used)
        self.assertEqual(in_use, self.ledger.properties[ALLOCATED_BYTES])
        totals = self.summary["heap"]["totals"]
        self.assertEqual(totals["in_use"]["bytes"], in_use)
        self.assertEqual(totals["mmapped"]["blocks"], 0)

    def test_blocks_tile_the_page_heap(self):
        (arena,) = self.summary["heap"]["arenas"]
        states = arena["states"]
        self.assertEqual(sum(s["bytes"] for s in states.values()) + arena["overhead_bytes"], arena["system_bytes"])
        heap_bytes = sum(h["end"] - h["start"] for h in arena["heaps"])
        self.assertEqual(heap_bytes, arena["system_bytes"])
        ordered = sorted(self.blocks, key=lambda b: b["chunk"])
        for before, after in zip(ordered, ordered[1:]):
            self.assertLessEqual(before["chunk"] + before["chunk_size"], after["chunk"])

    def test_caches_and_free_lists_are_told_apart(self):
        states = collections.Counter(b["state"] for b in self.blocks)
        # Thread and transfer caches hold freed small objects; spans' free lists the rest of the bulk
        # class; the page heap the freed large spans.
        self.assertGreater(states["tcache"], 0)
        self.assertGreater(states["free"], 0)
        self.assertEqual(states["fastbin"] + states["top"] + states["mmapped"], 0)
        by_address = {b["address"]: b for b in self.blocks}
        freed_small = [a for a in self.ledger.freed_and_not_live() if a.size <= 256 * 1024]
        cached = [a for a in freed_small if by_address.get(a.address, {}).get("state") == "tcache"]
        self.assertGreater(len(cached), 0)

    def test_leaks_are_the_ones_glibc_finds(self):
        ours, others = leak_signature(self.core, self.ledger)
        expected = sorted((a.how, a.size, LEAK_TAGS[a.how]) for a in leaked_ledger_blocks(self.ledger))
        self.assertEqual(ours, expected)
        _, glibc_core, glibc_ledger = capture(preload=False)
        glibc_ours, glibc_others = leak_signature(glibc_core, glibc_ledger)
        self.assertEqual(glibc_ours, expected)
        # tcmalloc 2.10 leaks one object of its own: the default MallocExtension it creates at start-up and
        # replaces with its implementation (typed by its vtable).
        self.assertEqual([t for t in others if t != "MallocExtension"], glibc_others)
        self.assertEqual(others.count("MallocExtension"), 1)

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

    def test_verify_says_tcmalloc_has_no_checks(self):
        result = run_heapscope("verify", self.core)
        self.assertEqual(result.returncode, 1)
        self.assertIn("tcmalloc has no checks of its own structures", result.stderr)

    def test_fragmentation_has_no_trimming_figures(self):
        report = heapscope_json("fragmentation", self.core)
        self.assertGreater(report["pages"], 0)
        text = run_heapscope("fragmentation", self.core).stdout
        self.assertIn("not available for tcmalloc", text)


class TcmallocDamage(unittest.TestCase):
    """Damaged tcmalloc structures give a clear error or a partial model with warnings (gperftools 2.10's
    layout: SizeMap is 4232 bytes; a CentralFreeList is 1216 bytes with size_class_ at +8)."""

    @classmethod
    def setUpClass(cls):
        require_tcmalloc()
        _, cls.core, cls.ledger = capture(preload=True)
        found = {d["structure"]: d["address"] for d in heapscope_json("summary", cls.core)["heap"]["discovery"]}
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


class TcmallocInDebuggers(unittest.TestCase):
    def test_lldb_and_gdb_find_the_leaks(self):
        require_tcmalloc()
        require_lldb_and_gdb()
        executable, core, ledger = capture(preload=True)
        cli = heapscope_json("leaks", core)
        self.assertGreater(cli["totals"]["blocks"], 0)
        lldb = run_lldb([f"target create {executable} --core {core}", "heap leaks --json"])
        self.assertEqual(lldb.json_of("heap leaks --json")["totals"], cli["totals"])
        gdb = run_gdb(marked("leaks", "heap leaks --json"), executable, core)
        self.assertEqual(json.loads(between_markers(gdb, "leaks"))["totals"], cli["totals"])


class TcmallocAttach(unittest.TestCase):
    def test_attach_finds_the_ledgers_leaks(self):
        require_tcmalloc()
        ledger_file = os.path.join(work_dir(), "tcmalloc_fixture-attach.ledger")
        command = ["env", f"LD_PRELOAD={TCMALLOC}", f"HEAPSCOPE_LEDGER={ledger_file}", fixture_path(FIXTURE)]
        with ParkedProgram(*command) as program:
            summary = heapscope_json("attach", program.pid, "summary")
            leaked = {b["address"]: b
                      for b in heapscope_json("attach", program.pid, "blocks", "--state", "leaked")["blocks"]}
            ledger = parse_ledger(ledger_file)
            used = {b["address"] for b in heapscope_json("attach", program.pid, "blocks", "--state", "used")["blocks"]}
        self.assertEqual(ledger.pid, program.pid)
        self.assertEqual(summary["heap"]["allocator"], "tcmalloc")
        for allocation in leaked_ledger_blocks(ledger):
            self.assertIn(allocation.address, leaked)
            self.assertEqual(leaked[allocation.address]["verdict"], LEAK_TAGS[allocation.how])
        self.assertTrue({a.address for a in ledger.live} <= used)


if __name__ == "__main__":
    unittest.main()
