"""End-to-end checks that heapscope fails cleanly on files that are not usable cores: a non-zero exit (not
a crash: below 128, so no signal), exactly one line on stderr naming the file, no C++ or Python
diagnostics, and all of it quickly.
"""

import json
import os
import unittest

from heapscope_e2e import capture_fixture, run_heapscope, work_dir
from test_leaks import capture_leak_fixture

TIME_LIMIT_SECONDS = 30
CRASH_SIGNS = ("Traceback", "terminate called", "Segmentation fault", "Assertion", "AddressSanitizer",
               "core dumped", "what():")
COMMANDS = (["summary"], ["blocks"], ["summary", "--json"], ["blocks", "--state", "all", "--json"])


class CliErrorTests(unittest.TestCase):

    def assert_clean_failure(self, path, what=""):
        for command in COMMANDS:
            with self.subTest(command=" ".join(command), file=os.path.basename(path)):
                result = run_heapscope(command[0], path, *command[1:], timeout=TIME_LIMIT_SECONDS)
                stderr = result.stderr.rstrip("\n")
                self.assertNotEqual(result.returncode, 0, f"stdout: {result.stdout[:300]!r}")
                self.assertGreater(result.returncode, 0, f"killed by signal {-result.returncode}: {stderr!r}")
                self.assertLess(result.returncode, 128, stderr)
                self.assertTrue(stderr, "an error message on stderr")
                self.assertNotIn("\n", stderr, "exactly one line on stderr")
                for sign in CRASH_SIGNS:
                    self.assertNotIn(sign, stderr)
                self.assertIn(os.path.basename(path), stderr, "the message names the file")
                self.assertIn(what, stderr)

    def scratch_file(self, name, contents):
        path = os.path.join(work_dir(), name)
        with open(path, "wb") as f:
            f.write(contents)
        return path

    def test_missing_file(self):
        self.assert_clean_failure(os.path.join(work_dir(), "no-such-core"))

    def test_directory(self):
        path = os.path.join(work_dir(), "a-directory.core")
        os.makedirs(path, exist_ok=True)
        self.assert_clean_failure(path, "is a directory")

    def fifo(self, name):
        path = os.path.join(work_dir(), name)
        if os.path.lexists(path):
            os.remove(path)
        os.mkfifo(path)
        return path

    def test_fifo_and_device_are_refused_without_waiting(self):
        # Opening a FIFO for reading waits for a writer: nothing may open one (the time limit fails a hang).
        self.assert_clean_failure(self.fifo("a-fifo.core"), "is a FIFO")
        self.assert_clean_failure("/dev/null", "is a character device")

    def test_fifo_as_an_earlier_core_or_the_executable(self):
        core = capture_fixture("walk_fixture_c").core
        fifo = self.fifo("an-earlier-fifo.core")
        for command in (["diff", fifo, core], ["evolution", fifo, core]):
            with self.subTest(command=command[0]):
                result = run_heapscope(*command, timeout=TIME_LIMIT_SECONDS)
                self.assertEqual(result.returncode, 1, result.stdout[:300])
                self.assertIn(f"{fifo} is a FIFO, not a regular file", result.stderr)
        result = run_heapscope("summary", core, "--exe", fifo, "--json", timeout=TIME_LIMIT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"{fifo} is a FIFO", " ".join(json.loads(result.stdout)["warnings"]))

    def test_empty_file(self):
        self.assert_clean_failure(self.scratch_file("empty.core", b""))

    def test_not_an_elf_file(self):
        self.assert_clean_failure(self.scratch_file("text.core", b"this is not a core file\n" * 100))

    def test_elf_that_is_not_a_core(self):
        self.assert_clean_failure("/bin/true")

    def test_truncated_core(self):
        # Cut where nothing usable is left. Cores cut after their notes open with what they hold
        # (test_damaged_cores).
        core = capture_fixture("walk_fixture_c").core
        with open(core, "rb") as f:
            data = f.read()
        # A gdb core cut in its memory or just before its notes opens without threads (test_damaged_cores).
        cuts = {
            "in the ELF header": 40,
            "in the program headers": 200,
        }
        for where, length in cuts.items():
            with self.subTest(cut=where, length=length):
                self.assert_clean_failure(self.scratch_file(f"truncated-{length}.core", data[:length]))


