"""debuginfod: what a stripped program's core lacks, fetched by build-id from a real `debuginfod` server
(Debian's package) started on 127.0.0.1 for these tests.

- typed_c_stripped's core with DEBUGINFOD_URLS at a server holding only typed_c's split debug file and a
  fresh DEBUGINFOD_CACHE_PATH: `summary`'s typed line and the retainer paths' field names are those of the
  unstripped typed_c (the same core read with --exe typed_c), `summary --json` says the symbols and DWARF
  came from debuginfod, and a second run takes the file from the cache without a request (the server's
  /metrics count requests); a progress line shows when stderr is a terminal; --no-debuginfod asks nothing.
- A copy of typed_c_stripped run from a scratch directory and removed after its core was taken: the core
  is analysed with the executable fetched by build-id (and its debug file after it).
- --sysroot DIR: the module files under DIR are used, and one of another build is refused with a warning.
- DEBUGINFOD_URLS at a loopback port nobody listens on: exactly one warning, and the run takes no longer
  than a few seconds.
- Ctrl-C at a terminal while a download from a server that never answers shows its "fetching" line: the
  download stops at once (debug file or executable), the line is erased, and heapscope exits with 130.
- The GDB frontend fetches through the same path, and `set debuginfod enabled off` turns it off; so does
  the LLDB plugin, with `symbols.enable-external-lookup false` as its off switch and
  target.debug-file-search-paths as debug directories.
- `summary` gives a module without DWARF the apt command for its package's debug files.
"""

import json
import os
import pty
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from heapscope_e2e import (Capture, capture_fixture, capture_program, environment, fixture_path, heapscope_json,
                            parse_ledger, run_heapscope, work_dir)
from lldb_session import require_lldb_and_gdb, run_lldb
from pty_driver import PtyProgram
from test_gdb import run_gdb

SERVER_START_SECONDS = 60
# A run against a server that does not answer: the walk of typed_c's heap takes about a second; a client
# that waited for each module, or for libdebuginfod's 90-second default timeout, would take far longer.
UNREACHABLE_RUN_SECONDS = 30
TYPED_LINE = re.compile(r"^Typed:.*$", re.MULTILINE)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DebuginfodServer:
    """`debuginfod -F DIR` on a free loopback port, with its database and log in `scratch`; started, and
    waited for until it has indexed DIR's files."""

    def __init__(self, directory, scratch, expected_files):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(scratch, "debuginfod.log")
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            ["debuginfod", "-v", "-F", directory, "-p", str(self.port), "-d", os.path.join(scratch, "index.sqlite"),
             "-t", "0", "-g", "0"],
            stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_indexed(expected_files)
        except BaseException:
            self.stop()
            raise

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as response:
            text = response.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def requests(self, kind):
        """Requests for build-id lookups of `kind` ("debuginfo", "executable") so far."""
        return self.metrics().get(f'http_requests_total{{type="{kind}"}}', 0)

    def _wait_until_indexed(self, expected_files):
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"debuginfod exited with {self.process.returncode}: {self.log()}")
            try:
                m = self.metrics()
                if (m.get("ready") == 1 and m.get('thread_work_total{role="traverse"}', 0) >= 1
                        and m.get('thread_work_pending{role="scan"}', 1) == 0
                        and m.get('thread_busy{role="scan"}', 1) == 0
                        and m.get('scanned_files_total{source="file"}', 0) >= expected_files):
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.2)
        raise RuntimeError(f"debuginfod did not index its {expected_files} files in {SERVER_START_SECONDS} s: "
                           f"{self.log()}")

    def log(self):
        self._log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def capture_stripped():
    executable = fixture_path("typed_c_stripped")
    core, ledger_file = capture_program("typed_c_stripped", executable)
    return Capture("typed_c_stripped", executable, core, parse_ledger(ledger_file))


def typed_line(test, summary_text):
    match = TYPED_LINE.search(summary_text)
    test.assertIsNotNone(match, f"`summary` prints a Typed: line:\n{summary_text}")
    return match.group(0)


