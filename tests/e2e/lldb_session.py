"""LLDB in batch mode with the heapscope plugin, shared by the end-to-end tests: one run's output split by
command, and a live scenario — a parked fixture attached with `lldb -p`, diagnosed, and cored by gdb at the
very stop LLDB saw, so the CLI on that core can be compared with what LLDB said live.

The plugin is found next to the CLI's build directory (build/frontends/lldb/libheapscope_lldb.so), or where
$HEAPSCOPE_LLDB_PLUGIN says."""

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import unittest

from heapscope_e2e import DEBUGGER_ONLY_VARIABLES, build_dir, debugger_environment, work_dir

LLDB = "lldb-16"
GDB = "gdb"
LLDB_TIMEOUT_SECONDS = 180
# How long a fixture may take to print READY, and gdb to write its core.
READY_TIMEOUT_SECONDS = 60
GCORE_TIMEOUT_SECONDS = 120


def plugin_path():
    explicit = os.environ.get("HEAPSCOPE_LLDB_PLUGIN")
    if explicit:
        return explicit
    return os.path.join(build_dir(), "frontends", "lldb", "libheapscope_lldb.so")


def require_lldb_and_gdb():
    """Skips (tools missing) or fails (plugin not built) the calling test class."""
    for tool in (LLDB, GDB):
        if shutil.which(tool) is None:
            raise unittest.SkipTest(f"{tool} is not installed (scripts/install-deps installs it)")
    if not os.path.isfile(plugin_path()):
        raise AssertionError(f"the LLDB plugin is not built: no {plugin_path()}")


class LldbRun:
    """One batch run of lldb-16: its exit status, output, and the output of each command it echoed."""

    def __init__(self, completed):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.sections = []  # [command, output]
        for line in completed.stdout.splitlines(keepends=True):
            if line.startswith("(lldb) "):
                self.sections.append([line[len("(lldb) "):].rstrip("\n"), ""])
            elif self.sections:
                self.sections[-1][1] += line

    def output_of(self, command):
        outputs = [output for echoed, output in self.sections if echoed == command]
        if not outputs:
            raise AssertionError(f"lldb did not run {command!r}:\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}")
        return outputs[0]

    def json_of(self, command):
        output = self.output_of(command)
        try:
            return json.loads(output)
        except json.JSONDecodeError as e:
            raise AssertionError(f"{command!r} printed no JSON ({e}): {output[:500]!r}\nstderr: "
                                 f"{self.stderr[-1000:]}") from None


def run_lldb(commands, lldb_args=(), load_plugin=True):
    """Runs lldb-16 --batch with the plugin loaded first, then `commands` (each one -o). Processes it
    launches do not inherit a sanitizer build's preload (debugger_environment)."""
    unset = f"settings set target.unset-env-vars {' '.join(DEBUGGER_ONLY_VARIABLES)}"
    all_commands = [unset] + ([f"plugin load {plugin_path()}"] if load_plugin else []) + list(commands)
    args = [LLDB, "--batch", "--no-lldbinit", *lldb_args]
    for command in all_commands:
        args += ["-o", command]
    completed = subprocess.run(args, capture_output=True, text=True, timeout=LLDB_TIMEOUT_SECONDS,
                               stdin=subprocess.DEVNULL, env=debugger_environment())
    return LldbRun(completed)


class LiveScenario:
    """A fixture started with its ledger in the work directory, waited for until it prints READY and
    parks, attached with `lldb -p` to run `commands`, then cored by gdb at the same stop: a SIGSTOP sent
    from inside LLDB is still pending when LLDB detaches, so the process stops again before running a
    single instruction. `commands` is a list, or a function of the ledger file's path that returns one (for
    commands naming addresses the fixture wrote there). Attributes: lldb (LldbRun), core, ledger_file. The
    process is killed at the end."""

    def __init__(self, key, executable, commands, env=None):
        directory = work_dir()
        self.ledger_file = os.path.join(directory, f"{key}-live.ledger")
        self.core = os.path.join(directory, f"{key}-live.core")
        if os.path.exists(self.core):
            os.remove(self.core)
        with parked_fixture(executable, self.ledger_file, key, env) as process:
            pid = process.pid
            if callable(commands):
                commands = commands(self.ledger_file)
            self.lldb = run_lldb(list(commands) + [f"script import os, signal; os.kill({pid}, signal.SIGSTOP)",
                                                   "process detach"], lldb_args=["-p", str(pid)])
            gcore = subprocess.run([GDB, "-batch", "-nx", "-p", str(pid), "-ex", f"gcore {self.core}"],
                                   capture_output=True, text=True, timeout=GCORE_TIMEOUT_SECONDS)
            if not os.path.isfile(self.core):
                raise AssertionError(f"gdb wrote no core of pid {pid}: {gcore.stdout[-1000:]} {gcore.stderr[-1000:]}")


@contextlib.contextmanager
def parked_fixture(executable, ledger_file, name, env=None, args=()):
    """The fixture started (with `args`) with its ledger written to `ledger_file` (a stale one removed
    first) and waited for until it prints READY and parks; yields the process, and kills it at the end."""
    if os.path.exists(ledger_file):
        os.remove(ledger_file)
    process = subprocess.Popen([executable, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL,
                               env=dict(os.environ, HEAPSCOPE_LEDGER=ledger_file, **(env or {})))
    try:
        wait_until_ready(process, name)
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def wait_until_ready(process, name):
    # The fixture prints READY once its heap is complete and its ledger written, then parks.
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=READY_TIMEOUT_SECONDS):
            raise AssertionError(f"{name} did not print READY within {READY_TIMEOUT_SECONDS} s")
    line = process.stdout.readline()
    if line.strip() != b"READY":
        raise AssertionError(f"{name} printed {line!r} instead of READY (exit status {process.poll()})")
