"""End-to-end tests of the LLDB plugin (frontends/lldb): real lldb-16 in batch mode with libheapscope_lldb.so
loaded, on a fixture's core and on live fixture processes, checked against the heapscope CLI and against
the fixture's own ledger.

- Core: `heap leaks` and `heap retainers` for every block leak_shapes designed must equal the CLI's
  answers on the same core (parsed JSON: totals, groups, targets, verdicts, path roots and steps).
- Attached: a parked leak_shapes is attached with `lldb -p`; after the heap commands it gets a SIGSTOP
  that is still pending when LLDB detaches, so it stops again before running a single instruction, and
  gdb writes its core at that very stop. The CLI on that core must agree with what LLDB said live.
- Launched: leak_shapes runs under LLDB to a breakpoint before its leaks exist, then on to one after
  them; the answers must follow the process (a session kept across the `continue` would not).
- No process, `help heap`, help without a process, bad expressions.

The plugin is found next to the CLI's build directory (build/frontends/lldb/libheapscope_lldb.so), or
where $HEAPSCOPE_LLDB_PLUGIN says.
"""

import json
import os
import re
import struct
import unittest

from heapscope_e2e import heapscope_json, work_dir
from lldb_session import LiveScenario, require_lldb_and_gdb, run_lldb
from test_leaks import PATHS_WANTED, capture_leak_fixture, leak_fixture_path, parse_leak_ledger
from test_wrong_executable import capture_moved_away

FIXTURE = "leak_shapes"
# The commands' JSON fields that say something about the process (warnings name the image source).
IGNORED_FIELDS = frozenset({"warnings"})
# Address arguments given as LLDB expressions on leak_shapes, and the global each one's block hangs from.
EXPRESSIONS = {"g_kept_list": "g_kept_list", "(void*)g_table[2]": "g_table"}


def comparable(report):
    return {key: value for key, value in report.items() if key not in IGNORED_FIELDS}


def retainers_command(address_text):
    return f"heap retainers {address_text} --paths {PATHS_WANTED} --json"


def cli_retainers(core, address):
    return heapscope_json("retainers", core, hex(address), "--paths", PATHS_WANTED)


def leaked_addresses(blocks_report):
    return {b["address"] for b in blocks_report["blocks"]}


class PluginTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()

    def assert_same_report(self, lldb_report, cli_report, what):
        self.assertEqual(comparable(lldb_report), comparable(cli_report), what)


