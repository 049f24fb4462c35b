"""`heap coroutines` on the coroutine_pipeline fixture (tests/fixtures/coroutine_pipeline.cpp), built by GCC
and by Clang: a pipeline whose every step awaits a new child step and keeps it (a runaway async stack),
twelve heartbeats parked on a timer, and one coroutine finished but not destroyed. The fixture's ledger
names every frame its promise's operator new allocated ("live <frame> <size> <coroutine>").

The diagnosis the issue asks for, from the prompt in at most three commands: `heap coroutines --stacks`
puts the growing async stack first with its depth and the frame holding it; `heap chains` shows the same
chain of frames; `heap retainers <outermost>` names the local that keeps it. Checked through the CLI on each
compiler's core, and through LLDB on the live GCC-built process against the CLI on its core of the same stop."""

import unittest

from heapscope_e2e import capture_fixture, fixture_path, heapscope_json, run_heapscope
from lldb_session import LiveScenario, require_lldb_and_gdb

HEARTBEATS = 12
PIPELINE = "process_records(int)"
COMPILERS = {"gcc": "coroutine_pipeline", "clang": "coroutine_pipeline_clang"}


def frames_by_coroutine(ledger):
    frames = {}
    for allocation in ledger.live:
        frames.setdefault(allocation.how, []).append(allocation)
    return frames


class CoroutinesOnCores(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {}
        for compiler, fixture in COMPILERS.items():
            capture = capture_fixture(fixture)
            cls.runs[compiler] = (capture, heapscope_json("coroutines", capture.core, "--stacks"))

    def test_every_heap_frame_is_found_with_its_function(self):
        for compiler, (capture, report) in self.runs.items():
            with self.subTest(compiler=compiler):
                expected = {how: len(frames) for how, frames in frames_by_coroutine(capture.ledger).items()}
                found = {row["function"].split("::")[-1].split("(")[0]: row["frames"] for row in report["functions"]}
                self.assertEqual(found, expected)
                self.assertEqual(report["total_frames"], sum(expected.values()))
                for row in report["functions"]:
                    self.assertGreater(row["frame_size"], 0, "the frame type comes from DWARF")
                    self.assertIn("Task<int>::promise_type", row["promise_type"])
                    self.assertRegex(row["source"], r"^coroutine_pipeline\.cpp:\d+$")
                    self.assertGreaterEqual(row["bytes"], row["frames"] * row["frame_size"])

    def test_the_runaway_stack_comes_first_outermost_down(self):
        for compiler, (capture, report) in self.runs.items():
            with self.subTest(compiler=compiler):
                steps = frames_by_coroutine(capture.ledger)["process_records"]
                first = report["stacks"][0]
                self.assertEqual(first["count"], 1)
                self.assertEqual(first["outermost"], steps[0].address, "step 0 awaits everything below it")
                self.assertTrue(first["frames"][0]["function"].endswith(PIPELINE))
                pipeline_frames = sum(f["repeat"] for f in first["frames"] if f["function"].endswith(PIPELINE))
                self.assertEqual(pipeline_frames, len(steps))
                self.assertEqual(first["depth"], sum(f["repeat"] for f in first["frames"]))
                self.assertIn("main()", first["held_by"])
                self.assertFalse(first["leaked"])
                self.assertGreater(first["bytes"], sum(s["bytes"] for s in report["stacks"][1:]))

    def test_identical_stacks_fold_into_one_row(self):
        for compiler, (capture, report) in self.runs.items():
            with self.subTest(compiler=compiler):
                (heartbeats,) = [s for s in report["stacks"] if s["frames"][0]["function"].endswith("heartbeat(int)")]
                self.assertEqual(heartbeats["count"], HEARTBEATS)
                self.assertEqual(heartbeats["depth"], 1)
                (finished,) = [s for s in report["stacks"] if s["frames"][0]["function"].endswith("finished_job(int)")]
                self.assertEqual(finished["frames"][0]["suspend_point"], "final suspend")

    def test_chains_put_the_growing_chain_of_frames_first(self):
        for compiler, (capture, _) in self.runs.items():
            with self.subTest(compiler=compiler):
                steps = frames_by_coroutine(capture.ledger)["process_records"]
                first = heapscope_json("chains", capture.core)["chains"][0]
                self.assertTrue(first["type"].startswith("coroutine frame "), first["type"])
                self.assertTrue(first["type"].endswith(PIPELINE), first["type"])
                self.assertEqual(first["length"], len(steps))
                self.assertEqual(first["head"]["address"], steps[0].address, "the outermost step is nearest a root")
                self.assertIn("main()", first["path"]["root"]["label"])

    def test_gcc_names_what_each_frame_awaits(self):
        _, report = self.runs["gcc"]
        first = report["stacks"][0]["frames"]
        self.assertRegex(first[0]["suspend_point"], r"^co_await #2 \(.*Task<int>\)$")
        self.assertRegex(first[-1]["suspend_point"], r"^co_await #1 \(.*NextRecord\)$")
        self.assertTrue(first[-1]["function"].endswith("read_record(int)"))

    def test_clang_gives_suspend_point_numbers(self):
        _, report = self.runs["clang"]
        (pipeline,) = [f for f in report["functions"] if f["function"].endswith(PIPELINE)]
        points = {p["suspend_point"] for p in pipeline["suspend_points"]}
        self.assertTrue(points <= {"suspend point 1", "suspend point 2"} and points, points)

    def test_frames_are_typed_for_the_other_commands(self):
        capture, _ = self.runs["gcc"]
        histogram = heapscope_json("histogram", capture.core)
        types = {row["type"] for row in histogram["types"]}
        self.assertTrue(any(t.startswith("coroutine frame ") and t.endswith(PIPELINE) for t in types), types)

    def test_text_output(self):
        capture, _ = self.runs["gcc"]
        result = run_heapscope("coroutines", capture.core, "--stacks")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Async stacks", result.stdout)
        self.assertRegex(result.stdout, r"process_records\(int\) at co_await #2 \(.*Task<int>\) ×\d+")


class CoroutinesThroughLldbLive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.scenario = LiveScenario("coroutine_pipeline", fixture_path("coroutine_pipeline"),
                                    ["heap coroutines --stacks --json", "heap chains --json"])

    def test_live_answers_equal_the_clis_on_the_core_of_the_same_stop(self):
        for command in ("coroutines", "chains"):
            with self.subTest(command=command):
                options = ["--stacks"] if command == "coroutines" else []
                live = self.scenario.lldb.json_of(" ".join(["heap", command, *options, "--json"]))
                cli = heapscope_json(command, self.scenario.core, *options)
                live.pop("warnings")
                cli.pop("warnings")
                self.assertEqual(live, cli)

    def test_the_runaway_stack_is_first_live(self):
        live = self.scenario.lldb.json_of("heap coroutines --stacks --json")
        self.assertTrue(live["stacks"][0]["frames"][0]["function"].endswith(PIPELINE))
        self.assertTrue(self.scenario.lldb.json_of("heap chains --json")["chains"][0]["type"].endswith(PIPELINE))


if __name__ == "__main__":
    unittest.main()
