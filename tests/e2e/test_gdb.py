"""End-to-end checks of the GDB frontend (frontends/gdb/heapscope_gdb.py) in real GDB, in batch mode.

- On a fixture's core, `heap leaks --json`, `heap summary --json` and `heap retainers <expression>` print
  what the CLI prints on the same core.
- On a live fixture stopped by GDB (leak_shapes at its final pause(2), walk_fixture_c at a breakpoint on
  pause), `heap leaks --json`, `heap retainers <expression>` and `heap summary --json` give what the CLI
  gives on a core that GDB's own gcore wrote at that same stop, from the same session.
- `heap` without a process is a clear error, `help heap` lists every command of the CLI, errors are
  GDB errors (no Python traceback), and the script finds its library beside itself in the build tree.
"""

import json
import os
import re
import subprocess
import unittest

from heapscope_e2e import DEBUGGER_ONLY_VARIABLES, build_dir, debugger_environment, fixture_path, heapscope_json, run_heapscope, work_dir
from test_leaks import capture_leak_fixture, leak_fixture_path

GDB_TIMEOUT_SECONDS = 180
# The expression whose block `heap retainers` is asked about: a node of leak_shapes' kept list, which
# hangs from the global g_kept_list.
KEPT_NODE = "g_kept_list->next"


def source_script():
    return os.path.join(os.environ["HEAPSCOPE_SOURCE_DIR"], "frontends", "gdb", "heapscope_gdb.py")


def capi_directory():
    """build/frontends/capi, found from the CLI's place in the build tree (build/frontends/cli/heapscope)."""
    return os.path.join(build_dir(), "frontends", "capi")


def run_gdb(commands, *target, script=None, library=None):
    """gdb -batch -nx with the frontend sourced, then `commands` (each one -ex); returns the
    CompletedProcess. library: HEAPSCOPE_CAPI (None: the built library; "": unset). Programs it runs do
    not inherit a sanitizer build's preload (debugger_environment).

    Skipped in a sanitizer build: gdb 13 hangs at startup (in setlocale, before it reads a command) with
    either GCC's or Clang's ASan runtime preloaded, so it cannot host the instrumented C API. There the
    C API is checked without gdb by test_capi."""
    if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):
        raise unittest.SkipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")
    env = debugger_environment()
    env.pop("HEAPSCOPE_CAPI", None)
    if library is None:
        env["HEAPSCOPE_CAPI"] = os.path.join(capi_directory(), "libheapscope_capi.so")
    elif library:
        env["HEAPSCOPE_CAPI"] = library
    arguments = ["gdb", "-batch", "-nx", "-ex", "set pagination off", "-ex", f"source {script or source_script()}"]
    for variable in DEBUGGER_ONLY_VARIABLES:
        arguments += ["-ex", f"unset environment {variable}"]
    for command in commands:
        arguments += ["-ex", command]
    return subprocess.run(arguments + list(target), capture_output=True, text=True, env=env,
                          timeout=GDB_TIMEOUT_SECONDS)


def marked(name, command):
    """GDB commands that print `command`'s output between two marker lines (see between_markers)."""
    return [f"echo @@{name}-begin\\n", command, f"echo @@{name}-end\\n"]