def first_thread_stack_pointer(data):
    """rsp of the first NT_PRSTATUS note of an x86-64 core: pr_reg starts 112 bytes in, rsp is its 20th word."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        at, end = p_offset, p_offset + p_filesz
        while p_type == 4 and at + 12 <= end:  # PT_NOTE: namesz, descsz, type, name, desc (4-aligned)
            namesz, descsz, note_type = struct.unpack_from("<III", data, at)
            desc = at + 12 + (namesz + 3) // 4 * 4
            if note_type == 1:  # NT_PRSTATUS
                return struct.unpack_from("<Q", data, desc + 112 + 19 * 8)[0]
            at = desc + (descsz + 3) // 4 * 4
    raise AssertionError("no NT_PRSTATUS note")


def write_core_at_another_stop(core, out_path):
    """A copy of `core` as if taken at another stop of the same process: one byte of the first thread's
    stack, just above its stack pointer, differs."""
    with open(core, "rb") as f:
        data = bytearray(f.read())
    at = first_thread_stack_pointer(data) + 8
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1 and p_vaddr <= at < p_vaddr + p_filesz:  # PT_LOAD
            data[p_offset + at - p_vaddr] ^= 0xff
            break
    else:
        raise AssertionError(f"no segment of {core} holds the stack at {at:#x}")
    with open(out_path, "wb") as f:
        f.write(data)


class CoreFileTests(PluginTestCase):
    """For a core, memory is read from the core file LLDB loaded (mapped in LLDB's own process), not through
    LLDB, and never from another core LLDB has loaded too: here a copy of the same core as if taken at
    another stop (a byte of a stack differs), loaded as a second target."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.capture = capture_leak_fixture(FIXTURE)
        cls.other_core = os.path.join(work_dir(), "lldb-another-stop.core")
        write_core_at_another_stop(cls.capture.core, cls.other_core)
        cls.lldb = run_lldb([f"target create {cls.capture.executable} --core {cls.capture.core}",
                             f"target create {cls.capture.executable} --core {cls.other_core}",
                             "target select 0", "heap summary --json", "heap leaks --json",
                             "target select 1", "heap summary --json"])

    def summaries(self):
        outputs = [json.loads(output) for echoed, output in self.lldb.sections if echoed == "heap summary --json"]
        self.assertEqual(len(outputs), 2, self.lldb.stderr[-2000:])
        return outputs

    def test_each_target_reads_its_own_core_file(self):
        for summary, core in zip(self.summaries(), (self.capture.core, self.other_core)):
            with self.subTest(core=core):
                self.assertTrue(summary["target"]["description"].endswith(f"memory read from the core file {core}"),
                                summary["target"]["description"])

    def test_leaks_from_the_core_file_equal_the_clis(self):
        self.assert_same_report(self.lldb.json_of("heap leaks --json"), heapscope_json("leaks", self.capture.core),
                                "the whole report")


class CoreTests(PluginTestCase):
    """The plugin on leak_shapes' core, loaded with `target create --core`, against the CLI."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.capture = capture_leak_fixture(FIXTURE)
        commands = [f"target create {cls.capture.executable} --core {cls.capture.core}", "heap leaks --json"]
        commands += [retainers_command(expression) for expression in EXPRESSIONS]
        commands += [retainers_command(hex(e.address)) for e in cls.capture.expectations]
        cls.lldb = run_lldb(commands)

    def test_leaks_equal_the_clis(self):
        lldb_report = self.lldb.json_of("heap leaks --json")
        cli_report = heapscope_json("leaks", self.capture.core)
        self.assertEqual(lldb_report["totals"], cli_report["totals"])
        self.assertEqual(lldb_report["groups"], cli_report["groups"])
        self.assert_same_report(lldb_report, cli_report, "the whole report")
        self.assertEqual(lldb_report["totals"]["blocks"], len(self.capture.expected("leaked")), "and the ledger's")

    def test_retainers_of_every_designed_block_equal_the_clis(self):
        for e in self.capture.expectations:
            with self.subTest(tag=e.tag, address=hex(e.address)):
                lldb_report = self.lldb.json_of(retainers_command(hex(e.address)))
                cli_report = cli_retainers(self.capture.core, e.address)
                self.assertEqual(lldb_report["target"], cli_report["target"])
                self.assertEqual(lldb_report["verdict"], cli_report["verdict"])
                self.assertEqual([p["root"] for p in lldb_report["paths"]], [p["root"] for p in cli_report["paths"]])
                self.assertEqual([p["steps"] for p in lldb_report["paths"]],
                                 [p["steps"] for p in cli_report["paths"]])
                self.assert_same_report(lldb_report, cli_report, "the whole report")

    def test_address_arguments_are_lldb_expressions(self):
        globals_ = {e.address for e in self.capture.expected("reachable", "global")}
        for expression, global_name in EXPRESSIONS.items():
            with self.subTest(expression=expression):
                lldb_report = self.lldb.json_of(retainers_command(expression))
                address = lldb_report["target"]["address"]
                self.assertIn(address, globals_, "the expression's value is a block a global anchors")
                self.assert_same_report(lldb_report, cli_retainers(self.capture.core, address), expression)
                labels = [p["root"]["label"] for p in lldb_report["paths"]]
                self.assertTrue(any(global_name in label for label in labels), labels)


class AttachedProcessTests(PluginTestCase):
    """leak_shapes parked and attached with `lldb -p`; its core is written by gdb at the same stop."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        def commands(ledger_file):
            cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)
            cls.anonymous = next(e.address for e in cls.expectations if e.tag == "anonymous")
            cls.tls_block = next(e.address for e in cls.expectations if e.tag == "tls")
            return ["heap leaks --json", "heap blocks --state leaked --json", retainers_command("g_kept_list"),
                    retainers_command(f"(void*){cls.anonymous:#x}"), retainers_command(f"{cls.tls_block:#x}")]

        scenario = LiveScenario("lldb-attached", leak_fixture_path(FIXTURE), commands)
        cls.lldb, cls.core = scenario.lldb, scenario.core

    def test_detached_cleanly(self):
        self.assertIn("detached", self.lldb.output_of("process detach"))

    def test_live_leaks_equal_the_clis_on_the_core_of_the_same_stop(self):
        self.assert_same_report(self.lldb.json_of("heap leaks --json"), heapscope_json("leaks", self.core), "leaks")

    def test_live_leaks_are_the_designed_ones(self):
        expected = {e.address for e in self.expectations if e.verdict == "leaked"}
        self.assertEqual(leaked_addresses(self.lldb.json_of("heap blocks --state leaked --json")), expected)

    def test_live_retainers_equal_the_clis_on_the_core_of_the_same_stop(self):
        for expression in ("g_kept_list", f"(void*){self.anonymous:#x}"):
            with self.subTest(expression=expression):
                lldb_report = self.lldb.json_of(retainers_command(expression))
                address = lldb_report["target"]["address"]
                self.assert_same_report(lldb_report, cli_retainers(self.core, address), expression)

    def test_anonymous_mapping_anchors_its_block(self):
        report = self.lldb.json_of(retainers_command(f"(void*){self.anonymous:#x}"))
        self.assertEqual(report["target"]["address"], self.anonymous)
        self.assertIn("anonymous", [p["root"]["kind"] for p in report["paths"]])

    def test_thread_pointers_are_known_without_fs_base_from_lldb(self):
        # LLDB 16 shows no fs_base; the plugin takes thread pointers from glibc's thread list. Static TLS
        # roots and the tcache depend on them.
        report = self.lldb.json_of(retainers_command(f"{self.tls_block:#x}"))
        self.assertIn("tls", [p["root"]["kind"] for p in report["paths"]])
        self.assertEqual([w for w in self.lldb.json_of("heap leaks --json")["warnings"] if "fs_base" in w], [])


