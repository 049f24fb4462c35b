"""Ctrl-C and progress at a terminal, in every frontend, on a live process with millions of blocks (the
benchmark's heap_generator, built as a fixture), so that a command runs for seconds.

- LLDB and GDB at a real terminal (a pty): `heap top` interrupted with Ctrl-C right after the heap walk
  ended, its progress line on the screen, gives the prompt back within 1.5 s with an "interrupted" error
  and the progress line erased from the screen; the debugger still works (an
  expression); the next `heap top` on the same stop does not walk the heap again (HEAPSCOPE_TIMING=1 prints
  each phase computed: no "walk" the second time) and shows a progress line while it runs.
- The CLI at a terminal: SIGINT from Ctrl-C ends `heapscope attach PID top` within 1 s with exit status
  130 and "interrupted", and the process runs on untraced; it ends `heapscope top CORE` (on a core gdb
  wrote of the same process) within 1 s with 130 and "heapscope: interrupted"; either way the progress line
  shown at Ctrl-C is erased from the screen, and the message is on a line of its own; progress appears on a
  terminal's stderr,
  and neither with --json nor when stderr is a pipe.
"""

import os
import re
import shutil
import subprocess
import time
import unittest

from heapscope_e2e import DEBUGGER_ONLY_VARIABLES, debugger_environment, fixture_path, heapscope_path, work_dir
from lldb_session import LLDB, parked_fixture, plugin_path
from pty_driver import PtyProgram
from test_gdb import capi_directory, source_script

# Big enough that `top` runs for seconds after the walk (scan, typing, reachability, dominators); small
# enough that the generator builds it in a few seconds.
BLOCKS = 6000000
LEAK_PERCENT = 10
COMMAND = "top"
# Ctrl-C must give the prompt back within this (the request: within a second; a margin for a busy machine).
PROMPT_AFTER_INTERRUPT_SECONDS = 1.5
CLI_EXIT_AFTER_INTERRUPT_SECONDS = 1.0
LONG_COMMAND_SECONDS = 120
# What heapscope prints with HEAPSCOPE_TIMING=1 when a product's computation ends, and its progress line.
WALK_DONE = r"heapscope: phase walk \d"
PROGRESS_LINE = re.compile(r"heapscope: [a-z ]+ \d{1,3}%")
# The progress line of a phase whose work is counted, or not ("heapscope: roots ...").
ANY_PROGRESS_LINE = r"heapscope: [a-z ]+ (\d{1,3}%|\.\.\.)"


def start_generator(test_class):
    """Starts the generator for a test class (test_class.pid), parked until stop_generator."""
    test_class.generator = parked_fixture(fixture_path("heap_generator"),
                                          os.path.join(work_dir(), "interrupt-generator.ledger"), "heap_generator",
                                          args=[str(BLOCKS), str(LEAK_PERCENT),
                                                os.path.join(work_dir(), "interrupt-generator.leaks")])
    test_class.pid = test_class.generator.__enter__().pid


def stop_generator(test_class):
    test_class.generator.__exit__(None, None, None)


def progress_environment(base):
    env = dict(base)
    # The progress line from a command's start: the second `heap top` at a stop, which reuses the walk, may
    # finish within the default first second on a fast machine, and the line must still be seen.
    env["HEAPSCOPE_PROGRESS_DELAY_MS"] = "0"
    env["TERM"] = "xterm"
    env.pop("NO_COLOR", None)
    return env


def timing_environment(base):
    env = progress_environment(base)
    env["HEAPSCOPE_TIMING"] = "1"
    return env


def assert_progress_erased(test, program):
    """The terminal as the user sees it after Ctrl-C: no progress line left on it."""
    screen = [line for line in program.screen_lines() if line]
    test.assertEqual([line for line in screen if re.search(ANY_PROGRESS_LINE, line)], [], screen[-5:])


