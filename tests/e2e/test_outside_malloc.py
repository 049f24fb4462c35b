"""Memory outside malloc (issue: a process of 587 MB whose `summary` showed 59.7 MiB of malloc heap, with no hint
that the rest was anonymous memory no walk accounts for). The outside_malloc fixture holds an 8 MiB anonymous
mapping of its own, a 4 MiB malloc (an mmapped chunk: malloc's) and a parked thread (its stack: the thread's);
`summary` counts the first and neither of the others, in text, JSON and HTML, and the report shows it.
"""

import unittest

from heapscope_e2e import capture_program, fixture_path, heapscope_json, run_heapscope

ARENA_BYTES = 8 << 20


class OutsideMallocTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core, _ = capture_program("outside_malloc", fixture_path("outside_malloc"))
        cls.summary = heapscope_json("summary", cls.core)

    def test_the_own_mapping_is_counted_whole(self):
        outside = self.summary["outside_malloc"]
        largest = outside["largest"][0]
        self.assertEqual(largest["end"] - largest["start"], ARENA_BYTES)
        self.assertEqual(largest["bytes"], ARENA_BYTES)
        self.assertGreaterEqual(outside["bytes"], ARENA_BYTES)

    def test_mmapped_chunks_and_thread_stacks_are_not_outside_malloc(self):
        # The 4 MiB chunk or the thread's 8 MiB stack, counted by mistake, would add at least 4 MiB.
        self.assertLess(self.summary["outside_malloc"]["bytes"], ARENA_BYTES + (2 << 20))
        self.assertGreaterEqual(self.summary["heap"]["mmapped"]["bytes"], 4 << 20)

    def test_text_and_report_say_it(self):
        text = run_heapscope("summary", self.core)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("Outside malloc: 8.", text.stdout)
        page = run_heapscope("report", self.core, "--format", "html")
        self.assertEqual(page.returncode, 0, page.stderr)
        self.assertIn("Memory outside malloc", page.stdout)


if __name__ == "__main__":
    unittest.main()