class CommandLineTests(unittest.TestCase):
    """The command line's small cuts: counts, typos, signs, an address in a malloc header, plurals, output
    files of a format heapscope does not write, and `heapscope help`."""

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.core = cls.capture.core

    def assert_one_line_error(self, result, *phrases):
        stderr = result.stderr.strip()
        self.assertEqual(result.returncode, 1, result.stdout[:500])
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertNotRegex(stderr, r"\d{20}", "no 300-digit range in the message")
        for phrase in phrases:
            self.assertIn(phrase, stderr)

    def test_count_zero_means_all(self):
        all_rows = json.loads(run_heapscope("top", self.core, "-n", "0", "--json").stdout)["rows"]
        ten_rows = json.loads(run_heapscope("top", self.core, "-n", "10", "--json").stdout)["rows"]
        self.assertGreater(len(all_rows), len(ten_rows))
        self.assertEqual(run_heapscope("coroutines", self.core, "-n", "0").returncode, 0)

    def test_negative_and_fractional_counts_are_refused_plainly(self):
        for args in (["top", self.core, "-n", "-1"], ["blocks", self.core, "--min-size", "-1"],
                     ["leaks", self.core, "--examples", "1.5"], ["retainers", self.core, "0x10", "--paths", "0"]):
            with self.subTest(args=args[2:]):
                self.assert_one_line_error(run_heapscope(*args, timeout=TIME_LIMIT_SECONDS), "whole number")

    def test_a_mistyped_command_names_the_one_meant(self):
        self.assert_one_line_error(run_heapscope("leak", self.core), "unknown command 'leak'", "did you mean 'leaks'?")
        self.assert_one_line_error(run_heapscope("sumary", self.core), "did you mean 'summary'?")
        self.assert_one_line_error(run_heapscope("attach", "1", "retainer", "0x10"), "did you mean 'retainers'?")

    def test_an_address_in_a_malloc_header_says_so(self):
        block = next(e.address for e in self.capture.expected("reachable", "global") if not e.interior)
        result = run_heapscope("describe", self.core, hex(block - 8))
        self.assert_one_line_error(result, "malloc's chunk header", f"8 bytes before the block at {block:#x}")
        self.assertNotIn("a in_use", result.stderr)

    def test_one_step_is_singular(self):
        for expectation in self.capture.expected("reachable", "global"):
            paths = json.loads(run_heapscope("retainers", self.core, hex(expectation.address), "--json").stdout)["paths"]
            if paths and len(paths[0]["steps"]) == 1:
                text = run_heapscope("retainers", self.core, hex(expectation.address)).stdout
                self.assertIn("Path 1 (1 step):", text)
                return
        self.fail("leak_shapes has a block a global holds directly")

    def test_an_output_file_of_a_format_heapscope_does_not_write_is_refused(self):
        path = os.path.join(work_dir(), "leaks.png")
        if os.path.exists(path):
            os.remove(path)
        self.assert_one_line_error(run_heapscope("leaks", self.core, "-o", path), "cannot write", ".dot or .svg")
        self.assertFalse(os.path.exists(path))
        text_file = os.path.join(work_dir(), "leaks.txt")
        self.assertEqual(run_heapscope("leaks", self.core, "-o", text_file).returncode, 0)

    def test_html_is_a_flag_as_json_is(self):
        page = run_heapscope("leaks", self.core, "--html")
        self.assertEqual(page.returncode, 0, page.stderr)
        self.assertTrue(page.stdout.lstrip().lower().startswith("<!doctype html"), page.stdout[:200])
        self.assertEqual(page.stdout, run_heapscope("leaks", self.core, "--format", "html").stdout)
        self.assert_one_line_error(run_heapscope("leaks", self.core, "--json", "--html"), "--json", "--html")

    def test_help_lists_the_commands_and_a_commands_options(self):
        overview = run_heapscope("help")
        self.assertEqual(overview.returncode, 0, overview.stderr)
        for command in ("summary", "leaks", "retainers", "attach", "diff"):
            self.assertRegex(overview.stdout, rf"(?m)^\s+{command}\b")
        leaks = run_heapscope("help", "leaks")
        self.assertEqual(leaks.returncode, 0, leaks.stderr)
        self.assertIn("--examples", leaks.stdout)
        self.assert_one_line_error(run_heapscope("help", "leakz"), "did you mean 'leaks'?")


if __name__ == "__main__":
    unittest.main()
