"""End-to-end checks on damaged cores of one real process (leak_shapes, parked: globals, two threads,
leaks of every shape): cut-off files and cores written with a coredump_filter. Every command of the CLI's
table runs on each, under a time bound, and must either finish (exit 0) saying what is missing, or fail
with one line naming the damage; never a signal, a hang or a sanitizer report. Leak verdicts on a core
that lost stacks, globals or heap are marked partial before anything else, never a plain "No leaks".
The same cores through LLDB: lldb does not crash and `heap` prints a result or a message.

gdb writes a core's notes after its memory, so a gdb core cut anywhere in its memory has lost its threads
and mappings: it opens with the memory before the cut, its modules found from the executable's ELF header
and the dynamic linker's list, without threads, and leaks says its result is partial. The kernel writes the
notes first; cut there, the memory before the cut is still usable. Such cores are made here from the gdb core by moving its notes to the front (the
segments' bytes are copied unchanged; only file offsets move), since the tests must not depend on the
kernel's core pattern.
"""

import concurrent.futures
import json
import os
import re
import subprocess
import unittest

from allocator_walk import capture
from core_layout import PT_LOAD, PT_NOTE, program_headers, relaid
from heapscope_e2e import run_heapscope, work_dir
from lldb_session import parked_fixture, require_lldb_and_gdb, run_lldb
from test_jemalloc import SHARED as JEMALLOC
from test_leaks import capture_leak_fixture, leak_fixture_path, parse_leak_ledger

FIXTURE = "leak_shapes"
COMMAND_TIME_LIMIT_SECONDS = 120
CRASH_SIGNS = ("Traceback", "terminate called", "Segmentation fault", "AddressSanitizer", "runtime error:",
               "core dumped", "what():", "LeakSanitizer")
# What a finished command on a damaged core must say somewhere in its output.
DAMAGE_WORDS = re.compile(r"truncated|partial result|no stack memory|cannot be read|not in the image|skipped")
# coredump_filter bits: 0 anonymous private, 1 anonymous shared, 2 file private, 3 file shared,
# 4 ELF headers, 5 and 6 huge pages. gdb's gcore honours the filter (use-coredump-filter is on).
FILTERS = {"nothing": 0x00, "elf-headers-only": 0x10, "anonymous-only": 0x03, "everything": 0x7F}


def segment_containing(headers, address):
    return next(h for h in headers if h[0] == PT_LOAD and h[3] <= address < h[3] + h[6])


# ---- the cores ----

def write_scratch(name, data):
    path = os.path.join(work_dir(), f"damaged-{name}.core")
    with open(path, "wb") as f:
        f.write(data)
    return path


def first_leaked_block(capture):
    return next(e.address for e in capture.expectations if e.verdict == "leaked")