def module_named(test, summary, name):
    (module,) = [m for m in summary["modules"] if os.path.basename(m["path"]) == name]
    return module


def debuginfod_warnings(warnings):
    return [w for w in warnings if "debuginfod" in w]


class Scratch:
    """A fresh directory under the work directory, removed at the end."""

    def __init__(self, name):
        self.path = tempfile.mkdtemp(prefix=name + "-", dir=work_dir())

    def sub(self, name):
        path = os.path.join(self.path, name)
        os.makedirs(path, exist_ok=True)
        return path

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


class ServedFiles(unittest.TestCase):
    """A scratch directory and a server for a test class: start_server(files) serves copies of `files`,
    with a fresh cache in cls.env; both go at the end."""

    @classmethod
    def start_server(cls, name, files):
        cls.scratch = Scratch(name)
        served = cls.scratch.sub("served")
        for source, served_name in files:
            shutil.copy(source, os.path.join(served, served_name))
        cls.server = DebuginfodServer(served, cls.scratch.path, expected_files=len(files))
        cls.env = {"DEBUGINFOD_URLS": cls.server.url, "DEBUGINFOD_CACHE_PATH": cls.scratch.sub("cache")}

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.scratch.remove()


def split_debug_file():
    return os.path.join(fixture_path("typed_c-debug"), "typed_c.debug"), "typed_c.debug"


class DebugFileFromServer(ServedFiles):
    """The stripped program's DWARF comes from the server; the result is the unstripped program's."""

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_stripped()
        cls.start_server("debuginfod-debug", [split_debug_file()])
        cls.requests_before = cls.server.requests("debuginfo")
        cls.first = run_heapscope("summary", cls.capture.core, "--names", env=cls.env)
        cls.requests_after_first = cls.server.requests("debuginfo")
        cls.second = run_heapscope("summary", cls.capture.core, "--names", env=cls.env)
        cls.requests_after_second = cls.server.requests("debuginfo")
        # The same core with the unstripped program (same build-id) in place of the stripped one.
        cls.unstripped = run_heapscope("summary", cls.capture.core, "--names", "--exe", fixture_path("typed_c"),
                                       "--no-debuginfod", env=cls.env)

    def test_the_program_has_no_dwarf_and_no_local_debug_file(self):
        sections = subprocess.run(["readelf", "-S", self.capture.executable], capture_output=True, text=True,
                                  check=True).stdout
        self.assertNotIn(".debug_info", sections)
        alone = heapscope_json("summary", self.capture.core, "--no-debuginfod", env=self.env)
        self.assertEqual(module_named(self, alone, "typed_c_stripped")["dwarf_source"], "none")
        self.assertIn("DWARF", module_named(self, alone, "typed_c_stripped")["missing"])

    def test_the_typed_share_is_the_unstripped_programs(self):
        for run in (self.first, self.second, self.unstripped):
            self.assertEqual(run.returncode, 0, run.stderr)
        expected = typed_line(self, self.unstripped.stdout)
        self.assertEqual(typed_line(self, self.first.stdout), expected)
        self.assertEqual(typed_line(self, self.second.stdout), expected)
        alone = run_heapscope("summary", self.capture.core, "--names", "--no-debuginfod", env=self.env)
        self.assertNotEqual(typed_line(self, alone.stdout), expected, "without the debug file fewer bytes are typed")

    def test_summary_says_the_symbols_and_dwarf_came_from_debuginfod(self):
        summary = heapscope_json("summary", self.capture.core, env=self.env)
        module = module_named(self, summary, "typed_c_stripped")
        self.assertEqual(module["symtab_source"], "debuginfod")
        self.assertEqual(module["dwarf_source"], "debuginfod")
        self.assertTrue(module["debug_file"].startswith(self.env["DEBUGINFOD_CACHE_PATH"]), module)
        self.assertEqual(module["missing"], [])
        self.assertEqual(module["file"]["origin"], "path")
        self.assertRegex(self.first.stdout, r"typed_c_stripped  \[symbols: debuginfod, DWARF: debuginfod\]")

    def test_the_retainer_paths_name_the_unstripped_programs_fields(self):
        ledger = self.capture.ledger
        nodes = [a for a in ledger.live if a.how == "node"]
        entries = [a for a in ledger.live if a.how == "entry"]
        records = [a for a in ledger.live if a.how == "record[]"]
        for address in (nodes[2].address, entries[-1].address, records[0].address):
            fetched = heapscope_json("retainers", self.capture.core, hex(address), "--paths", "5", env=self.env)
            unstripped = heapscope_json("retainers", self.capture.core, hex(address), "--paths", "5",
                                        "--exe", fixture_path("typed_c"), "--no-debuginfod", env=self.env)
            names = field_names(fetched)
            self.assertEqual(names, field_names(unstripped))
            self.assertTrue(any(field for path in names for field in path[1:]), f"fields are named: {names}")

    def test_the_second_run_takes_the_file_from_the_cache_without_a_request(self):
        self.assertEqual(self.requests_after_first - self.requests_before, 1, self.server.log())
        self.assertEqual(self.requests_after_second, self.requests_after_first, self.server.log())

    def test_no_debuginfod_sends_no_request(self):
        before = self.server.requests("debuginfo")
        env = dict(self.env, DEBUGINFOD_CACHE_PATH=self.scratch.sub("cache-unused"))
        summary = heapscope_json("summary", self.capture.core, "--no-debuginfod", env=env)
        self.assertEqual(self.server.requests("debuginfo"), before)
        self.assertEqual(module_named(self, summary, "typed_c_stripped")["dwarf_source"], "none")

    def test_a_progress_line_shows_on_a_terminal(self):
        env = dict(os.environ, **dict(self.env, DEBUGINFOD_CACHE_PATH=self.scratch.sub("cache-terminal")))
        primary, secondary = pty.openpty()
        try:
            process = subprocess.Popen([os.environ["HEAPSCOPE"], "summary", self.capture.core], env=env,
                                       stdout=subprocess.DEVNULL, stderr=secondary)
            os.close(secondary)
            output = b""
            while True:
                try:
                    chunk = os.read(primary, 4096)
                except OSError:  # the terminal's other end closed: heapscope has exited
                    break
                if not chunk:
                    break
                output += chunk
            self.assertEqual(process.wait(timeout=60), 0)
        finally:
            os.close(primary)
        text = output.decode(errors="replace")
        self.assertIn(f"fetching the debug info of typed_c_stripped from {self.server.url}", text)
        piped = run_heapscope("summary", self.capture.core,
                              env=dict(self.env, DEBUGINFOD_CACHE_PATH=self.scratch.sub("cache-piped")))
        self.assertNotIn("fetching", piped.stderr, "no progress line on a pipe")


