"""End-to-end tests of `heap verify` and of the other commands on heaps a program damaged on purpose.

tests/fixtures/corrupt_heap.c damages its heap in one of three ways (its argument) and records in its ledger
the block it damaged and the finding that should name it:
- overflow: 8 bytes past a block, over the next chunk's size field → chunk_header at that chunk, with the
  overflowed block as the last good chunk;
- top-overflow: 8 bytes past the block carved last from the top chunk, over top's size → chunk_header at
  the top chunk (a size far past the heap's end must not size the walk's buffers);
- double-free: the same block freed twice into the tcache (its key cleared in between) → double_free;
- uaf-link: a plain pointer written into a freed block's safe-linked tcache link → tcache_link.
For each: `verify --json` names the ledger's chunk with that kind, with or without libc's debug file;
`leaks` still exits 0 and carries a warning; every command finishes under a time bound. Clean fixtures'
cores (one arena, and several arenas with heap_info heaps) verify with no findings. One core goes through
LLDB (`heap verify` in the plugin) for the same finding. On a live damaged process, `heapscope attach PID
verify` gives the findings a core taken right after gives, and leaves every byte of the heap as it was.
"""

import json
import os
import re
import unittest

from heapscope_e2e import (CHUNK_HEADER, Capture, capture_fixture, capture_program, debug_flags, fixture_path,
                           parse_ledger, run_heapscope, work_dir)
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import ParkedProgram, take_core

# A verify or leaks run on these small cores takes about a second; a hang or runaway walk hits this.
COMMAND_TIMEOUT_SECONDS = 60
FIXTURE = "corrupt_heap"

_captures = {}


def capture_mode(mode):
    if mode not in _captures:
        executable = fixture_path(FIXTURE)
        core, ledger_file = capture_program(f"{FIXTURE}-{mode}", executable, args=(mode,))
        _captures[mode] = Capture(FIXTURE, executable, core, parse_ledger(ledger_file))
    return _captures[mode]