def state_of(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return fields["State"].strip(), fields["TracerPid"].strip()


class DebuggerInterruptMixin:
    """The scenario shared by LLDB and GDB; subclasses start the debugger and name its prompt."""

    PROMPT = None

    def start_debugger(self):
        raise NotImplementedError

    def expression_command(self):
        raise NotImplementedError

    def detach_command(self):
        raise NotImplementedError

    def test_ctrl_c_returns_the_prompt_and_keeps_finished_phases(self):
        debugger = self.start_debugger()
        try:
            position = debugger.expect(self.PROMPT, 120).end()
            debugger.send(f"heap {COMMAND}\n")
            position = debugger.expect(WALK_DONE, LONG_COMMAND_SECONDS, position).end()
            position = debugger.expect(ANY_PROGRESS_LINE, LONG_COMMAND_SECONDS, position).end()
            interrupted_at = time.monotonic()
            debugger.interrupt()
            prompt = debugger.expect(self.PROMPT, PROMPT_AFTER_INTERRUPT_SECONDS + 5, position)
            elapsed = time.monotonic() - interrupted_at
            answer = debugger.output[position:prompt.start()]
            self.assertLess(elapsed, PROMPT_AFTER_INTERRUPT_SECONDS, answer)
            self.assertRegex(answer.lower(), "interrupted")
            self.assertNotIn("Traceback", answer)
            self.assertNotIn("Exception ignored", answer)
            self.assertNotRegex(answer, r"Retained|retained by", "an interrupted command printed its report")
            assert_progress_erased(self, debugger)
            position = prompt.end()

            # The debugger still works.
            debugger.send(self.expression_command() + "\n")
            position = debugger.expect(r"= 42\b", 30, position).end()
            position = debugger.expect(self.PROMPT, 30, position).end()

            # The next command on the same stop keeps what was finished: no second heap walk. It shows its
            # progress on the terminal (from its start: HEAPSCOPE_PROGRESS_DELAY_MS), and prints its report.
            debugger.send(f"heap {COMMAND}\n")
            prompt = debugger.expect(self.PROMPT, LONG_COMMAND_SECONDS, position)
            second = debugger.output[position:prompt.start()]
            self.assertNotRegex(second, WALK_DONE, "the heap was walked again after the interrupt")
            self.assertRegex(second, r"heapscope: phase dominators \d", "the interrupted phases were not redone")
            self.assertRegex(second, PROGRESS_LINE, "no progress line on the terminal")
            self.assertNotRegex(second.lower(), r"\binterrupted\b")
            position = prompt.end()
            debugger.send(self.detach_command() + "\n")
            debugger.expect(self.PROMPT, 30, position)
        finally:
            debugger.close()
        # Detached: the process runs on.
        deadline = time.monotonic() + 5
        while state_of(self.pid) != ("S (sleeping)", "0") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(state_of(self.pid), ("S (sleeping)", "0"))


class LldbInterrupt(DebuggerInterruptMixin, unittest.TestCase):
    PROMPT = r"\(lldb\) "

    @classmethod
    def setUpClass(cls):
        if shutil.which(LLDB) is None:
            raise unittest.SkipTest(f"{LLDB} is not installed")
        start_generator(cls)

    @classmethod
    def tearDownClass(cls):
        stop_generator(cls)

    def start_debugger(self):
        unset = f"settings set target.unset-env-vars {' '.join(DEBUGGER_ONLY_VARIABLES)}"
        argv = [LLDB, "--no-lldbinit", "--no-use-colors", "-o", unset, "-o", f"plugin load {plugin_path()}",
                "-p", str(self.pid)]
        return PtyProgram(argv, timing_environment(debugger_environment()))

    def expression_command(self):
        return "expression -- 40 + 2"

    def detach_command(self):
        return "process detach"


class GdbInterrupt(DebuggerInterruptMixin, unittest.TestCase):
    PROMPT = r"\(gdb\) "

    @classmethod
    def setUpClass(cls):
        if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):
            raise unittest.SkipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")
        start_generator(cls)

    @classmethod
    def tearDownClass(cls):
        stop_generator(cls)

    def start_debugger(self):
        env = timing_environment(debugger_environment())
        env["HEAPSCOPE_CAPI"] = os.path.join(capi_directory(), "libheapscope_capi.so")
        argv = ["gdb", "-nx", "-q", "-ex", "set pagination off", "-ex", "set style enabled off",
                "-ex", "set confirm off", "-ex", f"source {source_script()}"]
        for variable in DEBUGGER_ONLY_VARIABLES:
            argv += ["-ex", f"unset environment {variable}"]
        return PtyProgram(argv + ["-p", str(self.pid)], env)

    def expression_command(self):
        return "print 40 + 2"

    def detach_command(self):
        return "detach"