def field_names(retainers):
    """Per path: the root's label, its field, then each step's field."""
    return [[p["root"]["label"], p["root"].get("field", "")] + [s.get("field", "") for s in p["steps"]]
            for p in retainers["paths"]]


def capture_program_gone(program_dir):
    """typed_c_stripped's core, run as a copy in `program_dir` that is moved away after the capture: the
    capture, and where the program went (the caller serves it, or removes `program_dir` with it)."""
    program = os.path.join(program_dir, "typed_c_stripped")
    shutil.copy2(fixture_path("typed_c_stripped"), program)
    os.utime(program)  # newer than any earlier capture under this key
    core, ledger_file = capture_program("typed_c_stripped_moved", program)
    moved = program + ".moved-away"
    os.rename(program, moved)
    return Capture("typed_c_stripped_moved", program, core, parse_ledger(ledger_file)), moved


class ExecutableFromServer(ServedFiles):
    """The program is gone from this machine; the server has it (and its debug file)."""

    @classmethod
    def setUpClass(cls):
        program_dir = tempfile.mkdtemp(prefix="debuginfod-program-", dir=work_dir())
        try:
            cls.capture, moved = capture_program_gone(program_dir)
            cls.start_server("debuginfod-exe", [(moved, "typed_c_stripped"), split_debug_file()])
        finally:
            shutil.rmtree(program_dir)  # the program's directory is gone too

    def test_without_the_server_the_program_is_missing(self):
        self.assertFalse(os.path.exists(self.capture.executable))
        summary = heapscope_json("summary", self.capture.core, "--no-debuginfod", env=self.env)
        module = module_named(self, summary, "typed_c_stripped")
        self.assertEqual(module["file"]["origin"], "none")
        self.assertIn("module file", module["missing"])
        self.assertTrue(any("typed_c_stripped cannot be used" in w for w in summary["warnings"]), summary["warnings"])

    def test_the_core_is_analysed_with_the_executable_fetched_by_build_id(self):
        before = self.server.requests("executable")
        summary = heapscope_json("summary", self.capture.core, "--names", env=self.env)
        self.assertEqual(self.server.requests("executable"), before + 1)
        module = module_named(self, summary, "typed_c_stripped")
        self.assertEqual(module["file"]["origin"], "debuginfod")
        self.assertTrue(module["file"]["path"].startswith(self.env["DEBUGINFOD_CACHE_PATH"]), module)
        self.assertEqual(module["dwarf_source"], "debuginfod")
        self.assertEqual(module["missing"], [])
        self.assertFalse([w for w in summary["warnings"] if "typed_c_stripped" in w], summary["warnings"])
        self.assertGreaterEqual(summary["typed"]["bytes_percent"], 90)
        leaks = heapscope_json("leaks", self.capture.core, env=self.env)
        self.assertFalse([w for w in leaks.get("warnings", []) if "cannot be used" in w])


