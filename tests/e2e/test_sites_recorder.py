"""heapscope's allocation-site recorder (libheapscope_sites.so) in real processes, started the way a user
starts it: `heapscope record [--every BYTES] [--slots N] -- PROGRAM`.

- recorder_checks (tests/fixtures/recorder_checks.c) checks the recorder's table in its own memory after
  each thing a program does to a malloc interposer: every allocation function records its block with the
  size asked and a stack whose first frame is the allocating function, freed and reallocated blocks leave
  the table; four threads freeing each other's blocks leave exactly the live ones; 50 forks while a thread
  allocates never hang a child, and each child records; a block allocated from .preinit_array (before every
  constructor, the recorder's and libc's) is recorded; a table of 64 slots drops what does not fit, counts
  it, and records again once blocks are freed. Without the recorder the same program finds no table.
- The recorder changes no verdict: leak_shapes recorded at every allocation has the leaks of its plain run
  (the table keeps its block addresses complemented, so that it holds no pointer into the heap; before,
  every sampled block was reachable from it), and the recorder is not taken for the program's allocator.
- `record` refuses, saying why and what to do instead, a program that would never call the recorder: one
  statically linked, one linking jemalloc (redis-server), one that defines malloc itself; a program that
  does not exist exits 127, as a shell says it.
"""

import glob
import os
import shutil
import subprocess
import tempfile
import unittest

from heapscope_e2e import build_dir, capture_program, fixture_path, heapscope_json, run_heapscope, work_dir
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

    def test_a_program_that_does_not_exist(self):
        result = record("--", "/nonexistent/program")
        self.assertEqual(result.returncode, 127)
        self.assertIn("cannot run /nonexistent/program", result.stderr)


if __name__ == "__main__":
    unittest.main()