class LaunchedProcessTests(PluginTestCase):
    """leak_shapes launched under LLDB, stopped before its leaks exist and again after them."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        directory = work_dir()
        ledger_file = os.path.join(directory, "lldb-launched.ledger")
        if os.path.exists(ledger_file):
            os.remove(ledger_file)
        output = os.path.join(directory, "lldb-launched.out")
        cls.lldb = run_lldb([
            f"target create {leak_fixture_path(FIXTURE)}",
            "breakpoint set -n lose_a_list",          # after the reachable blocks, before any leak
            "breakpoint set -n hold_r15_and_finish",  # every block made, the ledger written
            f"process launch -E HEAPSCOPE_LEDGER={ledger_file} -i /dev/null -o {output} -e {output}",
            "heap leaks --json",
            "continue",
            "heap blocks --state leaked --json",
            retainers_command("g_table[1]"),
            retainers_command("'(char *)g_table[1] + 8'"),  # for LLDB's expression evaluator
            "heap describe &g_table",  # an address, but of no heap block: a clear error
        ])
        cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)

    def test_no_leak_before_the_leaks_are_made(self):
        totals = self.lldb.json_of("heap leaks --json")["totals"]
        self.assertEqual((totals["blocks"], totals["bytes"]), (0, 0))

    def test_after_continue_the_answers_follow_the_process(self):
        expected = {e.address for e in self.expectations if e.verdict == "leaked"}
        self.assertTrue(expected)
        self.assertEqual(leaked_addresses(self.lldb.json_of("heap blocks --state leaked --json")), expected)

    def test_retainers_of_an_expression_in_the_stopped_frame(self):
        report = self.lldb.json_of(retainers_command("g_table[1]"))
        self.assertEqual(report["verdict"], "reachable")
        self.assertIn(report["target"]["address"], {e.address for e in self.expectations if e.tag == "global"})
        self.assertTrue(any(p["root"]["kind"] == "global" and "g_table" in p["root"]["label"] for p in report["paths"]),
                        report["paths"])
        inside = self.lldb.json_of(retainers_command("'(char *)g_table[1] + 8'"))
        self.assertEqual(inside["query"], report["target"]["address"] + 8)
        self.assertEqual(inside["target"], report["target"], "an address inside the block names the block")

    def test_an_address_outside_the_heap_is_a_command_error(self):
        self.assertEqual(self.lldb.output_of("heap describe &g_table"), "")
        self.assertIn("error: heap describe:", self.lldb.stderr)
        self.assertIn("not in any heap block", self.lldb.stderr)


class CommandTests(PluginTestCase):
    """What works without a process, and what must fail clearly."""

    def test_no_process_is_a_clear_error_and_lldb_exits_normally(self):
        run = run_lldb(["heap leaks --help", "heap leaks"])
        self.assertIn("Usage: heap leaks", run.output_of("heap leaks --help"), "help needs no process")
        self.assertIn("error: heap: no process; load a core (target create --core) or run/attach first", run.stderr)
        self.assertIn(run.returncode, (0, 1), f"lldb ended by a signal or crashed:\n{run.stderr[-2000:]}")

    def test_help_heap_lists_every_command_of_the_table_once(self):
        run = run_lldb(["help heap", "help heap retainers", "help heap fragmentation"])
        text = run.output_of("help heap")
        own_part, _, lldb_part = text.partition("The following subcommands are supported:")
        self.assertTrue(lldb_part, text)
        lldb_commands = [line.split()[0] for line in lldb_part.splitlines() if " -- " in line]
        self.assertEqual(len(lldb_commands), len(set(lldb_commands)), lldb_part)
        self.assertTrue({"summary", "blocks", "leaks", "retainers", "refs", "describe", "histogram"} <= set(lldb_commands))
        # Listed once: LLDB's list is the only one; the text before it names no command in a list of its own.
        for command in lldb_commands:
            self.assertNotRegex(own_part, rf"(?m)^\s+{command}\s{{2,}}\S", own_part)
        retainers_help = run.output_of("help heap retainers")
        self.assertIn("ADDR", retainers_help)
        self.assertIn("--paths", retainers_help)

    def test_help_heap_command_keeps_the_option_columns(self):
        run = run_lldb(["help heap fragmentation", "help heap blocks"])
        for command in ("help heap fragmentation", "help heap blocks"):
            lines = run.output_of(command).splitlines()
            options = [line for line in lines if re.match(r"^  -", line)]
            self.assertGreater(len(options), 3, lines)
            column = min(re.match(r"^  \S.*?  +(?=\S)", line).end() for line in options if re.match(r"^  \S.*?  +\S", line))
            in_options = False
            for line in lines:
                if line.startswith("OPTIONS:") or line.startswith("Options:"):
                    in_options = True
                    continue
                if not in_options or not line.strip():
                    continue
                self.assertLessEqual(len(line), 80, line)
                if not line.startswith("  -"):
                    # The rest of a wrapped description stays in the description column.
                    self.assertGreaterEqual(len(line) - len(line.lstrip()), column, f"{command}:\n" + "\n".join(lines))

    def test_a_core_with_the_wrong_or_no_executable_says_what_lldb_lacks(self):
        capture = capture_leak_fixture(FIXTURE)
        other_program = leak_fixture_path("all_reachable")
        moved_away_core, _ = capture_moved_away()  # its executable is gone: LLDB finds none
        for name, create in (("wrong executable", f"target create {other_program} --core {capture.core}"),
                             ("missing executable", f"target create --core {moved_away_core}")):
            with self.subTest(name):
                run = run_lldb([create, "heap leaks"])
                errors = [line for line in run.stderr.splitlines() if line.startswith("error: heap leaks:")]
                self.assertEqual(len(errors), 1, run.stderr[-2000:])
                message = errors[0]
                self.assertIn("LLDB loaded no shared libraries for this core", message)
                self.assertIn("target create /path/to/PROGRAM --core CORE", message)
                self.assertIn("image search-paths", message)
                # The cause comes first, before what the heap walk could not find.
                self.assertLess(message.index("LLDB loaded no shared libraries"), message.find("libc") if "libc" in message
                                else len(message))

    def test_a_bad_expression_is_a_command_error(self):
        capture = capture_leak_fixture(FIXTURE)
        run = run_lldb([f"target create {capture.executable} --core {capture.core}", "heap retainers no_such_thing"])
        self.assertIn("error: heap retainers: cannot evaluate 'no_such_thing'", run.stderr)
        self.assertIn("no_such_thing", run.stderr.splitlines()[-1])


if __name__ == "__main__":
    unittest.main()