class Sysroot(unittest.TestCase):
    """--sysroot DIR: module files at their recorded paths under DIR; a file there of another build is
    refused for that module alone, with a warning."""

    def test_files_under_the_sysroot_are_used_and_a_mismatch_is_refused(self):
        capture = capture_stripped()
        local = heapscope_json("summary", capture.core, "--no-debuginfod")
        paths = {os.path.basename(m["path"]): m["path"] for m in local["modules"] if m["path"].startswith("/")}
        libc = next(path for name, path in paths.items() if name.startswith("libc.so"))
        loader = next(path for name, path in paths.items() if name.startswith("ld-linux"))
        scratch = Scratch("sysroot")
        try:
            def plant(recorded, source):
                target = scratch.path + recorded
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy(source, target)
                return target
            program = plant(capture.executable, fixture_path("typed_c"))  # same build-id, with its DWARF
            plant(libc, libc)
            wrong_loader = plant(loader, fixture_path("typed_c_stripped"))  # another build
            summary = heapscope_json("summary", capture.core, "--names", "--sysroot", scratch.path + "/", "--no-debuginfod")
            modules = {os.path.basename(m["path"]): m for m in summary["modules"]}
            self.assertEqual(modules["typed_c_stripped"]["file"], {"path": program, "origin": "sysroot"})
            self.assertEqual(modules["typed_c_stripped"]["dwarf_source"], "file")
            self.assertEqual(modules[os.path.basename(libc)]["file"]["origin"], "sysroot")
            self.assertEqual(modules[os.path.basename(loader)]["file"]["origin"], "none")
            self.assertIn("module file", modules[os.path.basename(loader)]["missing"])
            mismatches = [w for w in summary["warnings"] if w.startswith("build-id mismatch")]
            self.assertEqual(len(mismatches), 1, summary["warnings"])
            self.assertIn(wrong_loader, mismatches[0])
            self.assertEqual(summary["typed"], heapscope_json("summary", capture.core, "--names", "--exe", fixture_path("typed_c"),
                                                              "--no-debuginfod")["typed"])
        finally:
            scratch.remove()


