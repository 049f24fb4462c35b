"""heapscope's allocation-site recorder (libheapscope_sites.so) in real processes, started the way a user
starts it: `heapscope record [--every BYTES] [--slots N] -- PROGRAM`.

- recorder_checks (tests/fixtures/recorder_checks.c) checks the recorder's table in its own memory after
  each thing a program does to a malloc interposer: every allocation function records its block with the
  size asked and a stack whose first frame is the allocating function, freed and reallocated blocks leave
  the table; four threads freeing each other's blocks leave exactly the live ones; 50 forks while a thread
  allocates never hang a child, and each child records; a block allocated from .preinit_array (before every
  constructor, the recorder's and libc's) is recorded; a table of 64 slots drops what does not fit, counts
  it, and records again once blocks are freed; a block allocated in a signal handler has a stack that goes
  on through the signal frame; one allocated 40 calls deep keeps its 32 innermost frames, each the right
  return address. Without the recorder the same program finds no table.
- The recorder changes no verdict: leak_shapes recorded at every allocation has the leaks of its plain run
  (the table keeps its block addresses complemented, so that it holds no pointer into the heap; before,
  every sampled block was reachable from it), and the recorder is not taken for the program's allocator.
- The sites it records, read by heapscope (glibc's allocation_samples): the four-site fixture
  (allocation_sites.c) recorded at every allocation has every block at its site, exact counts in
  `histogram --by site`, the leaking site alone in `leaks --by site`, "allocated at" in `describe`, the
  recorder named in `summary`, the same in LLDB and GDB, and live (attach) as from the core; four threads
  allocating at four sites and freeing each other's blocks (allocation_sites_threads.c) leave every live
  block at its site.
- heaptrack as the oracle is test_real_programs.TroffSitesBesideHeaptrack (troff, a real program).
- `record` refuses, saying why and what to do instead, a program that would never call the recorder: one
  statically linked, one linking jemalloc (redis-server), one that defines malloc itself; a program that
  does not exist exits 127, as a shell says it.
"""

import collections
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

from heapscope_e2e import (build_dir, capture_program, fixture_path, heapscope_json, heapscope_path, parse_ledger,
                            run_heapscope, work_dir)
from lldb_session import require_lldb_and_gdb, run_lldb
from test_allocation_sites import LEAKING_SITE, SITES, by_function, top_function
from test_attach import ParkedProgram
from test_gdb import json_between_markers, marked, run_gdb
from test_leaks import capture_leak_fixture, leak_fixture_path

CHECK_TIMEOUT_SECONDS = 120
REDIS = shutil.which("redis-server")


def recorder_library():
    return os.path.join(build_dir(), "recorder", "libheapscope_sites.so")


def record(*args, env=None):
    return run_heapscope("record", *args, env=env)


