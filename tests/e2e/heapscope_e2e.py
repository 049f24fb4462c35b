"""Shared helpers for heapscope's end-to-end tests: capture a fixture program's core, read its ledger,
run the heapscope CLI and read its JSON.

ctest runs each tests/e2e/test_*.py with these variables set (tests/CMakeLists.txt):
  HEAPSCOPE             the heapscope CLI
  HEAPSCOPE_FIXTURES    the directory of the built fixture programs (tests/fixtures)
  HEAPSCOPE_SOURCE_DIR  the source tree (for scripts/capture-core)
  HEAPSCOPE_WORK_DIR    a scratch directory for cores; created when missing
and, in a sanitizer build (cmake --preset sanitize):
  HEAPSCOPE_DEBUGGER_PRELOAD  the ASan runtime, preloaded into debuggers that load heapscope's library

A fixture's core and ledger are captured once and kept in the work directory, named after the fixture;
they are captured again when the fixture or the capture script is newer than the core.
"""

import bisect
import contextlib
import dataclasses
import fcntl
import json
import os
import subprocess

USED_STATES = frozenset({"in_use", "mmapped"})
FREE_STATES = frozenset({"free", "tcache", "fastbin", "top"})
ARENA_STATES = ("in_use", "free", "tcache", "fastbin", "top")
MALLINFO2_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                    "fordblks", "keepcost")
# The chunk header in front of every user pointer (prev_size and size), in bytes.
CHUNK_HEADER = 16

CAPTURE_TIMEOUT_SECONDS = 120
HEAPSCOPE_TIMEOUT_SECONDS = 300


def _setting(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the end-to-end tests through ctest "
                           f"(ctest --test-dir build -R e2e), which sets it")
    return value


def heapscope_path():
    return _setting("HEAPSCOPE")


def build_dir():
    """The build tree, from the CLI's place in it (build/frontends/cli/heapscope)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(heapscope_path()))))


def fixture_path(name):
    return os.path.join(_setting("HEAPSCOPE_FIXTURES"), name)


def capture_script_path():
    return os.path.join(_setting("HEAPSCOPE_SOURCE_DIR"), "scripts", "capture-core")


# Variables a sanitizer build's debugger gets and the programs it starts must not: with the ASan runtime
# preloaded a fixture's malloc would be ASan's, not the glibc heap the tests examine.
DEBUGGER_ONLY_VARIABLES = ("LD_PRELOAD", "ASAN_OPTIONS")


def debugger_environment(base=None):
    """The environment for lldb or gdb when they load heapscope's LLDB plugin or C API. Unchanged in a
    normal build. In a sanitizer build the debuggers are not instrumented but the library is, so the ASan
    runtime must come first: LD_PRELOAD it. Leak checking is off there, since what the debugger itself
    holds at exit is not heapscope's (the CLI and unit tests check heapscope's leaks)."""
    env = dict(os.environ if base is None else base)
    preload = env.get("HEAPSCOPE_DEBUGGER_PRELOAD")
    if preload:
        env["LD_PRELOAD"] = preload
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    return env


@contextlib.contextmanager
def environment(**variables):
    """os.environ with `variables` set, for a debugger the helpers start from it; as it was after."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def work_dir():
    path = _setting("HEAPSCOPE_WORK_DIR")
    os.makedirs(path, exist_ok=True)
    return path


# ---- the ledger a fixture writes (tests/fixtures/ledger.h) ----

@dataclasses.dataclass(frozen=True)
class Allocation:
    address: int
    size: int
    how: str = ""


@dataclasses.dataclass
class Ledger:
    pid: int = 0
    mallinfo2: dict = dataclasses.field(default_factory=dict)
    live: list = dataclasses.field(default_factory=list)
    freed: list = dataclasses.field(default_factory=list)
    threads: list = dataclasses.field(default_factory=list)
    damaged: list = dataclasses.field(default_factory=list)  # Allocation(address, 0, finding kind)
    properties: dict = dataclasses.field(default_factory=dict)  # the allocator's own figures, by name

    def freed_and_not_live(self):
        live_addresses = {a.address for a in self.live}
        return [a for a in self.freed if a.address not in live_addresses]


def parse_ledger(path, mallinfo2=True):
    """Reads a ledger file; raises ValueError on anything it does not recognise. `mallinfo2` False: the fixture
    was built against a C library without mallinfo2 (musl), and the ledger has no such line."""
    ledger = Ledger()
    with open(path, encoding="ascii") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            kind = fields[0]
            try:
                if kind == "pid" and len(fields) == 2:
                    ledger.pid = int(fields[1])
                elif kind == "mallinfo2":
                    ledger.mallinfo2 = {name: int(value) for name, value in
                                        (field.split("=", 1) for field in fields[1:])}
                elif kind == "live" and len(fields) == 4:
                    ledger.live.append(Allocation(int(fields[1]), int(fields[2]), fields[3]))
                elif kind == "freed" and len(fields) == 3:
                    ledger.freed.append(Allocation(int(fields[1]), int(fields[2])))
                elif kind == "damaged" and len(fields) == 3:
                    ledger.damaged.append(Allocation(int(fields[1]), 0, fields[2]))
                elif kind == "property" and len(fields) == 3:
                    ledger.properties[fields[1]] = int(fields[2])
                elif kind == "thread" and len(fields) == 2:
                    ledger.threads.append(int(fields[1]))
                else:
                    raise ValueError("unknown record")
            except ValueError as e:
                raise ValueError(f"{path}:{number}: bad ledger line {line.strip()!r} ({e})") from None
    expected_fields = set(MALLINFO2_FIELDS) if mallinfo2 else set()
    if not ledger.pid or set(ledger.mallinfo2) != expected_fields or not ledger.live:
        raise ValueError(f"{path}: incomplete ledger (needs pid, live records and "
                         f"{'all mallinfo2 fields' if mallinfo2 else 'no mallinfo2 line'})")
    return ledger