class UnreachableServer(unittest.TestCase):
    """Nobody listens at the URL: one warning, and no waiting."""

    def test_one_warning_and_no_hang(self):
        capture = capture_stripped()
        scratch = Scratch("debuginfod-unreachable")
        try:
            env = {"DEBUGINFOD_URLS": f"http://127.0.0.1:{free_port()}", "DEBUGINFOD_CACHE_PATH": scratch.sub("cache")}
            started = time.monotonic()
            # With no local debug directory, the program, libc and ld.so all lack DWARF: three lookups, had
            # the first failure not stopped the rest.
            result = run_heapscope("summary", capture.core, "--debug-dir", scratch.sub("no-debug-files"), "--json",
                                   env=env, timeout=UNREACHABLE_RUN_SECONDS * 4)
            elapsed = time.monotonic() - started
            self.assertEqual(result.returncode, 0, result.stderr)
            summary = json.loads(result.stdout)
            warnings = debuginfod_warnings(summary["warnings"])
            self.assertEqual(len(warnings), 1, summary["warnings"])
            self.assertIn(env["DEBUGINFOD_URLS"], warnings[0])
            self.assertLess(elapsed, UNREACHABLE_RUN_SECONDS)
            without_dwarf = [m for m in summary["modules"] if m["file"]["path"] and m["dwarf_source"] == "none"]
            self.assertGreaterEqual(len(without_dwarf), 3, summary["modules"])
        finally:
            scratch.remove()