class CliInterruptAndProgress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_generator(cls)

    @classmethod
    def tearDownClass(cls):
        stop_generator(cls)

    def attach_on_terminal(self, *extra):
        return PtyProgram([heapscope_path(), "attach", str(self.pid), COMMAND, *extra],
                          timing_environment(os.environ))

    def interrupt_after_the_walk(self, cli, walk_done=WALK_DONE):
        """Ctrl-C once the walk is done (`walk_done` printed) and a progress line is on the screen; the CLI
        must exit 130 within CLI_EXIT_AFTER_INTERRUPT_SECONDS. Returns where the output after the interrupt
        starts."""
        position = cli.expect(walk_done, LONG_COMMAND_SECONDS).end()
        position = cli.expect(ANY_PROGRESS_LINE, LONG_COMMAND_SECONDS, position).end()
        interrupted_at = time.monotonic()
        cli.interrupt()
        status = cli.wait(CLI_EXIT_AFTER_INTERRUPT_SECONDS + 5)
        elapsed = time.monotonic() - interrupted_at
        self.assertEqual(status, 130, cli.output[-2000:])
        self.assertLess(elapsed, CLI_EXIT_AFTER_INTERRUPT_SECONDS, cli.output[-2000:])
        return position

    def assert_progress_erased(self, cli, message):
        assert_progress_erased(self, cli)
        screen = [line for line in cli.screen_lines() if line]
        self.assertTrue(screen[-1].startswith(message), f"not on a line of its own: {screen[-5:]}")

    def test_ctrl_c_exits_130_and_lets_the_process_go(self):
        cli = self.attach_on_terminal()
        try:
            position = self.interrupt_after_the_walk(cli)
            self.assertRegex(cli.output[position:], "interrupted")
            self.assert_progress_erased(cli, "heapscope: interrupted (Interrupt)")
        finally:
            cli.close()
        deadline = time.monotonic() + 5
        while state_of(self.pid) != ("S (sleeping)", "0") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(state_of(self.pid), ("S (sleeping)", "0"))

    def test_ctrl_c_on_a_core_exits_130(self):
        # The same process's core, written by gdb at a stop: `heapscope top CORE` stops on SIGINT through the
        # session's interrupt check (attach has its own handler, above).
        core = os.path.join(work_dir(), "interrupt-generator.core")
        if os.path.exists(core):
            os.remove(core)
        subprocess.run(["gdb", "-batch", "-nx", "-p", str(self.pid), "-ex", f"gcore {core}"], capture_output=True,
                       timeout=LONG_COMMAND_SECONDS, check=False)
        self.assertTrue(os.path.isfile(core), "gdb wrote no core")
        try:
            # No timing lines: each clears the line it is printed over, which would hide a progress line
            # left behind by the interrupt. The names' progress (top shows theirs, the scan running beside
            # them) says the walk is done.
            cli = PtyProgram([heapscope_path(), COMMAND, core], progress_environment(os.environ))
            try:
                position = self.interrupt_after_the_walk(cli, walk_done=r"heapscope: dwarf types \d{1,3}%")
                self.assertIn("heapscope: interrupted", cli.output[position:])
                self.assertNotIn("Largest retained", cli.output[position:])
                self.assert_progress_erased(cli, "heapscope: interrupted")
            finally:
                cli.close()
        finally:
            os.remove(core)

    def test_progress_on_a_terminal_only(self):
        cli = self.attach_on_terminal()
        try:
            self.assertEqual(cli.wait(LONG_COMMAND_SECONDS), 0, cli.output[-2000:])
            self.assertRegex(cli.output, PROGRESS_LINE)
        finally:
            cli.close()
        cli = self.attach_on_terminal("--json")
        try:
            self.assertEqual(cli.wait(LONG_COMMAND_SECONDS), 0, cli.output[-2000:])
            self.assertRegex(cli.output, r"phase dominators \d", "the command was too short to tell")
            self.assertNotRegex(cli.output, PROGRESS_LINE)
        finally:
            cli.close()
        piped = subprocess.run([heapscope_path(), "attach", str(self.pid), COMMAND], capture_output=True, text=True,
                               timeout=LONG_COMMAND_SECONDS, env=timing_environment(os.environ))
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertRegex(piped.stderr, r"phase dominators \d")
        self.assertNotRegex(piped.stderr, PROGRESS_LINE)


if __name__ == "__main__":
    unittest.main()