# ---- capturing a fixture ----

@dataclasses.dataclass(frozen=True)
class Capture:
    fixture: str
    executable: str
    core: str
    ledger: Ledger


_captures = {}


def _is_fresh(core, ledger_file, sources):
    if not (os.path.isfile(core) and os.path.isfile(ledger_file)):
        return False
    captured = min(os.path.getmtime(core), os.path.getmtime(ledger_file))
    return all(os.path.getmtime(source) <= captured for source in sources)


def capture_program(key, executable, extra_sources=(), env=None, args=()):
    """Captures `executable` once into the work directory as <key>.core and <key>.ledger, or reuses them
    while they are newer than the program, `extra_sources` and the capture script. `env` adds variables to
    the program's environment and `args` are its arguments (different ones need a different key). Returns
    both paths."""
    script = capture_script_path()
    if not os.access(executable, os.X_OK):
        raise RuntimeError(f"fixture {executable} is not built")
    directory = work_dir()
    core = os.path.join(directory, key + ".core")
    ledger_file = os.path.join(directory, key + ".ledger")
    # Test scripts may run in parallel (ctest -j): one capture per fixture at a time, and the core and
    # its ledger replaced together.
    with open(os.path.join(directory, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_fresh(core, ledger_file, (executable, script, *extra_sources)):
            partial_core, partial_ledger = core + ".new", ledger_file + ".new"
            result = subprocess.run(
                [script, "--out", partial_core, "--ledger", partial_ledger, "--timeout", "60", "--", executable, *args],
                capture_output=True, text=True, timeout=CAPTURE_TIMEOUT_SECONDS,
                env=dict(os.environ, **(env or {})))
            if result.returncode != 0:
                raise RuntimeError(f"capturing {key} failed (exit {result.returncode}):\n{result.stderr}")
            os.replace(partial_ledger, ledger_file)
            os.replace(partial_core, core)
    return core, ledger_file


class RemovesItsCore:
    """Mixed into a TestCase whose setUpClass writes a core of its own to cls.core: removed after the class
    (a core of a real program is tens of megabytes, and not reused)."""

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.core):
            os.remove(cls.core)


def capture_fixture(name, tunables=""):
    """The core and ledger of fixture `name` (a path under the fixtures' build folder), captured now or
    reused from the work directory; `tunables` run it with GLIBC_TUNABLES set (e.g. "glibc.malloc.hugetlb=2")."""
    key = name.replace(os.sep, "-") + ("-" + tunables.replace("=", "-").replace(":", "_") if tunables else "")
    if key in _captures:
        return _captures[key]
    executable = fixture_path(name)
    core, ledger_file = capture_program(key, executable, env={"GLIBC_TUNABLES": tunables} if tunables else None)
    capture = Capture(name, executable, core, parse_ledger(ledger_file))
    _captures[key] = capture
    return capture


# ---- running heapscope ----

def run_heapscope(*args, timeout=HEAPSCOPE_TIMEOUT_SECONDS, env=None):
    """Runs the CLI; returns the CompletedProcess (text mode) whatever its exit code. `env` adds variables
    to its environment."""
    return subprocess.run([heapscope_path(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env) if env else None)


def heapscope_json(*args, env=None):
    """Runs the CLI with --json and returns the parsed output; fails the test on a non-zero exit."""
    result = run_heapscope(*args, "--json", env=env)
    command_line = " ".join(["heapscope", *map(str, args), "--json"])
    if result.returncode != 0:
        raise AssertionError(f"`{command_line}` exited {result.returncode}: {result.stderr.strip()}")
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"`{command_line}` printed invalid JSON ({e}): {result.stdout[:500]!r}") from None


_json_results = {}


def cached_heapscope_json(*args):
    """heapscope_json, run once per argument list in this process (the walks take a while)."""
    key = tuple(map(str, args))
    if key not in _json_results:
        _json_results[key] = heapscope_json(*args)
    return _json_results[key]


def debug_flags(use_debug_files):
    return [] if use_debug_files else ["--no-debug-files"]


class BlockIndex:
    """Looks blocks of a `blocks --json` list up by user address, or by any address inside the chunk."""

    def __init__(self, blocks):
        self.by_address = {b["address"]: b for b in blocks}
        self._by_chunk = sorted(blocks, key=lambda b: b["chunk"])
        self._chunks = [b["chunk"] for b in self._by_chunk]

    def at(self, address):
        return self.by_address.get(address)

    def containing(self, address):
        index = bisect.bisect_right(self._chunks, address) - 1
        if index < 0:
            return None
        block = self._by_chunk[index]
        return block if address < block["chunk"] + block["chunk_size"] else None