class SilentServer:
    """A loopback port that takes connections and never answers: a download from it stalls until
    DEBUGINFOD_TIMEOUT, unless the user stops it."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = []
        threading.Thread(target=self._hold, daemon=True).start()

    def _hold(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed by stop()
                return
            self.connections.append(connection)

    def stop(self):
        self.listener.close()
        for connection in self.connections:
            connection.close()


class CtrlCDuringDownload(unittest.TestCase):
    """Ctrl-C at a terminal while a download stalls ("fetching ..." on the screen): heapscope ends within a
    couple of seconds with 130 and "heapscope: interrupted" on a line of its own, and the fetching line is
    erased — before, the download went on until DEBUGINFOD_TIMEOUT with the line left on the screen. Both
    downloads: a debug file (while the session loads the module's symbols) and the executable (while the
    core is opened, before any session exists)."""

    TIMEOUT_SECONDS = 60  # DEBUGINFOD_TIMEOUT: far longer than the test waits after Ctrl-C
    EXIT_AFTER_CTRL_C_SECONDS = 3

    @classmethod
    def setUpClass(cls):
        cls.scratch = Scratch("debuginfod-ctrl-c")
        cls.server = SilentServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.scratch.remove()

    def interrupt_the_download(self, core, noun):
        env = dict(os.environ, DEBUGINFOD_URLS=self.server.url, DEBUGINFOD_TIMEOUT=str(self.TIMEOUT_SECONDS),
                   DEBUGINFOD_CACHE_PATH=tempfile.mkdtemp(dir=self.scratch.path))
        program = PtyProgram([os.environ["HEAPSCOPE"], "summary", core, "--debug-dir", self.scratch.sub("none")], env)
        try:
            program.expect(f"fetching the {noun} of typed_c_stripped from {self.server.url}", timeout=30)
            interrupted_at = time.monotonic()
            program.interrupt()
            status = program.wait(timeout=self.TIMEOUT_SECONDS)
            elapsed = time.monotonic() - interrupted_at
            screen = [line for line in program.screen_lines() if line]
        finally:
            program.close()
        self.assertEqual(status, 130, screen[-5:])
        self.assertLess(elapsed, self.EXIT_AFTER_CTRL_C_SECONDS)
        self.assertEqual([line for line in screen if "fetching" in line], [], screen[-5:])
        self.assertEqual(screen[-1], "heapscope: interrupted", screen[-5:])

    def test_ctrl_c_stops_fetching_a_debug_file(self):
        self.interrupt_the_download(capture_stripped().core, "debug info")

    def test_ctrl_c_stops_fetching_the_executable(self):
        capture, moved = capture_program_gone(self.scratch.sub("program"))
        os.remove(moved)
        self.interrupt_the_download(capture.core, "file")


def debugger_environment_for(urls, cache):
    """DEBUGINFOD_URLS and DEBUGINFOD_CACHE_PATH for a debugger the helpers start from os.environ."""
    return environment(DEBUGINFOD_URLS=urls, DEBUGINFOD_CACHE_PATH=cache)


class GdbFrontend(ServedFiles):
    """`heap summary` in GDB fetches through the same path; gdb's `set debuginfod enabled off` stops it."""

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_stripped()
        cls.start_server("debuginfod-gdb", [split_debug_file()])

    def gdb_summary(self, cache, *settings):
        """`heap summary --names --json` in gdb -batch after `settings`, with a fresh cache named `cache`. gdb -batch
        answers its own debuginfod question ("ask") with no when it loads the program, so a test that wants
        it on says so."""
        with debugger_environment_for(self.server.url, self.scratch.sub(cache)):
            result = run_gdb([*settings, "heap summary --names --json"], self.capture.executable, self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        start = result.stdout.index('{\n  "command": "summary"')
        return json.JSONDecoder().raw_decode(result.stdout[start:])[0]

    def test_gdb_fetches_the_debug_file(self):
        before = self.server.requests("debuginfo")
        summary = self.gdb_summary("cache-on", "set debuginfod enabled on")
        self.assertEqual(module_named(self, summary, "typed_c_stripped")["dwarf_source"], "debuginfod")
        self.assertGreaterEqual(self.server.requests("debuginfo"), before + 1)
        expected = heapscope_json("summary", self.capture.core, "--names", "--exe", fixture_path("typed_c"),
                                  "--no-debuginfod")
        self.assertEqual(summary["typed"], expected["typed"])

    def test_debuginfod_enabled_off_in_gdb_turns_it_off(self):
        before = self.server.requests("debuginfo")
        summary = self.gdb_summary("cache-off", "set debuginfod enabled off")
        self.assertEqual(module_named(self, summary, "typed_c_stripped")["dwarf_source"], "none")
        self.assertEqual(self.server.requests("debuginfo"), before)


class LldbFrontend(ServedFiles):
    """The LLDB plugin fetches through the same path, and follows LLDB's settings: external lookups off
    keeps it from debuginfod, target.debug-file-search-paths adds debug directories."""

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.capture = capture_stripped()
        cls.start_server("debuginfod-lldb", [split_debug_file()])

    def lldb_summary(self, cache, *settings, urls=None):
        with debugger_environment_for(self.server.url if urls is None else urls, self.scratch.sub(cache)):
            run = run_lldb([*settings, f"target create {self.capture.executable} --core {self.capture.core}",
                            "heap summary --json"])
        return module_named(self, run.json_of("heap summary --json"), "typed_c_stripped")

    def test_lldb_fetches_the_debug_file(self):
        module = self.lldb_summary("cache-on")
        self.assertEqual(module["dwarf_source"], "debuginfod")
        self.assertTrue(module["debug_file"].startswith(self.scratch.sub("cache-on")), module)

    def test_external_lookup_off_keeps_heapscope_from_debuginfod(self):
        module = self.lldb_summary("cache-off", "settings set symbols.enable-external-lookup false")
        self.assertEqual(module["dwarf_source"], "none")
        fetched = [root for root, _, files in os.walk(self.scratch.sub("cache-off")) if "debuginfo" in files]
        self.assertEqual(fetched, [], "nothing was fetched into libdebuginfod's cache")

    def test_debug_file_search_paths_are_debug_directories(self):
        debug_dir = fixture_path("typed_c-debug")
        module = self.lldb_summary("cache-paths", f"settings set target.debug-file-search-paths /nonexistent {debug_dir}",
                                   urls="")
        self.assertEqual(module["dwarf_source"], "build-id")
        self.assertTrue(module["debug_file"].startswith(debug_dir + "/.build-id/"), module)


def hint_from_dpkg(path):
    """The hint for `path` from `dpkg -S` run on it alone: on a merged-/usr system the package may list it
    under /lib rather than /usr/lib (or the other way round), or under the file a symbolic link names."""
    twin = path[len("/usr"):] if path.startswith("/usr/") else "/usr" + path
    for spelling in (path, twin, os.path.realpath(path)):
        found = subprocess.run(["dpkg", "-S", spelling], capture_output=True, text=True).stdout
        owners = [line for line in found.splitlines() if ": " in line and "diversion" not in line]
        if owners:
            package = owners[0].split(": ")[0].split(", ")[0].split(":")[0]
            return "apt install libc6-dbg" if package == "libc6" else f"apt install {package}-dbgsym"
    return ""


class InstallHints(unittest.TestCase):
    """A module without DWARF that a Debian package installed gets the command that installs its DWARF."""

    def test_glibc_points_at_libc6_dbg(self):
        capture = capture_stripped()
        summary = heapscope_json("summary", capture.core, "--no-debug-files", "--no-debuginfod")
        libc = next(m for m in summary["modules"] if os.path.basename(m["path"]).startswith("libc.so"))
        self.assertIn("DWARF", libc["missing"])
        self.assertEqual(libc["install_hint"], "apt install libc6-dbg")
        self.assertEqual(module_named(self, summary, "typed_c_stripped")["install_hint"], "",
                         "no package owns the fixture")
        verbose = run_heapscope("summary", capture.core, "--no-debug-files", "--no-debuginfod", "-v").stdout
        self.assertRegex(verbose, r"missing: (symbol table, )?DWARF — apt install libc6-dbg")
        # Without -v: one line, one command for every package, no line per module.
        text = run_heapscope("summary", capture.core, "--no-debug-files", "--no-debuginfod").stdout
        self.assertNotIn("missing:", text)
        (line,) = [line for line in text.splitlines() if line.startswith("Debug info missing for")]
        self.assertRegex(line, r"apt install( \S+)* libc6-dbg\b")
        self.assertEqual(line.count("apt install"), 1)
        with_debug = heapscope_json("summary", capture.core, "--no-debuginfod")
        libc = next(m for m in with_debug["modules"] if os.path.basename(m["path"]).startswith("libc.so"))
        self.assertEqual((libc["dwarf_source"], libc["missing"], libc["install_hint"]), ("build-id", [], ""))

    def test_other_libraries_point_at_their_dbgsym_package(self):
        capture = capture_fixture("typed_containers")
        summary = heapscope_json("summary", capture.core, "--no-debuginfod")
        (libstdcxx,) = [m for m in summary["modules"] if os.path.basename(m["path"]).startswith("libstdc++.so")]
        self.assertIn("DWARF", libstdcxx["missing"])
        self.assertEqual(libstdcxx["install_hint"], "apt install libstdc++6-dbgsym")

    def test_one_dpkg_run_names_the_packages_dpkg_names_module_by_module(self):
        # dpkg reads its whole database on every run: a `dpkg` first on PATH counts the runs, and the hints
        # must name the packages `dpkg -S` names for each module alone.
        capture = capture_fixture("typed_containers")
        calls = os.path.join(work_dir(), "dpkg-calls.log")
        counting = os.path.join(work_dir(), "counting-dpkg")
        os.makedirs(counting, exist_ok=True)
        with open(os.path.join(counting, "dpkg"), "w", encoding="utf-8") as f:
            f.write(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("dpkg")} "$@"\n')
        os.chmod(os.path.join(counting, "dpkg"), 0o755)
        if os.path.exists(calls):
            os.remove(calls)
        summary = heapscope_json("summary", capture.core, "--no-debug-files", "--no-debuginfod", "--no-cache",
                                 env={"PATH": counting + os.pathsep + os.environ["PATH"]})
        lacking = [m for m in summary["modules"] if "DWARF" in m["missing"]]
        self.assertGreaterEqual(len(lacking), 4, "libc, libm, libgcc_s, libstdc++ and ld.so have no DWARF here")
        with open(calls, encoding="utf-8") as f:
            self.assertEqual(len(f.readlines()), 1, "one dpkg run for all the modules")
        hints = {m["path"]: m["install_hint"] for m in lacking}
        self.assertEqual(hints, {path: hint_from_dpkg(path) for path in hints})
        self.assertIn("apt install libstdc++6-dbgsym", hints.values())


if __name__ == "__main__":
    unittest.main()
