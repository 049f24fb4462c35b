"""The Python module (frontends/python): `import heapscope` against the CLI's JSON.

ctest runs this file (unittest; pytest runs it as well) with Debian's python3 (HEAPSCOPE_PYTHON: the interpreter the module is built for,
which gdb and LLDB embed) and the build tree's package on PYTHONPATH.

- On leak_shapes' core: Session.run equals `heapscope COMMAND CORE --json` for every command of the table
  (those taking an address given one); blocks() columns equal `blocks --json` (used and leaked, types
  too); referrers, referents, retainers, describe, snapshot and diff equal the commands they stand for;
  errors are heapscope.Error with the CLI's message; the progress callback is called; Ctrl-C during a
  command is a KeyboardInterrupt and the session goes on.
- growing_cache's three cores: diff and evolution over earlier cores equal the CLI's; the allocation_sites
  fixture under jemalloc sampling: each block's site_id is the site `describe` names.
- leak_shapes parked: attach() as a context manager — its leaks are the designed ones, every method equals
  `heapscope attach PID …`, and the process is let go when the block ends, also when it ends with an
  exception.
- Inside gdb -batch and LLDB's `script`: heapscope.current() equals the CLI on the core, and `heapscope
  attach` on the parked fixture the debugger attached to.
"""

import _thread
import json
import os
import subprocess
import sys
import unittest

# A sanitizer build preloads the ASan runtime into this Python for the instrumented module (tests/CMakeLists.txt);
# the fixtures and debuggers this test starts must not inherit it (debuggers get it their own way).
OWN_PRELOAD = os.environ.pop("LD_PRELOAD", None)

from heapscope_e2e import build_dir, debugger_environment, heapscope_json, run_heapscope, work_dir
from lldb_session import LLDB, parked_fixture, plugin_path
from test_leaks import capture_leak_fixture, leak_fixture_path
from test_lldb import comparable, leaked_addresses

# Progress from a command's start (the engine reads this once per process): the tests of the callback
# need lines from commands that take well under a second on a fixture's core.
os.environ["HEAPSCOPE_PROGRESS_DELAY_MS"] = "0"

try:
    import heapscope
except ImportError as e:  # a test of the module must not skip for want of it
    raise AssertionError(f"import heapscope failed ({e}): run through ctest, which puts the build's package on "
                         f"PYTHONPATH and uses {os.environ.get('HEAPSCOPE_PYTHON', 'Debian python3')}") from None

FIXTURE = "leak_shapes"
# Commands that need more than the core: an address, earlier cores, a name, or a file to write.
ADDRESS_COMMANDS = ("retainers", "refs", "describe")
SKIPPED_COMMANDS = ("snapshot", "diff", "evolution", "report")
DEBUGGER_TIMEOUT_SECONDS = 300


def python_path():
    return os.path.dirname(os.path.dirname(heapscope.__file__))


def without_volatile(report):
    """The report without what depends on the run (the warnings name the image source)."""
    return comparable(report)