def between_markers(result, name):
    match = re.search(rf"^@@{name}-begin\n(.*?)^@@{name}-end$", result.stdout, re.S | re.M)
    if not match:
        raise AssertionError(f"no output of {name} in gdb's output:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return match.group(1)


def json_between_markers(result, name):
    text = between_markers(result, name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise AssertionError(f"{name} printed no JSON ({e}): {text[:500]!r}\n{result.stderr[-2000:]}") from None


def printed_address(result, name):
    """The value of a `print/x (unsigned long) EXPR` between markers."""
    match = re.search(r"= (0x[0-9a-f]+)", between_markers(result, name))
    if not match:
        raise AssertionError(f"{name}: gdb printed no address")
    return int(match.group(1), 16)


def assert_no_traceback(test, result):
    test.assertNotIn("Traceback", result.stdout + result.stderr)
    test.assertNotIn("Python Exception", result.stdout + result.stderr)


class GdbOnACore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.gdb = run_gdb(marked("leaks", "heap leaks --json") + marked("summary", "heap summary --json") +
                          marked("retainers", f"heap retainers {KEPT_NODE} --json") +
                          marked("address", f"print/x (unsigned long) {KEPT_NODE}") +
                          marked("bad-expression", "heap describe *g_kept_list") +
                          marked("bad-option", "heap blocks --no-such-option"),
                          cls.capture.executable, cls.capture.core)

    def test_leaks_json_is_the_clis(self):
        leaks = json_between_markers(self.gdb, "leaks")
        self.assertGreater(leaks["totals"]["blocks"], 0)
        self.assertEqual(leaks, heapscope_json("leaks", self.capture.core))

    def test_summary_json_is_the_clis(self):
        self.assertEqual(json_between_markers(self.gdb, "summary"), heapscope_json("summary", self.capture.core))

    def test_retainers_of_an_expression_are_the_clis_of_its_value(self):
        address = printed_address(self.gdb, "address")
        retainers = json_between_markers(self.gdb, "retainers")
        self.assertEqual(retainers["query"], address)
        self.assertEqual(retainers["verdict"], "reachable")
        self.assertEqual(retainers, heapscope_json("retainers", self.capture.core, hex(address)))

    def test_errors_are_gdb_errors(self):
        self.assertEqual(between_markers(self.gdb, "bad-expression"), "")
        self.assertIn("heap describe: cannot evaluate '*g_kept_list': it is a struct list_node, not an address",
                      self.gdb.stderr)
        self.assertIn("heap blocks: The following argument was not expected: --no-such-option", self.gdb.stderr)
        assert_no_traceback(self, self.gdb)


class GdbOnALiveProcess(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        cls.leak_core = os.path.join(directory, "gdb-live-leak_shapes.core")
        cls.walk_core = os.path.join(directory, "gdb-live-walk_fixture_c.core")
        # leak_shapes parks its main thread in a raw pause(2) syscall (its worker thread sat down in
        # pause() earlier): stop when the main thread (GDB's thread 1) enters it.
        cls.leak_gdb = run_gdb(["catch syscall pause", "condition 1 $_thread == 1", "run"] +
                               marked("leaks", "heap leaks --json") +
                               marked("retainers", f"heap retainers {KEPT_NODE} --json") +
                               marked("address", f"print/x (unsigned long) {KEPT_NODE}") +
                               marked("threads", "heap summary --json") +
                               [f"gcore {cls.leak_core}", "kill"],
                               leak_fixture_path("leak_shapes"))
        cls.walk_gdb = run_gdb(["break pause", "run"] + marked("summary", "heap summary --json") +
                               [f"gcore {cls.walk_core}", "kill"],
                               fixture_path("walk_fixture_c"))

    @classmethod
    def tearDownClass(cls):
        for core in (cls.leak_core, cls.walk_core):
            if os.path.exists(core):
                os.remove(core)

    def test_leaks_json_is_the_clis_on_gcore_at_the_same_stop(self):
        leaks = json_between_markers(self.leak_gdb, "leaks")
        self.assertGreater(leaks["totals"]["blocks"], 0)
        self.assertEqual(leaks, heapscope_json("leaks", self.leak_core))
        assert_no_traceback(self, self.leak_gdb)

    def test_retainers_of_an_expression_are_the_clis_on_gcore(self):
        address = printed_address(self.leak_gdb, "address")
        retainers = json_between_markers(self.leak_gdb, "retainers")
        self.assertEqual(retainers["query"], address)
        self.assertEqual(retainers["verdict"], "reachable")
        self.assertEqual(retainers, heapscope_json("retainers", self.leak_core, hex(address)))

    def test_every_thread_comes_with_its_registers(self):
        live = json_between_markers(self.leak_gdb, "threads")
        core = heapscope_json("summary", self.leak_core)
        self.assertTrue(live["target"]["description"].startswith("live process "))
        self.assertEqual([t["tid"] for t in live["threads"]], [t["tid"] for t in core["threads"]])
        self.assertEqual(len(live["threads"]), 2)
        self.assertEqual(live["heap"], core["heap"])

    def test_summary_at_a_breakpoint_is_the_clis_on_gcore(self):
        live = json_between_markers(self.walk_gdb, "summary")
        core = heapscope_json("summary", self.walk_core)
        self.assertGreater(live["heap"]["totals"]["in_use"]["blocks"], 50)
        self.assertEqual(live["heap"], core["heap"])
        self.assertEqual(live["modules"], core["modules"])
        assert_no_traceback(self, self.walk_gdb)


class GdbFrontend(unittest.TestCase):
    def test_heap_without_a_process_is_a_clear_error(self):
        result = run_gdb(["heap", "heap leaks"])
        message = "heap: no process and no core file: start or attach to a program"
        self.assertEqual(result.stderr.count(message), 2, result.stderr)
        assert_no_traceback(self, result)

    def test_help_heap_lists_every_command_of_the_cli(self):
        result = run_gdb(["help heap"] + marked("leaks-help", "help heap leaks"))
        cli_help = run_heapscope("--help").stdout
        commands = re.findall(r"^\s+(\w+)\s+\S", cli_help.split("Subcommands:")[1], re.M)
        # The CLI's own verbs: `attach` picks a process, `record` starts one; `unpack` and `coredumps` find a
        # core for a debugger.
        for own in ("attach", "record", "unpack", "coredumps"):
            commands.remove(own)
        self.assertIn("leaks", commands)
        for command in commands:
            self.assertRegex(result.stdout, rf"(?m)^heap {command} -- ")
        leaks_help = between_markers(result, "leaks-help")
        self.assertIn("Usage: heap leaks", leaks_help)
        self.assertIn("--json", leaks_help)

    def test_the_build_tree_copy_finds_its_library(self):
        result = run_gdb(["help heap leaks"], script=os.path.join(capi_directory(), "heapscope_gdb.py"), library="")
        self.assertIn("Usage: heap leaks", result.stdout, result.stderr)

    def test_a_missing_library_is_a_clear_error(self):
        missing = os.path.join(work_dir(), "no-such-dir", "libheapscope_capi.so")
        result = run_gdb(["heap"], library=missing)
        self.assertIn(f"libheapscope_capi.so was not found (looked in: {missing})", result.stderr)
        assert_no_traceback(self, result)


if __name__ == "__main__":
    unittest.main()
