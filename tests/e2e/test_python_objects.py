"""A CPython process (Debian's python3 with PYTHONMALLOC=malloc) holding a dict of a million lists: every
GC-tracked object is referenced 16 bytes into its block (past its PyGC_Head) and linked into the GC's
lists. With the header recognised (runtime/object_headers.h), the lists are not "possibly leaked", the
GC's list links do not tie every object to every other, and the dict's table retains the heap."""

import os
import unittest

from heapscope_e2e import cached_heapscope_json, capture_program, run_heapscope
from test_owners import CrossCheck

PYTHON = "/usr/bin/python3"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
SCRIPT = os.path.join(FIXTURES, "python_dict_of_lists.py")
POINTER_FREE_SCRIPT = os.path.join(FIXTURES, "python_pointer_free.py")
COUNT = 1_000_000


@unittest.skipUnless(os.access(PYTHON, os.X_OK), "Debian's python3 is not installed")
class PythonDictOfLists(unittest.TestCase, CrossCheck):
    @classmethod
    def setUpClass(cls):
        cls.core, _ = capture_program("python-dict-of-lists", PYTHON, extra_sources=(SCRIPT,),
                                      env={"PYTHONMALLOC": "malloc"}, args=(SCRIPT, str(COUNT)))
        cls.leaks = cached_heapscope_json("leaks", cls.core)

    def test_the_header_is_recognised_and_named(self):
        headers = self.leaks["object_headers"]
        self.assertIsNotNone(headers)
        self.assertIn("a PyGC_Head (16 bytes) before each GC-tracked object", headers["layout"])
        self.assertGreaterEqual(headers["blocks"], COUNT, "every list is a GC-tracked object")
        text = run_heapscope("leaks", self.core)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("Object headers recognised: CPython 3.", text.stdout)

    def test_the_lists_are_not_possibly_leaked(self):
        in_use = cached_heapscope_json("summary", self.core)
        possibly = self.leaks["totals"]["possibly"]
        self.assertLess(possibly["blocks"], COUNT // 100, possibly)
        self.assertEqual(self.leaks["totals"]["blocks"], 0, "a live dict leaks nothing")
        self.assertTrue(in_use)

    def test_the_dict_retains_the_heap(self):
        top = cached_heapscope_json("top", self.core, "-n", "1")
        (largest,) = top["rows"]
        self.assertGreaterEqual(largest["retained_percent"], 95.0, largest)
        self.assertGreaterEqual(largest["retained_blocks"], 3 * COUNT, "the lists, their items and the keys")

    def test_the_globals_own_the_heap(self):
        # sys.modules (in _PyRuntime) holds the module dict and so the table; the running frame's pointers
        # to them (its C stack, registers, and the interpreter frames in the thread's data stack, an
        # anonymous mapping) are borrowed, so no share is left to "several kinds" of roots.
        roots = cached_heapscope_json("roots", self.core)
        in_use = roots["heap"]["in_use_bytes"]
        self.assertLess(roots["shared"]["retained_bytes"], 0.05 * in_use, roots["shared"])
        (globals_,) = [k for k in roots["kinds"] if k["kind"] == "global"]
        self.assertGreaterEqual(globals_["retained_bytes"], 0.95 * in_use, globals_)

    def test_figures_agree(self):
        self.check_consistency(self.core)


@unittest.skipUnless(os.access(PYTHON, os.X_OK), "Debian's python3 is not installed")
class PythonPointerFreeBodies(unittest.TestCase):
    """A str's characters and a bytes' bytes hold no pointers (tests/fixtures/python_pointer_free.py): the
    malloc blocks whose addresses only they hold are leaked, not reachable through them."""

    def test_what_only_str_and_bytes_bodies_point_to_is_leaked(self):
        core, ledger = capture_program("python-pointer-free", PYTHON, extra_sources=(POINTER_FREE_SCRIPT,),
                                       env={"PYTHONMALLOC": "malloc"}, args=(POINTER_FREE_SCRIPT,))
        lost = {}
        with open(ledger, encoding="ascii") as f:
            for line in f:
                kind, value = line.split()
                if kind != "pid":
                    lost.setdefault(kind, set()).add(int(value, 16))
        leaked = {b["address"] for b in cached_heapscope_json("blocks", core, "--state", "leaked")["blocks"]}
        for kind in ("str", "bytes"):
            self.assertEqual(len(lost[kind]), 20)
            # A copy of an address may outlive the list (in the buffers ctypes' calls leave behind, on the
            # interpreter's stack): three in four at least, where scanning the bodies leaks none.
            self.assertGreaterEqual(len(lost[kind] & leaked), 15, (kind, len(lost[kind] & leaked)))


if __name__ == "__main__":
    unittest.main()
