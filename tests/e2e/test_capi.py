"""The C API (frontends/capi/heapscope_capi.h) without a debugger: tests/capi/capi_driver calls it as a
frontend does. It matters most in a sanitizer build, where gdb cannot host the instrumented library
(test_gdb is skipped there) but the driver is instrumented like the library.

- On leak_shapes' core: `leaks` and `retainers` (the address given as an expression, so the evaluator
  callback runs) print what the CLI prints; a bad expression, a missing core and an unknown command are
  errors with a message, not crashes; help lists the CLI's commands.
- On leak_shapes parked: the driver stops it with ptrace, gives every thread's registers to
  hs_open_live, and its `blocks --state leaked` are the leaks the fixture designed; the process runs on.
"""

import json
import os
import subprocess
import unittest

from heapscope_e2e import heapscope_json, run_heapscope, work_dir
from lldb_session import parked_fixture
from test_leaks import capture_leak_fixture, leak_fixture_path, parse_leak_ledger
from test_lldb import comparable, leaked_addresses

FIXTURE = "leak_shapes"
DRIVER_TIMEOUT_SECONDS = 300


def run_driver(*args):
    driver = os.environ.get("HEAPSCOPE_CAPI_DRIVER")
    if not driver:
        raise RuntimeError("HEAPSCOPE_CAPI_DRIVER is not set: run the tests through ctest")
    return subprocess.run([driver, *map(str, args)], capture_output=True, text=True, timeout=DRIVER_TIMEOUT_SECONDS)


def driver_json(*args):
    result = run_driver(*args, "--json")
    if result.returncode != 0:
        raise AssertionError(f"capi_driver {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}")
    return json.loads(result.stdout)


class CApiOnACore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(FIXTURE)

    def test_leaks_equal_the_clis(self):
        core = self.capture.core
        self.assertEqual(comparable(driver_json("core", core, "leaks")), comparable(heapscope_json("leaks", core)))

    def test_retainers_of_an_evaluated_expression_equal_the_clis(self):
        core = self.capture.core
        kept = next(e.address for e in self.capture.expectations if e.verdict == "reachable")
        through_api = driver_json("core", core, "retainers", f"@{kept:x}")
        self.assertEqual(through_api["target"]["address"], kept)
        self.assertEqual(comparable(through_api), comparable(heapscope_json("retainers", core, hex(kept))))

    def test_a_bad_expression_is_an_error_with_the_evaluators_message(self):
        result = run_driver("core", self.capture.core, "retainers", "@not-a-number")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("hexadecimal", result.stderr)

    def test_an_unknown_command_and_a_missing_core_are_errors(self):
        for args in (("core", self.capture.core, "no-such-command"),
                     ("core", os.path.join(work_dir(), "no-such.core"), "leaks")):
            with self.subTest(args=args):
                result = run_driver(*args)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertTrue(result.stderr.strip())
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_help_lists_the_clis_commands(self):
        listed = {line.split("\t")[0] for line in run_driver("help").stdout.splitlines() if line}
        self.assertIn("leaks", listed)
        self.assertIn("verify", listed)
        cli_help = run_heapscope("--help").stdout
        for command in listed:
            self.assertIn(command, cli_help)
        self.assertIn("--paths", run_driver("help", "retainers").stdout)


class CApiOnALiveProcess(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ledger_file = os.path.join(work_dir(), "capi-live.ledger")
        cls.process = cls.enterClassContext(parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE))
        _, cls.expectations = parse_leak_ledger(ledger_file)
        cls.leaked = driver_json("live", cls.process.pid, "blocks", "--state", "leaked")

    def test_live_leaks_are_the_designed_ones(self):
        expected = {e.address for e in self.expectations if e.verdict == "leaked"}
        self.assertEqual(leaked_addresses(self.leaked), expected)

    def test_the_process_runs_on_after_the_driver_detaches(self):
        with open(f"/proc/{self.process.pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        self.assertIn(state, ("S", "R"))
        self.assertIsNone(self.process.poll())


if __name__ == "__main__":
    unittest.main()