def cut_cores(capture):
    """{name: (path, usable)}: copies of the capture's core cut at telling places (in the heap: where its
    first designed leak lies; in the stack: the main thread's); usable says whether any command can still
    give a result (the notes survive)."""
    heap_block = first_leaked_block(capture)
    stack_start = json.loads(run_heapscope("threads", capture.core, "--json").stdout)["threads"][0]["stack_start"]
    with open(capture.core, "rb") as f:
        gdb_layout = f.read()
    notes_first = relaid(gdb_layout, notes_first=True)
    headers = program_headers(notes_first)
    note = next(h for h in headers if h[0] == PT_NOTE)
    loads = sorted((h for h in headers if h[0] == PT_LOAD and h[5]), key=lambda h: h[2])
    heap = segment_containing(headers, heap_block)
    stack = segment_containing(headers, stack_start)
    gdb_note = next(h for h in program_headers(gdb_layout) if h[0] == PT_NOTE)
    cuts = {
        # gdb's layout: memory, then notes, then section headers.
        "gdb-in-memory": (gdb_layout, len(gdb_layout) // 2, False),
        "gdb-before-notes": (gdb_layout, gdb_note[2], True),
        "gdb-in-notes": (gdb_layout, gdb_note[2] + gdb_note[5] // 2, True),
        "gdb-last-byte": (gdb_layout, len(gdb_layout) - 1, True),
        # The kernel's layout: notes, then memory.
        "kernel-in-notes": (notes_first, note[2] + note[5] // 2, True),
        "kernel-in-first-segment": (notes_first, loads[0][2] + 100, True),
        "kernel-mid-heap": (notes_first, heap[2] + heap[5] // 2, True),
        "kernel-mid-stack": (notes_first, stack[2] + stack[5] // 2, True),
        "kernel-before-last-segment": (notes_first, loads[-1][2], True),
    }
    return {name: (write_scratch(name, data[:length]), usable) for name, (data, length, usable) in cuts.items()}


def capture_filtered_cores():
    """{name: path}: gdb cores of one parked leak_shapes, one per coredump_filter in FILTERS."""
    ledger_file = os.path.join(work_dir(), "damaged-filtered.ledger")
    cores = {}
    with parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE) as process:
        for name, bits in FILTERS.items():
            with open(f"/proc/{process.pid}/coredump_filter", "w") as f:
                f.write(f"{bits:#x}")
            path = os.path.join(work_dir(), f"damaged-filter-{name}.core")
            if os.path.exists(path):
                os.remove(path)
            subprocess.run(["gdb", "-batch", "-nx", "-p", str(process.pid), "-ex", f"gcore {path}"],
                           capture_output=True, timeout=COMMAND_TIME_LIMIT_SECONDS)
            if not os.path.isfile(path):
                raise AssertionError(f"gdb wrote no core with coredump_filter {bits:#x}")
            cores[name] = path
    return cores, parse_leak_ledger(ledger_file)[1]


def command_names():
    """The CLI's subcommands, from its help."""
    help_text = run_heapscope("--help").stdout
    section = help_text.split("Subcommands:", 1)[1]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()]


def command_lines(core, address, reference_core):
    """Every command of the table on `core`, with the arguments it needs."""
    lines = []
    for name in command_names():
        if name in ("attach", "unpack", "coredumps"):
            continue  # a live process; a core's path for a debugger; the journal's list (their own tests)
        if name in ("retainers", "refs", "describe"):
            lines.append([name, core, hex(address)])
        elif name == "snapshot":
            lines.append([name, core, "save", "before"])
        elif name in ("diff", "evolution"):
            lines.append([name, reference_core, core])
        else:
            lines.append([name, core])
    return lines


class DamagedCoreTestCase(unittest.TestCase):
    def assert_clean_outcome(self, args, result, damaged=True):
        stderr = result.stderr.strip()
        output = result.stdout + result.stderr
        self.assertGreaterEqual(result.returncode, 0, f"killed by signal {-result.returncode}: {stderr[-500:]}")
        self.assertLess(result.returncode, 128, stderr[-500:])
        for sign in CRASH_SIGNS:
            self.assertNotIn(sign, output)
        if result.returncode == 0:
            if damaged:
                self.assertRegex(output, DAMAGE_WORDS, "a finished command says what is missing")
        else:
            self.assertTrue(stderr, "an error message")
            self.assertEqual(len(stderr.splitlines()), 1, f"one line: {stderr!r}")

    def run_all(self, runs):
        """Runs (args) lists two at a time; returns [(args, CompletedProcess)]."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = pool.map(lambda a: run_heapscope(*a, timeout=COMMAND_TIME_LIMIT_SECONDS), runs)
            return list(zip(runs, results))


def assert_nothing_walked(test, result, damage):
    """`result` is a command that found no heap block in a damaged core: exit 1, one line saying so after
    what the core lacks (`damage`)."""
    test.assertEqual(result.returncode, 1, result.stdout[:500])
    test.assertEqual(result.stdout, "")
    test.assertIn("0 heap blocks were walked", result.stderr)
    test.assertIn(damage, result.stderr)
    test.assertNotIn("No leaks", result.stderr)


class CutCores(DamagedCoreTestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(FIXTURE)
        cls.leaked_block = first_leaked_block(cls.capture)
        cls.cores = cut_cores(cls.capture)

    def test_every_command_on_every_cut(self):
        runs = []
        for name, (path, usable) in self.cores.items():
            commands = command_lines(path, self.leaked_block, self.capture.core)
            runs += commands if usable else commands[:3]
        for args, result in self.run_all(runs):
            with self.subTest(command=" ".join(map(os.path.basename, args))):
                self.assert_clean_outcome(args, result)

    def test_a_gdb_core_cut_before_its_notes_opens_with_its_memory(self):
        path, _ = self.cores["gdb-before-notes"]
        summary = json.loads(run_heapscope("summary", path, "--json", timeout=COMMAND_TIME_LIMIT_SECONDS).stdout)
        self.assertEqual(summary["threads"], [])
        self.assertTrue(any("truncated before its notes" in w for w in summary["warnings"]), summary["warnings"])
        self.assertTrue(any(m["path"].endswith("libc.so.6") for m in summary["modules"]), summary["modules"])
        leaks = json.loads(run_heapscope("leaks", path, "--json", timeout=COMMAND_TIME_LIMIT_SECONDS).stdout)
        self.assertTrue(leaks["partial"])
        self.assertTrue(leaks["warnings"][0].startswith("partial result"), leaks["warnings"][:2])
        self.assertIn("registers", leaks["warnings"][0])
        # Every designed leak is still found: only blocks the registers held can join them.
        expected = {e.address for e in self.capture.expectations if e.verdict == "leaked"}
        leaked = {b["address"] for b in json.loads(run_heapscope("blocks", path, "--state", "leaked", "--json").stdout)["blocks"]}
        self.assertLessEqual(expected, leaked)

    def test_a_gdb_core_cut_in_its_memory_opens_and_says_so(self):
        path, _ = self.cores["gdb-in-memory"]
        result = run_heapscope("summary", path, timeout=COMMAND_TIME_LIMIT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("truncated before its notes", result.stdout)

    def test_a_core_missing_only_its_section_headers_gives_the_full_result(self):
        path, _ = self.cores["gdb-last-byte"]
        leaks = json.loads(run_heapscope("leaks", path, "--json").stdout)
        full = json.loads(run_heapscope("leaks", self.capture.core, "--json").stdout)
        self.assertEqual(leaks["groups"], full["groups"])
        self.assertTrue(any("section header table" in w for w in leaks["warnings"]))

    def test_leaks_on_a_core_that_lost_memory_are_marked_partial_first(self):
        for name in ("kernel-in-first-segment", "kernel-mid-heap", "kernel-mid-stack"):
            with self.subTest(cut=name):
                result = run_heapscope("leaks", self.cores[name][0], "--json")
                if result.returncode != 0:  # the cut took every heap block: no leak verdict at all
                    assert_nothing_walked(self, result, "is truncated")
                    continue
                leaks = json.loads(result.stdout)
                self.assertTrue(leaks["warnings"][0].startswith("partial result"), leaks["warnings"][:3])
                self.assertTrue(any("is truncated" in w for w in leaks["warnings"]))

    def test_a_cut_in_the_stack_names_the_thread_that_lost_it(self):
        leaks = json.loads(run_heapscope("leaks", self.cores["kernel-mid-stack"][0], "--json").stdout)
        self.assertTrue(any("no stack memory for 1 of its 2 threads" in w for w in leaks["warnings"]),
                        leaks["warnings"])
        # The heap is whole: every designed leak is still found; blocks only the lost stack held join them.
        leaked = {b["address"] for b in json.loads(run_heapscope("blocks", self.cores["kernel-mid-stack"][0],
                                                                 "--state", "leaked", "--json").stdout)["blocks"]}
        self.assertLessEqual({e.address for e in self.capture.expectations if e.verdict == "leaked"}, leaked)

    def test_a_cut_after_the_last_writable_segment_loses_nothing_that_holds_pointers(self):
        path, _ = self.cores["kernel-before-last-segment"]
        leaks = json.loads(run_heapscope("leaks", path, "--json").stdout)
        full = json.loads(run_heapscope("leaks", self.capture.core, "--json").stdout)
        self.assertEqual(leaks["groups"], full["groups"])
        self.assertFalse(any(w.startswith("partial result") for w in leaks["warnings"]))
        self.assertTrue(any("is truncated" in w for w in leaks["warnings"]))

    def test_a_failing_command_names_the_truncation(self):
        path, _ = self.cores["kernel-in-notes"]
        for command in ("leaks", "verify", "summary"):
            with self.subTest(command=command):
                result = run_heapscope(command, path, timeout=COMMAND_TIME_LIMIT_SECONDS)
                self.assertIn("truncated", result.stdout + result.stderr)


class CutJemallocCore(unittest.TestCase):
    """A jemalloc program's gdb core cut in its memory, before the libraries' data: its notes are lost, and
    with them every module (no mapped files, no dynamic linker's list). What the cut lost leads, and why the
    heap cannot be walked; not the glibc plug-in's guess that this is no glibc program."""

    @classmethod
    def setUpClass(cls):
        JEMALLOC.require()
        _, core, _ = capture(JEMALLOC)
        with open(core, "rb") as f:
            whole = f.read()
        cls.promised = len(whole)
        cls.cut_at = len(whole) // 10
        cls.core = write_scratch("jemalloc-gdb-in-memory", whole[:cls.cut_at])
        cls.summary = json.loads(run_heapscope("summary", cls.core, "--json").stdout)

    def test_the_cut_lost_every_module(self):
        self.assertEqual(self.summary["modules"], [])
        self.assertEqual(self.summary["threads"], [])

    def test_a_failing_command_leads_with_what_the_cut_lost(self):
        result = run_heapscope("leaks", self.core, timeout=COMMAND_TIME_LIMIT_SECONDS)
        self.assertEqual(result.returncode, 1)
        first_line = result.stderr.splitlines()[0]
        self.assertTrue(first_line.startswith(f"heapscope: leaks: {self.core} is truncated at byte {self.cut_at} of "
                                              f"{self.promised}: it lost all its notes (threads, registers, mapped "
                                              "files) and "), first_line)
        self.assertIn("none of the process's modules is in what remains (and so: without the process's modules "
                      "nothing says which allocator serves malloc", first_line)
        self.assertNotIn("glibc", result.stderr)

    def test_summary_leads_with_what_the_cut_lost(self):
        self.assertTrue(self.summary["warnings"][0].startswith(f"core file {self.core} is truncated before its notes"),
                        self.summary["warnings"][:2])
        self.assertTrue(self.summary["heap"]["error"].startswith("without the process's modules nothing says which "
                                                                 "allocator serves malloc"), self.summary["heap"])


class FilteredCores(DamagedCoreTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cores, cls.expectations = capture_filtered_cores()
        cls.leaked_block = next(e.address for e in cls.expectations if e.verdict == "leaked")

    def test_every_command_on_every_filter(self):
        runs = []
        for name, path in self.cores.items():
            runs += [(name, args) for args in command_lines(path, self.leaked_block, self.cores["everything"])]
        results = self.run_all([args for _, args in runs])
        for (name, _), (args, result) in zip(runs, results):
            with self.subTest(filter=name, command=" ".join(map(os.path.basename, args))):
                self.assert_clean_outcome(args, result, damaged=name in ("nothing", "elf-headers-only"))

    def test_without_anonymous_memory_leaks_fail_never_no_leaks(self):
        """No heap block in the core: no verdict at all, and a non-zero exit that says why (the summary
        still says what the core holds)."""
        for name in ("nothing", "elf-headers-only"):
            with self.subTest(filter=name):
                assert_nothing_walked(self, run_heapscope("leaks", self.cores[name]), "cannot be read")
                assert_nothing_walked(self, run_heapscope("leaks", self.cores[name], "--json"), "")
                summary = json.loads(run_heapscope("summary", self.cores[name], "--json").stdout)
                self.assertTrue(summary["warnings"])

    def test_with_anonymous_memory_the_designed_leaks_are_found(self):
        expected = {e.address for e in self.expectations if e.verdict == "leaked"}
        for name in ("anonymous-only", "everything"):
            with self.subTest(filter=name):
                blocks = json.loads(run_heapscope("blocks", self.cores[name], "--state", "leaked", "--json").stdout)
                self.assertEqual({b["address"] for b in blocks["blocks"]}, expected)


class WrongOrMissingExecutable(DamagedCoreTestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(FIXTURE)

    def test_another_program_is_not_trusted(self):
        leaks = json.loads(run_heapscope("leaks", self.capture.core, "--exe", "/bin/true", "--json").stdout)
        self.assertTrue(any("build-id mismatch" in w and "not used" in w for w in leaks["warnings"]), leaks["warnings"])
        self.assertTrue(leaks["groups"])

    def test_a_missing_executable_is_a_warning(self):
        missing = os.path.join(work_dir(), "no-such-program")
        for command in ("leaks", "summary", "verify"):
            with self.subTest(command=command):
                result = run_heapscope(command, self.capture.core, "--exe", missing, timeout=COMMAND_TIME_LIMIT_SECONDS)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("cannot open " + missing, result.stdout)


class DamagedCoresInLldb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.capture = capture_leak_fixture(FIXTURE)
        cls.cores = cut_cores(cls.capture)

    def test_lldb_survives_every_cut(self):
        # One lldb a command: lldb --batch stops at the first command that fails.
        runs = [(name, path, command) for name, (path, _) in self.cores.items()
                for command in ("heap summary", "heap leaks", "heap verify")]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = pool.map(lambda r: run_lldb([f"target create {self.capture.executable} --core {r[1]}", r[2]]), runs)
            for (name, path, command), run in zip(runs, results):
                with self.subTest(cut=name, command=command):
                    # lldb --batch exits 1 when a command fails: a failure, not a crash.
                    self.assertIn(run.returncode, (0, 1), run.stderr[-2000:])
                    self.assertNotIn("PLEASE submit a bug report", run.stderr)
                    for sign in CRASH_SIGNS:
                        self.assertNotIn(sign, run.stdout + run.stderr)
                    if "error:" in run.output_of(f"target create {self.capture.executable} --core {path}"):
                        continue  # LLDB itself refused the core: a clean refusal
                    # A result, or an error message (lldb prints those on stderr).
                    self.assertTrue(run.output_of(command).strip() or f"error: {command}: " in run.stderr,
                                    f"{command} printed nothing: {run.stderr[-1000:]}")

    def test_lldb_marks_leaks_partial_where_the_core_is_cut(self):
        path, _ = self.cores["kernel-mid-stack"]
        command = "heap leaks --json"
        leaks = run_lldb([f"target create {self.capture.executable} --core {path}", command]).json_of(command)
        self.assertTrue(leaks["partial"])
        self.assertTrue(leaks["warnings"][0].startswith("partial result: 1 thread stack"), leaks["warnings"][:2])
        cli = json.loads(run_heapscope("leaks", path, "--json").stdout)
        self.assertEqual(leaks["groups"], cli["groups"])


if __name__ == "__main__":
    unittest.main()