class OnACore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(FIXTURE)
        cls.session = heapscope.open(cls.capture.core, cache=False)
        cls.kept = next(e.address for e in cls.capture.expectations if e.verdict == "reachable")

    @classmethod
    def tearDownClass(cls):
        cls.session.close()

    def cli(self, *args):
        return heapscope_json(args[0], self.capture.core, *args[1:])

    def test_run_equals_the_cli_for_every_command(self):
        for name in heapscope.commands():
            if name in SKIPPED_COMMANDS:
                continue
            args = [name, hex(self.kept)] if name in ADDRESS_COMMANDS else [name]
            with self.subTest(command=name):
                self.assertEqual(without_volatile(self.session.run(" ".join(args))), without_volatile(self.cli(*args)))

    def test_run_takes_options_and_words(self):
        self.assertEqual(without_volatile(self.session.run(["top", "-n", "3", "--by", "type"])),
                         without_volatile(self.cli("top", "-n", "3", "--by", "type")))
        self.assertIn("Leaked", self.session.run("leaks --format text"))
        self.assertEqual(without_volatile(self.session.run("summary --json")), without_volatile(self.cli("summary")))
        self.assertEqual(without_volatile(self.session.run("summary --format=json")), without_volatile(self.cli("summary")))
        page = os.path.join(work_dir(), "python-api-leaks.html")
        self.assertIn(page, self.session.run(["leaks", "-o", page]))
        self.assertTrue(os.path.getsize(page) > 0)
        self.assertIn("--examples", self.session.run("leaks --help"))

    def test_blocks_columns_equal_the_clis_blocks(self):
        for state in ("used", "leaked", "all"):
            with self.subTest(state=state):
                blocks = self.session.blocks(state=state)
                listed = self.cli("blocks", "--state", state)["blocks"]
                self.assertEqual(len(blocks), len(listed))
                self.assertEqual(blocks.address.tolist(), [b["address"] for b in listed])
                self.assertEqual(blocks.size.tolist(), [b["usable_size"] for b in listed])
                self.assertEqual(blocks.chunk_size.tolist(), [b["chunk_size"] for b in listed])
                self.assertEqual([blocks.state_names[s] for s in blocks.state], [b["state"] for b in listed])
                names = [blocks.types[t] for t in blocks.type_id]
                self.assertEqual([n for n, b in zip(names, listed) if "type" in b and n],
                                 [b["type"] for b in listed if "type" in b and not b["type"].startswith("unknown (")])
                self.assertEqual(blocks.site_id.tolist(), [-1] * len(listed))  # leak_shapes is not sampled

    def test_blocks_are_numpy_columns(self):
        import numpy
        blocks = self.session.blocks(min_size=64)
        for column in (blocks.address, blocks.size, blocks.chunk_size, blocks.state, blocks.type_id):
            self.assertIsInstance(column, numpy.ndarray)
            self.assertNotEqual(column.dtype, numpy.dtype(object))
        self.assertTrue((blocks.size >= 64).all())
        self.assertEqual(blocks.address.tolist(),
                         [b["address"] for b in self.cli("blocks", "--min-size", "64")["blocks"]])

    def test_blocks_of_a_type_equal_the_clis(self):
        name = self.cli("histogram")["types"][0]["type"]
        blocks = self.session.blocks(type=name)
        self.assertEqual(blocks.address.tolist(), [b["address"] for b in self.cli("blocks", "--type", name)["blocks"]])
        self.assertTrue(blocks.where_type(name).all())

    def test_leaked_blocks_are_the_designed_ones(self):
        blocks = self.session.blocks(state="leaked")
        expected = {e.address for e in self.capture.expectations if e.verdict == "leaked"}
        self.assertEqual(set(blocks.address.tolist()), expected)
        self.assertEqual(set(blocks.address.tolist()), leaked_addresses(self.cli("blocks", "--state", "leaked")))
        listed = self.cli("blocks", "--state", "leaked")["blocks"]
        self.assertEqual([blocks.verdict_names[v] for v in blocks.verdict], [b["verdict"] for b in listed])
        self.assertEqual(blocks.possibly.tolist(), [b["possibly"] for b in listed])

    def test_block_methods_equal_their_commands(self):
        address = self.kept
        self.assertEqual(without_volatile(self.session.referrers(address)), without_volatile(self.cli("refs", hex(address))))
        self.assertEqual(without_volatile(self.session.retainers(address, paths=3)),
                         without_volatile(self.cli("retainers", hex(address), "--paths", "3")))
        self.assertEqual(without_volatile(self.session.describe(address)), without_volatile(self.cli("describe", hex(address))))
        self.assertEqual(self.session.referents(address),
                         self.cli("describe", hex(address), "--bytes", "0", "--fields", "0")["pointers"])

    def test_snapshots_and_diffs_are_data(self):
        saved = self.session.snapshot("before")
        self.assertEqual(saved["command"], "snapshot")
        diff = self.session.diff(snapshot="before")
        self.assertEqual(without_volatile(diff), without_volatile(self.session.run("snapshot diff before")))
        earlier = self.session.diff(core=self.capture.core)
        cli = heapscope_json("diff", self.capture.core, self.capture.core)
        self.assertEqual(without_volatile(earlier), without_volatile(cli))

    def test_errors_are_exceptions_with_the_clis_message(self):
        cli = run_heapscope("describe", self.capture.core, "0x10")
        self.assertEqual(cli.returncode, 1)
        with self.assertRaises(heapscope.Error) as raised:
            self.session.describe(0x10)
        self.assertIn(str(raised.exception), cli.stderr)
        with self.assertRaises(heapscope.Error):
            self.session.blocks(state="nonsense")
        with self.assertRaises(heapscope.Error):
            self.session.run("leak")
        with self.assertRaises(heapscope.Error) as missing:
            heapscope.open(os.path.join(work_dir(), "no-such.core"))
        self.assertIn("no-such.core", str(missing.exception))
        self.assertIsInstance(missing.exception, RuntimeError)
        not_a_core = os.path.join(work_dir(), "python-api-not-a-core.txt")
        with open(not_a_core, "w", encoding="utf-8") as f:
            f.write("not a core\n" * 100)
        cli = run_heapscope("summary", not_a_core)
        with self.assertRaises(heapscope.Error) as refused:
            heapscope.open(not_a_core)
        self.assertIn(str(refused.exception), cli.stderr)
        with self.assertRaises(heapscope.Error):
            heapscope.open(self.capture.core, debug_dirs=["/nonexistent"], leak_check_heuristics="sideways")

    def test_progress_reaches_the_callback(self):
        seen = []
        with heapscope.open(self.capture.core, cache=False) as session:
            report = session.run("top", progress=lambda line, fraction, done: seen.append((line, fraction, done)))
        self.assertEqual(without_volatile(report), without_volatile(self.cli("top")))
        self.assertTrue(any(line and line.startswith("heapscope: ") for line, _, done in seen if not done), seen)
        self.assertEqual(seen[-1], (None, None, True))

    def test_ctrl_c_is_a_keyboard_interrupt_and_the_session_goes_on(self):
        pressed = []

        def press_ctrl_c(_line, _fraction, done):
            if not done and not pressed:  # while the command runs
                pressed.append(True)
                _thread.interrupt_main()  # what SIGINT does: Python's handler marks KeyboardInterrupt pending

        with heapscope.open(self.capture.core, cache=False) as session:
            with self.assertRaises(KeyboardInterrupt):
                session.run("top", progress=press_ctrl_c)
            self.assertEqual(pressed, [True])
            self.assertEqual(without_volatile(session.run("top")), without_volatile(self.cli("top")))

    def test_the_api_reference_is_the_docstrings(self):
        script = os.path.join(os.environ["HEAPSCOPE_SOURCE_DIR"], "scripts", "python-api-docs")
        env = dict(os.environ, LD_PRELOAD=OWN_PRELOAD) if OWN_PRELOAD else None  # it imports the module too
        checked = subprocess.run([sys.executable, script, build_dir(), "--check"], capture_output=True, text=True,
                                 env=env)
        self.assertEqual(checked.returncode, 0, checked.stderr)

    def test_a_closed_session_says_so(self):
        session = heapscope.open(self.capture.core, cache=False)
        session.close()
        with self.assertRaises(heapscope.Error):
            session.run("summary")