def verify_json(core, *flags):
    result = run_heapscope("verify", core, *flags, "--json", timeout=COMMAND_TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise AssertionError(f"verify exited {result.returncode}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def describe_findings(report):
    return "\n".join(f"{f['kind']} at {f['chunk'] and hex(f['chunk'])} in {f['where']}: expected {f['expected']}; "
                     f"found {f['found']}" for f in report["findings"])


class DamagedHeapChecks:
    """Mixed into one TestCase per mode."""

    mode = ""

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_mode(cls.mode)
        damaged = cls.capture.ledger.damaged
        if len(damaged) != 1:
            raise AssertionError(f"the {cls.mode} ledger should record one damaged block: {damaged}")
        cls.damage = damaged[0]
        cls.damaged_chunk = cls.damage.address - CHUNK_HEADER

    def findings_naming_the_damage(self, report):
        return [f for f in report["findings"] if f["chunk"] == self.damaged_chunk and f["kind"] == self.damage.how]

    def check_verify_names_the_damage(self, *flags):
        report = verify_json(self.capture.core, *flags)
        self.assertEqual(report["command"], "verify")
        self.assertEqual(report["problems"], len(report["findings"]) + report["findings_not_listed"])
        self.assertTrue(self.findings_naming_the_damage(report),
                        f"no {self.damage.how} finding at chunk {self.damaged_chunk:#x}; findings:\n"
                        f"{describe_findings(report)}")
        for finding in report["findings"]:
            self.assertTrue(finding["expected"] and finding["found"] and finding["affects"], finding)
        return report

    def test_verify_names_the_damaged_chunk(self):
        self.check_verify_names_the_damage()

    def test_verify_without_debug_files_names_it_too(self):
        self.check_verify_names_the_damage(*debug_flags(False))

    def test_leaks_completes_with_a_warning(self):
        result = run_heapscope("leaks", self.capture.core, timeout=COMMAND_TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Warnings (", result.stdout)

    def test_verify_text_lists_the_finding(self):
        result = run_heapscope("verify", self.capture.core, timeout=COMMAND_TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"{self.damage.how} at chunk {self.damaged_chunk:#x}", result.stdout)


class OverflowTests(DamagedHeapChecks, unittest.TestCase):
    mode = "overflow"

    def test_the_overflowed_block_is_the_last_good_chunk(self):
        report = self.check_verify_names_the_damage()
        live = [a.address for a in self.capture.ledger.live]
        overflowed = live[live.index(self.damage.address) - 1] - CHUNK_HEADER
        [finding] = self.findings_naming_the_damage(report)
        self.assertEqual(finding["last_good_chunk"], overflowed)
        self.assertEqual(finding["where"], "heap")
        self.assertIsNotNone(finding["heap"])

    def test_leaks_says_the_result_is_partial(self):
        leaks = json.loads(run_heapscope("leaks", self.capture.core, "--json",
                                         timeout=COMMAND_TIMEOUT_SECONDS).stdout)
        self.assertTrue(any(w.startswith("partial result") for w in leaks["warnings"]), leaks["warnings"])
        self.assertTrue(any(f"heap damage at chunk {self.damaged_chunk:#x}" in w for w in leaks["warnings"]),
                        leaks["warnings"])

    def test_every_command_finishes(self):
        for command in ("summary", "blocks", "top", "histogram", "chains", "threads"):
            with self.subTest(command=command):
                result = run_heapscope(command, self.capture.core, timeout=COMMAND_TIMEOUT_SECONDS)
                self.assertEqual(result.returncode, 0, result.stderr)


class TopOverflowTests(DamagedHeapChecks, unittest.TestCase):
    mode = "top-overflow"

    def test_leaks_says_the_result_is_partial(self):
        leaks = json.loads(run_heapscope("leaks", self.capture.core, "--json",
                                         timeout=COMMAND_TIMEOUT_SECONDS).stdout)
        self.assertTrue(any(w.startswith("partial result") for w in leaks["warnings"]), leaks["warnings"])
        self.assertTrue(any(f"top chunk {self.damaged_chunk:#x} has size field 0x4141414141414141" in w
                            for w in leaks["warnings"]), leaks["warnings"])


class DoubleFreeTests(DamagedHeapChecks, unittest.TestCase):
    mode = "double-free"


class UseAfterFreeLinkTests(DamagedHeapChecks, unittest.TestCase):
    mode = "uaf-link"

    def test_the_finding_is_on_its_tcache_bin(self):
        report = self.check_verify_names_the_damage()
        [finding] = self.findings_naming_the_damage(report)
        self.assertTrue(finding["where"].startswith("tcache bin 4 (96-byte chunks)"), finding["where"])


class OverflowWithConsequencesTests(DamagedHeapChecks, unittest.TestCase):
    """overflow-busy: 28 blocks freed into the tcache lie past the damaged chunk. Their entries are
    consequences of the one damage: one warning counts them under it, and fragmentation says PARTIAL
    instead of counting the skipped heap as empty pages."""

    mode = "overflow-busy"
    FREED_AFTER_THE_DAMAGE = 28

    def test_consequences_are_one_warning_under_their_cause(self):
        report = verify_json(self.capture.core)
        cause = f"because of the heap damage at chunk {self.damaged_chunk:#x}:"
        grouped = [w for w in report["warnings"] if w.startswith(cause)]
        self.assertEqual(len(grouped), 1, report["warnings"])
        counted = sum(int(n) for n in re.findall(r"(\d+) (?:tcache|fastbin) entr", grouped[0]))
        self.assertGreaterEqual(counted, self.FREED_AFTER_THE_DAMAGE, grouped[0])
        self.assertFalse([w for w in report["warnings"] if "is not a chunk of any walked heap" in w], report["warnings"])
        self.assertLess(len(report["warnings"]), 8, report["warnings"])

    def test_fragmentation_is_marked_partial(self):
        result = run_heapscope("fragmentation", self.capture.core, "--json", timeout=COMMAND_TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertTrue(report["partial"])
        self.assertGreater(report["skipped_bytes"], 0)
        self.assertTrue(report["warnings"][0].startswith("partial result"), report["warnings"])
        # The skipped part is not counted: the pages counted end before it.
        self.assertLessEqual(report["pages"] * report["page_bytes"],
                             sum(a["system_bytes"] for a in report["arenas"]) - report["skipped_bytes"] + 4096)
        text = run_heapscope("fragmentation", self.capture.core, timeout=COMMAND_TIMEOUT_SECONDS).stdout
        self.assertIn("PARTIAL:", text.splitlines()[1])


class CleanHeapTests(unittest.TestCase):
    """Undamaged heaps: nothing to report, and the counts say what was checked."""

    def check_clean(self, fixture):
        capture = capture_fixture(fixture)
        for use_debug_files in (True, False):
            report = verify_json(capture.core, *debug_flags(use_debug_files))
            self.assertEqual(report["findings"], [], describe_findings(report))
            self.assertEqual(report["problems"], 0)
            checked = report["checked"]
            self.assertGreater(checked["chunks"], len(capture.ledger.live) // 2)
            self.assertGreater(checked["tcache_entries"] + checked["fastbin_entries"] + checked["bin_entries"], 0)
        return report

    def test_single_arena_fixture(self):
        report = self.check_clean("walk_fixture_c")
        self.assertEqual(report["checked"]["arenas"], 1)
        text = run_heapscope("verify", capture_fixture("walk_fixture_c").core, timeout=COMMAND_TIMEOUT_SECONDS)
        self.assertIn("no problems found", text.stdout)

    def test_fixture_with_thread_arenas(self):
        report = self.check_clean("walk_fixture_threads")
        self.assertGreater(report["checked"]["arenas"], 1)
        self.assertGreater(report["checked"]["heaps"], report["checked"]["arenas"])


class LldbTests(unittest.TestCase):
    """`heap verify` in the LLDB plugin on the double-free core: the same finding as the CLI."""

    def test_heap_verify_in_lldb(self):
        require_lldb_and_gdb()
        capture = capture_mode("double-free")
        damage = capture.ledger.damaged[0]
        run = run_lldb([f"target create {capture.executable} --core {capture.core}", "heap verify --json"])
        report = run.json_of("heap verify --json")
        cli = verify_json(capture.core)
        self.assertEqual(report["findings"], cli["findings"])
        self.assertIn((damage.how, damage.address - CHUNK_HEADER), {(f["kind"], f["chunk"]) for f in report["findings"]})


def read_heaps(pid, heaps):
    """The bytes of every heap segment of a running process, read through /proc/PID/mem."""
    with open(f"/proc/{pid}/mem", "rb") as mem:
        contents = []
        for heap in heaps:
            mem.seek(heap["start"])
            contents.append(mem.read(heap["end"] - heap["start"]))
        return contents


class LiveTests(unittest.TestCase):
    """`attach PID verify` on the parked uaf-link fixture: the core's findings, and the heap untouched."""

    def test_attach_verify_reads_only(self):
        with ParkedProgram(fixture_path(FIXTURE), "uaf-link") as program:
            summary = run_heapscope("attach", program.pid, "summary", "--json", timeout=COMMAND_TIMEOUT_SECONDS)
            self.assertEqual(summary.returncode, 0, summary.stderr)
            heaps = [h for arena in json.loads(summary.stdout)["heap"]["arenas"] for h in arena["heaps"]]
            self.assertTrue(heaps)
            before = read_heaps(program.pid, heaps)
            live = run_heapscope("attach", program.pid, "verify", "--json", timeout=COMMAND_TIMEOUT_SECONDS)
            self.assertEqual(live.returncode, 0, live.stderr)
            self.assertEqual(read_heaps(program.pid, heaps), before, "attach verify changed the heap")
            core = os.path.join(work_dir(), "attach-corrupt_heap-uaf-link.core")
            try:
                take_core(program.pid, core)
                from_core = verify_json(core)
            finally:
                if os.path.exists(core):
                    os.remove(core)
        live_report = json.loads(live.stdout)
        self.assertEqual(live_report["findings"], from_core["findings"])
        self.assertIn("tcache_link", {f["kind"] for f in live_report["findings"]})


if __name__ == "__main__":
    unittest.main()
