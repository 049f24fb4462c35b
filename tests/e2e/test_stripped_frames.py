"""End-to-end checks of a stripped program (no .symtab, no DWARF; what a Debian binary without its -dbgsym
package is): frames with no symbol show their module and offset (`leak_shapes_stripped+0x1234`, as
addr2line takes it), never a bare address, and `summary` says which modules lack debug info, what that
costs and how to get more.

leak_shapes (tests/fixtures/leaks) holds blocks from main's stack frame; a stripped copy of it is captured.
"""

import os
import re
import shutil
import subprocess
import unittest

from heapscope_e2e import capture_program, heapscope_json, run_heapscope, work_dir
from test_leaks import capture_leak_fixture

STRIPPED = "leak_shapes_stripped"


def capture_stripped():
    directory = os.path.join(work_dir(), "stripped")
    os.makedirs(directory, exist_ok=True)
    executable = os.path.join(directory, STRIPPED)
    original = capture_leak_fixture("leak_shapes").executable
    if not os.path.exists(executable) or os.path.getmtime(executable) < os.path.getmtime(original):
        shutil.copy2(original, executable + ".new")
        subprocess.run(["strip", "--strip-all", executable + ".new"], check=True)
        os.replace(executable + ".new", executable)
    core, _ = capture_program(STRIPPED, executable)
    return executable, core


class StrippedFrames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.executable, cls.core = capture_stripped()
        cls.roots = heapscope_json("roots", cls.core, "-n", "0")["roots"]

    def test_frames_without_symbols_show_module_and_offset(self):
        labels = [r["label"] for r in self.roots if r["kind"] == "stack" and " frame #" in r["label"]]
        self.assertTrue(labels, [r["label"] for r in self.roots])
        in_stripped = [label for label in labels if re.search(rf"frame #\d+ {STRIPPED}\+0x[0-9a-f]+", label)]
        self.assertTrue(in_stripped, labels)
        for label in labels:
            self.assertNotRegex(label, r"frame #\d+ 0x[0-9a-f]+", "a frame inside a module is named by it")

    def test_the_offset_is_the_modules_own(self):
        label = next(r["label"] for r in self.roots if re.search(rf"{STRIPPED}\+0x", r["label"]))
        offset = int(re.search(rf"{STRIPPED}\+(0x[0-9a-f]+)", label).group(1), 16)
        # An offset from the module's link-time base lies inside its file's loadable code.
        headers = subprocess.run(["readelf", "-lW", self.executable], capture_output=True, text=True,
                                 check=True).stdout
        code = [(int(m.group(1), 16), int(m.group(2), 16)) for m in
                re.finditer(r"LOAD\s+\S+\s+(0x[0-9a-f]+)\s+\S+\s+\S+\s+(0x[0-9a-f]+)\s+R E", headers)]
        self.assertTrue(any(start <= offset < start + size for start, size in code), (hex(offset), code))

    def test_summary_says_what_is_missing_and_how_to_get_it(self):
        text = run_heapscope("summary", self.core).stdout
        line = next((l for l in text.splitlines() if l.startswith("Without debug info:")), "")
        self.assertIn(STRIPPED, line, text)
        self.assertIn("module+offset", line)
        self.assertIn("-dbgsym", line)


if __name__ == "__main__":
    unittest.main()