class OverTime(unittest.TestCase):
    """growing_cache cored at its three stops (test_snapshots' capture): the commands over earlier cores,
    run on a session of the last one, equal the CLI's, which lists the current core last."""

    @classmethod
    def setUpClass(cls):
        from test_snapshots import capture_stops
        cls.cores, _ = capture_stops("python-api-stops")

    def test_diff_and_evolution_equal_the_clis(self):
        first, second, last = self.cores
        with heapscope.open(last, cache=False) as session:
            self.assertEqual(without_volatile(session.diff(core=first, count=5)),
                             without_volatile(heapscope_json("diff", first, last, "-n", "5")))
            self.assertEqual(without_volatile(session.run(["evolution", first, second])),
                             without_volatile(heapscope_json("evolution", first, second, last)))
            self.assertEqual(without_volatile(session.run(["diff", second, "--by", "type"])),
                             without_volatile(heapscope_json("diff", second, last, "--by", "type")))


class WithAllocationSites(unittest.TestCase):
    """The allocation_sites fixture under jemalloc sampling every allocation (test_allocation_sites'
    capture): each block's site_id is the site `describe` says it was allocated at, and its label that
    site's innermost frame of the program."""

    @classmethod
    def setUpClass(cls):
        from test_allocation_sites import capture_with_dump, require_fixture
        require_fixture()
        _, cls.core, _, _ = capture_with_dump()
        cls.session = heapscope.open(cls.core, cache=False)

    @classmethod
    def tearDownClass(cls):
        cls.session.close()

    def test_site_ids_are_describes_sites(self):
        import numpy
        blocks = self.session.blocks(min_size=1000)
        sampled = numpy.flatnonzero(blocks.site_id >= 0)
        unsampled = numpy.flatnonzero(blocks.site_id < 0)
        self.assertGreater(len(sampled), 10)
        for k in list(sampled[:: max(1, len(sampled) // 12)]) + list(unsampled[:3]):
            address = int(blocks.address[k])
            with self.subTest(address=hex(address)):
                described = heapscope_json("describe", self.core, hex(address))
                self.assertEqual(without_volatile(self.session.describe(address)), without_volatile(described))
                site = described["allocated_at"]
                if blocks.site_id[k] < 0:
                    self.assertIsNone(site)
                    continue
                self.assertEqual(site["site"], blocks.site_id[k])
                self.assertEqual(blocks.sites[blocks.site_id[k]], site["frames"][0]["text"])


def tracer_of(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("TracerPid:"))


class Attached(unittest.TestCase):
    def test_attach_stops_analyses_and_always_detaches(self):
        ledger_file = os.path.join(work_dir(), "python-attach.ledger")
        with parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE) as process:
            from test_leaks import parse_leak_ledger
            _, expectations = parse_leak_ledger(ledger_file)
            kept = next(e.address for e in expectations if e.verdict == "reachable")
            with heapscope.attach(process.pid) as session:
                self.assertEqual(tracer_of(process.pid), os.getpid())
                blocks = session.blocks()
                leaked = set(session.blocks(state="leaked").address.tolist())
                reports = {"leaks": session.run("leaks"), "top": session.run("top -n 5"),
                           "refs": session.referrers(kept), "retainers": session.retainers(kept, paths=3),
                           "describe": session.describe(kept)}
                referents = session.referents(kept)
            self.assertEqual(tracer_of(process.pid), 0)
            self.assertEqual(leaked, {e.address for e in expectations if e.verdict == "leaked"})
            # The parked fixture's heap does not change: heapscope attach sees what the session saw.
            for command, args in (("leaks", ()), ("top", ("-n", "5")), ("refs", (hex(kept),)),
                                  ("retainers", (hex(kept), "--paths", "3")), ("describe", (hex(kept),))):
                with self.subTest(command=command):
                    cli = heapscope_json("attach", process.pid, command, *args)
                    self.assertEqual(without_volatile(reports[command]), without_volatile(cli))
            cli_blocks = heapscope_json("attach", process.pid, "blocks")["blocks"]
            self.assertEqual(blocks.address.tolist(), [b["address"] for b in cli_blocks])
            self.assertEqual([blocks.state_names[s] for s in blocks.state], [b["state"] for b in cli_blocks])
            self.assertEqual(referents, heapscope_json("attach", process.pid, "describe", hex(kept), "--bytes", "0",
                                                       "--fields", "0")["pointers"])
            with self.assertRaises(ZeroDivisionError):
                with heapscope.attach(process.pid):
                    raise ZeroDivisionError()
            self.assertEqual(tracer_of(process.pid), 0)
            self.assertIsNone(process.poll())  # it runs on

    def test_attach_to_no_process_is_an_error(self):
        with self.assertRaises(heapscope.Error):
            heapscope.attach(2 ** 22 + 1)


# After the debugger changed the process (a register set, a function called in it): the session kept from
# before refuses to answer for the new state.
STALE_CHECK = ("import heapscope, json\ntry:\n    kept.run('leaks')\nexcept heapscope.Error as e:\n"
               "    print('PY-STALE ' + json.dumps(str(e)))")

# What the debuggers run: the core's leaks, used blocks and the retainers of a kept block, as JSON lines.
DEBUGGER_SCRIPT = """
import json, heapscope
s = heapscope.current()
b = s.blocks()
print("PY-LEAKS " + json.dumps(s.run("leaks")))
print("PY-BLOCKS " + json.dumps([b.address.tolist(), b.size.tolist()]))
print("PY-RETAINERS " + json.dumps(s.retainers({kept}, paths=3)))
print("PY-SAME " + json.dumps(s is heapscope.current()))
kept = s
"""


def tagged_json(output, tag):
    for line in output.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise AssertionError(f"no {tag} line in:\n{output[-3000:]}")


class InsideDebuggers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(FIXTURE)
        cls.kept = next(e.address for e in cls.capture.expectations if e.verdict == "reachable")
        cls.script = os.path.join(work_dir(), "python-api-in-debugger.py")
        with open(cls.script, "w", encoding="utf-8") as f:
            f.write(DEBUGGER_SCRIPT.format(kept=cls.kept))

    def environment(self):
        env = debugger_environment()
        env["PYTHONPATH"] = python_path()
        env["HEAPSCOPE_LLDB_PLUGIN"] = plugin_path()
        return env

    def check(self, output):
        cli_blocks = heapscope_json("blocks", self.capture.core)["blocks"]
        self.assertEqual(without_volatile(tagged_json(output, "PY-LEAKS")),
                         without_volatile(heapscope_json("leaks", self.capture.core)))
        self.assertEqual(tagged_json(output, "PY-BLOCKS"),
                         [[b["address"] for b in cli_blocks], [b["usable_size"] for b in cli_blocks]])
        self.assertEqual(without_volatile(tagged_json(output, "PY-RETAINERS")),
                         without_volatile(heapscope_json("retainers", self.capture.core, hex(self.kept), "--paths", "3")))
        self.assertTrue(tagged_json(output, "PY-SAME"))

    def test_in_gdb(self):
        if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):
            raise unittest.SkipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")
        result = subprocess.run(["gdb", "-batch", "-nx", "-ex", "set pagination off", "-ex",
                                 f"python exec(open({self.script!r}).read())", self.capture.executable,
                                 self.capture.core],
                                capture_output=True, text=True, env=self.environment(), timeout=DEBUGGER_TIMEOUT_SECONDS)
        self.check(result.stdout + result.stderr)

    def test_gdb_heap_commands_come_with_it(self):
        if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):
            raise unittest.SkipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")
        result = subprocess.run(["gdb", "-batch", "-nx", "-ex", "python import heapscope; heapscope.current()",
                                 "-ex", "heap leaks --json", self.capture.executable, self.capture.core],
                                capture_output=True, text=True, env=self.environment(), timeout=DEBUGGER_TIMEOUT_SECONDS)
        start = result.stdout.index("{")
        self.assertEqual(without_volatile(json.loads(result.stdout[start:])),
                         without_volatile(heapscope_json("leaks", self.capture.core)))

    def test_in_lldb_script(self):
        result = subprocess.run([LLDB, "--batch", "--no-lldbinit", "-o",
                                 f"target create {self.capture.executable} --core {self.capture.core}",
                                 "-o", "script import heapscope",
                                 "-o", f"script exec(open({self.script!r}).read())"],
                                capture_output=True, text=True, env=self.environment(), timeout=DEBUGGER_TIMEOUT_SECONDS,
                                stdin=subprocess.DEVNULL)
        self.check(result.stdout + result.stderr)

    def check_live(self, run_debugger):
        """heapscope.current() in a debugger attached to the parked fixture, against heapscope attach once the
        debugger has let it go (the parked heap does not change)."""
        ledger_file = os.path.join(work_dir(), "python-debugger-live.ledger")
        with parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE) as process:
            from test_leaks import parse_leak_ledger
            _, expectations = parse_leak_ledger(ledger_file)
            kept = next(e.address for e in expectations if e.verdict == "reachable")
            script = os.path.join(work_dir(), "python-api-in-live-debugger.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(DEBUGGER_SCRIPT.format(kept=kept))
            output = run_debugger(process.pid, script)
            cli_blocks = heapscope_json("attach", process.pid, "blocks")["blocks"]
            self.assertEqual(without_volatile(tagged_json(output, "PY-LEAKS")),
                             without_volatile(heapscope_json("attach", process.pid, "leaks")))
            self.assertEqual(tagged_json(output, "PY-BLOCKS"),
                             [[b["address"] for b in cli_blocks], [b["usable_size"] for b in cli_blocks]])
            self.assertEqual(without_volatile(tagged_json(output, "PY-RETAINERS")),
                             without_volatile(heapscope_json("attach", process.pid, "retainers", hex(kept), "--paths", "3")))
            self.assertEqual(tagged_json(output, "PY-STALE"), "the target has changed since heapscope.current() gave "
                                                               "this session; ask it again")
            self.assertIsNone(process.poll())

    def test_in_gdb_on_a_live_process(self):
        if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):
            raise unittest.SkipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")

        def gdb(pid, script):
            result = subprocess.run(["gdb", "-batch", "-nx", "-ex", "set pagination off", "-p", str(pid), "-ex",
                                     f"python exec(open({script!r}).read())", "-ex", "set var $rax = $rax",
                                     "-ex", f"python exec({STALE_CHECK!r})", "-ex", "detach"],
                                    capture_output=True, text=True, env=self.environment(),
                                    timeout=DEBUGGER_TIMEOUT_SECONDS)
            return result.stdout + result.stderr

        self.check_live(gdb)

    def test_in_lldb_script_on_a_live_process(self):
        def lldb(pid, script):
            result = subprocess.run([LLDB, "--batch", "--no-lldbinit", "-p", str(pid), "-o", "script import heapscope",
                                     "-o", f"script exec(open({script!r}).read())", "-o", "expr (int)getpid()",
                                     "-o", f"script exec({STALE_CHECK!r})", "-o", "process detach"],
                                    capture_output=True, text=True, env=self.environment(),
                                    timeout=DEBUGGER_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
            return result.stdout + result.stderr

        self.check_live(lldb)

    def test_outside_a_debugger_current_is_an_error(self):
        with self.assertRaises(heapscope.Error):
            heapscope.current()


if __name__ == "__main__":
    unittest.main()