class RecorderInItsOwnProcess(unittest.TestCase):
    def check(self, mode, *record_options):
        result = record("--every", "1", *record_options, "--", fixture_path("recorder_checks"), mode)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])

    def test_every_allocation_function(self):
        self.check("functions")

    def test_threads_that_free_each_others_blocks(self):
        self.check("threads")

    def test_fork_while_another_thread_allocates(self):
        self.check("fork")

    def test_an_allocation_before_every_constructor(self):
        self.check("early")

    def test_a_full_table(self):
        self.check("full", "--slots", "64")

    def test_an_allocation_in_a_signal_handler(self):
        self.check("signal")

    def test_a_deep_stack_keeps_its_innermost_frames_in_order(self):
        self.check("deep")

    def test_without_the_recorder_there_is_no_table(self):
        result = subprocess.run([fixture_path("recorder_checks"), "functions"], capture_output=True, text=True,
                                timeout=CHECK_TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: no table", result.stderr)


class VerdictsUnchanged(unittest.TestCase):
    def test_leaks_are_those_of_the_plain_run(self):
        plain = heapscope_json("leaks", capture_leak_fixture("leak_shapes").core)
        executable = leak_fixture_path("leak_shapes")
        libraries = glob.glob(os.path.join(os.path.dirname(executable), "*.so"))
        recorded_core, _ = capture_program("leaks-leak_shapes-recorded", executable,
                                           [*libraries, recorder_library()],
                                           env={"LD_PRELOAD": recorder_library(), "HEAPSCOPE_SAMPLE_BYTES": "1"})
        recorded = heapscope_json("leaks", recorded_core)
        self.assertGreater(plain["totals"]["blocks"], 0)
        # "Possibly leaked" holds a block or two whose size follows the environment (LD_PRELOAD's text):
        # their count, not their bytes.
        self.assertEqual(recorded["totals"]["possibly"]["blocks"], plain["totals"]["possibly"]["blocks"])
        for verdict in ("blocks", "bytes", "direct", "indirect", "cycle"):
            self.assertEqual(recorded["totals"][verdict], plain["totals"][verdict], verdict)
        self.assertEqual([(g["type"], g["count"]) for g in recorded["groups"]],
                         [(g["type"], g["count"]) for g in plain["groups"]])


EVERY_ALLOCATION = {"HEAPSCOPE_SAMPLE_BYTES": "1"}


def recorded(key, fixture, args=()):
    """`fixture`'s core and ledger, recorded at every allocation."""
    core, ledger = capture_program(key, fixture_path(fixture), [recorder_library()],
                                   env=dict(EVERY_ALLOCATION, LD_PRELOAD=recorder_library()), args=args)
    return core, parse_ledger(ledger)


def expected_examples(ledger):
    expected = collections.defaultdict(set)
    for allocation in ledger.live:
        expected[allocation.how].add(allocation.address)
    return expected


class RecordedSites(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core, cls.ledger = recorded("allocation_sites-recorded", "allocation_sites")
        cls.histogram = heapscope_json("histogram", cls.core, "--by", "site", "--examples", "1000")

    def test_every_block_is_at_its_site(self):
        rows = by_function(self.histogram)
        for function, addresses in expected_examples(self.ledger).items():
            self.assertEqual(set(rows[function]["examples"]), addresses, function)

    def test_counts_are_exact(self):
        rows = by_function(self.histogram)
        for function, count in SITES.items():
            self.assertEqual(rows[function]["count"], count, function)
            self.assertEqual(rows[function]["leaked_count"], count if function == LEAKING_SITE else 0, function)
        self.assertTrue(self.histogram["sites_note"]["exact"])

    def test_leaks_by_site_name_the_leaking_function(self):
        leaks = heapscope_json("leaks", self.core, "--by", "site")
        groups = [g for g in leaks["groups"] if g["site"]]
        self.assertEqual([top_function(g["site"]) for g in groups], [LEAKING_SITE])
        self.assertEqual(groups[0]["count"], SITES[LEAKING_SITE])
        self.assertEqual(leaks["totals"]["blocks"], SITES[LEAKING_SITE])

    def test_describe_says_where_each_block_was_allocated(self):
        for function in SITES:
            allocation = next(a for a in self.ledger.live if a.how == function)
            site = heapscope_json("describe", self.core, hex(allocation.address))["allocated_at"]
            self.assertEqual(top_function(site), function)
            self.assertEqual(site["frames"][1]["function"], "main")
            self.assertEqual(site["requested"], allocation.size)

    def test_summary_names_the_recorder(self):
        text = run_heapscope("summary", self.core).stdout
        self.assertRegex(text, r"Sites: +heapscope's recorder \(libheapscope_sites\.so\), every allocation sampled: "
                               r"\d+ blocks at \d+ allocation sites")

    def test_lldb_and_gdb_say_what_the_cli_says(self):
        require_lldb_and_gdb()
        executable = fixture_path("allocation_sites")
        cli = heapscope_json("histogram", self.core, "--by", "site")
        lldb = run_lldb([f"target create {executable} --core {self.core}", "heap histogram --by site --json"])
        self.assertEqual(lldb.json_of("heap histogram --by site --json")["sites"], cli["sites"])
        gdb = run_gdb(marked("sites", "heap histogram --by site --json"), executable, self.core)
        self.assertEqual(json_between_markers(gdb, "sites")["sites"], cli["sites"])

    def test_attach_gives_the_sites_of_the_core(self):
        with ParkedProgram(heapscope_path(), "record", "--every", "1", "--", fixture_path("allocation_sites")) as program:
            live = heapscope_json("attach", program.pid, "histogram", "--by", "site")

        def tally(report):
            return {function: (row["count"], row["bytes"], row["leaked_count"])
                    for function, row in by_function(report).items() if function in SITES}
        self.assertEqual(tally(live), tally(self.histogram))


class RecordedSitesFromFourThreads(unittest.TestCase):
    def test_every_live_block_is_at_its_site(self):
        core, ledger = recorded("allocation_sites_threads-recorded", "allocation_sites_threads")
        histogram = heapscope_json("histogram", core, "--by", "site", "--examples", "1000")
        # Each site function allocates on two lines (the kept blocks, the lost ones): two sites, one function.
        examples, counts, leaked = collections.defaultdict(set), collections.Counter(), collections.Counter()
        for row in histogram["sites"]:
            function = top_function(row["site"])
            examples[function].update(row["examples"])
            counts[function] += row["count"]
            leaked[function] += row["leaked_count"]
        expected = expected_examples(ledger)
        self.assertEqual(set(expected), {"site_parser", "site_indexer", "site_cache", "site_writer"})
        for function, addresses in expected.items():
            self.assertEqual(examples[function], addresses, function)
            self.assertEqual(counts[function], 35, function)  # 60 kept, 30 of them freed by another thread, 5 lost
            self.assertEqual(leaked[function], 5, function)


def users_preload(*libraries):
    """LD_PRELOAD naming `libraries`, as a user sets it for `heapscope record`. A sanitizer build's heapscope
    sees it too, and its ASan runtime must come first of all."""
    asan = os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD")
    return ":".join(([asan] if asan else []) + list(libraries))


class RecordRefuses(unittest.TestCase):
    def assert_refused(self, program, reason):
        result = record("--", program)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(reason, result.stderr)

    def test_a_static_program(self):
        scratch = tempfile.mkdtemp(prefix="record-static-", dir=work_dir())
        try:
            source, program = os.path.join(scratch, "hello.c"), os.path.join(scratch, "hello")
            with open(source, "w", encoding="ascii") as f:
                f.write("int main(void) { return 0; }\n")
            subprocess.run(["cc", "-static", "-o", program, source], check=True, capture_output=True)
            self.assert_refused(program, "is statically linked")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    @unittest.skipIf(REDIS is None, "redis-server is not installed (scripts/install-deps installs it)")
    def test_a_program_linking_jemalloc(self):
        self.assert_refused(REDIS, "MALLOC_CONF=prof:true")

    def test_a_program_defining_malloc(self):
        self.assert_refused(fixture_path("allocator_fixture_jemalloc_static"), "defines malloc itself")

    def test_a_preloaded_allocator(self):
        result = record("--", "true", env={"LD_PRELOAD": users_preload("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")})
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("LD_PRELOAD has libjemalloc.so.2", result.stderr)

    def test_the_users_preloads_stay_first(self):
        """ld.so takes the first definition: a preload that must come first (the ASan runtime) stays there."""
        preload = users_preload("libm.so.6")
        result = record("--", "env", env={"LD_PRELOAD": preload})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"LD_PRELOAD={preload}:/", result.stdout)
        self.assertIn("libheapscope_sites.so\n", result.stdout)

    def test_a_program_that_does_not_exist(self):
        result = record("--", "/nonexistent/program")
        self.assertEqual(result.returncode, 127)
        self.assertIn("cannot run /nonexistent/program", result.stderr)


class RecordCommandLine(unittest.TestCase):
    """What follows the program's name is the program's, in its order: never a literal `--` added, never an
    option of its taken for record's."""

    def test_the_programs_arguments_are_its_own(self):
        for args, printed in ((["--", "echo", "a", "b"], "a b\n"),
                              (["echo", "-n", "a", "--every", "3", "--", "b"], "a --every 3 -- b"),
                              (["--every", "1", "--", "echo", "--slots", "2"], "--slots 2\n"),
                              (["--every=1", "echo", "c"], "c\n")):
            with self.subTest(args=args):
                result = record(*args)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout, printed)

    def test_no_program(self):
        result = record("--every", "1")
        self.assertEqual(result.returncode, 1)
        self.assertIn("no program given", result.stderr)

    def test_a_program_that_sampled_nothing_is_told_the_rate_to_use(self):
        """A small program recorded at a rate that sampled none of its blocks: it was recorded, so the advice
        is to sample every allocation, not to start it under the recorder."""
        core, _ = capture_program("allocation_sites-sampled-none", fixture_path("allocation_sites"),
                                  [recorder_library()],
                                  env={"LD_PRELOAD": recorder_library(), "HEAPSCOPE_SAMPLE_BYTES": str(1 << 40)})
        result = run_heapscope("leaks", core, "--by", "site")
        message = result.stdout + result.stderr
        self.assertIn("was on", message)
        self.assertIn("--every 1", message)
        self.assertNotIn("start the program with", message)


if __name__ == "__main__":
    unittest.main()
