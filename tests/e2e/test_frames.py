"""Stack roots are named by the frame that holds the pointer: the frames fixture
(tests/fixtures/frames_fixture.c) keeps the only pointer to a block in a local of hold_block, called by
process_batch from main, and parks there. Its threads are unwound with libdw over the core."""

import re
import unittest

from heapscope_e2e import capture_fixture, heapscope_json


class FrameLabels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("frames_fixture")
        blocks = [a.address for a in cls.capture.ledger.live if a.how == "frame-local"]
        if len(blocks) != 1:
            raise AssertionError(f"the fixture should list one frame-local block, found {blocks}")
        cls.block = blocks[0]
        cls.result = heapscope_json("retainers", cls.capture.core, hex(cls.block))

    def stack_paths(self):
        return [p for p in self.result["paths"] if p["root"]["kind"] == "stack"]

    def test_block_is_held_by_the_stack(self):
        self.assertEqual(self.result["verdict"], "reachable")
        self.assertEqual(len(self.stack_paths()), 1, self.result["paths"])

    def test_root_label_names_the_frame_function_and_line(self):
        label = self.stack_paths()[0]["root"]["label"]
        self.assertIn("frame #", label)
        self.assertIn("hold_block()", label)
        # hold_block parks in code inlined from ledger.h: its line is the call site in frames_fixture.c.
        self.assertRegex(label, r" hold_block\(\) at frames_fixture\.c:\d+ ")

    def test_root_label_names_the_local_variable(self):
        label = self.stack_paths()[0]["root"]["label"]
        self.assertRegex(label, r" variable batch \(sp\+0x[0-9a-f]+\)$")

    def test_frame_number_counts_from_the_innermost_frame(self):
        # hold_block parks in pause(): it is below at least pause's own frame (and the syscall wrapper's).
        label = self.stack_paths()[0]["root"]["label"]
        frame_number = int(re.search(r"frame #(\d+)", label).group(1))
        self.assertGreaterEqual(frame_number, 1, label)

    def test_root_word_lies_in_the_labelled_thread_stack(self):
        root = self.stack_paths()[0]["root"]
        self.assertNotEqual(root["address"], 0)
        self.assertTrue(root["label"].startswith("stack of thread "), root["label"])


    def test_roots_and_threads_attribute_the_block_to_its_frame_and_variable(self):
        requested = next(a.size for a in self.capture.ledger.live if a.address == self.block)
        # The frame, and under it (one deeper in the ownership tree) its variable.
        frame_roots = [r for r in heapscope_json("roots", self.capture.core, "-n", "0")["roots"]
                       if r["kind"] == "stack" and "hold_block()" in r["label"]]
        self.assertEqual(len(frame_roots), 2, frame_roots)
        frame, variable = frame_roots
        self.assertNotIn("variable", frame["label"])
        self.assertEqual(variable["depth"], frame["depth"] + 1)
        self.assertEqual(variable["retained_bytes"], frame["retained_bytes"])
        frame_roots = [variable]
        self.assertIn("variable batch", frame_roots[0]["label"])
        self.assertGreaterEqual(frame_roots[0]["retained_bytes"], requested)
        threads = heapscope_json("threads", self.capture.core)["threads"]
        frames = [f for t in threads for f in t["frames"] if "hold_block()" in f["label"]]
        self.assertEqual(len(frames), 1, threads)
        self.assertEqual(frames[0]["variable"], "batch")
        self.assertEqual(frames[0]["retained_bytes"], frame_roots[0]["retained_bytes"])

if __name__ == "__main__":
    unittest.main()
