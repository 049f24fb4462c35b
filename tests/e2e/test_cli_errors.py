"""End-to-end checks that heapscope fails cleanly on files that are not usable cores: a non-zero exit (not
a crash: below 128, so no signal), exactly one line on stderr naming the file, no C++ or Python
diagnostics, and all of it quickly.
"""

import os
import unittest

from core_layout import PT_NOTE, program_headers
from heapscope_e2e import capture_fixture, run_heapscope, work_dir

TIME_LIMIT_SECONDS = 30
CRASH_SIGNS = ("Traceback", "terminate called", "Segmentation fault", "Assertion", "AddressSanitizer",
               "core dumped", "what():")
COMMANDS = (["summary"], ["blocks"], ["summary", "--json"], ["blocks", "--state", "all", "--json"])


def first_note_segment(core):
    """(file offset, size) of the first PT_NOTE of a core (gdb writes it last)."""
    note = next((h for h in program_headers(core) if h[0] == PT_NOTE), None)
    if note is None:
        raise AssertionError("the fixture core has no PT_NOTE")
    return note[2], note[5]


class CliErrorTests(unittest.TestCase):

    def assert_clean_failure(self, path):
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
        self.assert_clean_failure(path)

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
        note_offset, _ = first_note_segment(data)
        cuts = {
            "in the ELF header": 40,
            "in the program headers": 200,
            "in the memory (and so before the notes, which gdb writes last)": len(data) // 2,
            "just before the notes": note_offset,
        }
        for where, length in cuts.items():
            with self.subTest(cut=where, length=length):
                self.assert_clean_failure(self.scratch_file(f"truncated-{length}.core", data[:length]))


if __name__ == "__main__":
    unittest.main()
