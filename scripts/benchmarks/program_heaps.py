"""Real programs' heaps for the benchmark: cores of Debian programs heapscope did not write, at a scale.

- redis: redis-server (linked with jemalloc 5.3) after `DEBUG POPULATE KEYS` (each key a dict entry, a key
  string and a value object: about 3 blocks a key) and `MEMORY PURGE`.
- python: python3 with PYTHONMALLOC=malloc (every object a glibc malloc block) holding a dict of OBJECTS / 5
  entries, each an int key and a tuple of a str and a one-float list (int, tuple, str, list, its item array,
  float: about 5 blocks an entry beyond the small ints).
- pymalloc: the same python3 program under its default allocator: the objects in pymalloc's pools (those
  of up to 512 bytes), the dict's table in malloc's heap.
- swipl: SWI-Prolog (linked with tcmalloc) after asserting CLAUSES facts `fact(I, text_of(I))`.

No program here leaks on purpose, so these cores have no leak record: the bench checks verdicts only on its
generators' cores. A core is reused while its program and this file are older than it."""

import contextlib
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REDIS, REDIS_CLI, PYTHON, SWIPL = "/usr/bin/redis-server", "/usr/bin/redis-cli", "/usr/bin/python3", "/usr/bin/swipl"

# The scale of each kind (the issue's: redis 1.5M keys, python3 20M objects) and its program.
DEFAULT_SCALES = {"redis": 1_500_000, "python": 20_000_000, "pymalloc": 20_000_000, "swipl": 1_000_000}
PROGRAMS = {"redis": REDIS, "python": PYTHON, "pymalloc": PYTHON, "swipl": SWIPL}
ALLOCATORS = {"redis": "jemalloc", "python": "glibc", "pymalloc": "glibc + pymalloc", "swipl": "tcmalloc"}

PYTHON_PROGRAM = """
import sys, time
entries = int(sys.argv[1]) // 5
data = {i: ("key-%d" % i, [float(i)]) for i in range(1000, 1000 + entries)}
print("READY", flush=True)
time.sleep(86400)
"""

SWIPL_PROGRAM = """
:- initialization(main).
text_of(I, T) :- format(atom(T), 'clause number ~w', [I]).
main :-
    forall(between(1, {clauses}, I), (text_of(I, T), assertz(fact(I, T)))),
    garbage_collect,
    format("READY~n"), flush_output,
    repeat, sleep(3600), fail.
"""


def available(kind):
    return os.access(PROGRAMS[kind], os.X_OK) and (kind != "redis" or os.access(REDIS_CLI, os.X_OK))


def take_core(pid, core):
    """The running process's core, written by gdb's gcore (the kernel's core pattern may send cores elsewhere)."""
    partial = core + ".partial"
    result = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-ex", f"gcore {partial}"],
                            capture_output=True, text=True, timeout=1200)
    if result.returncode != 0 or not os.path.isfile(partial):
        sys.exit(f"bench: gdb could not write the core of {pid}:\n{result.stderr[-2000:]}")
    os.replace(partial, core)


@contextlib.contextmanager
def running(command):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_core(core, keys):
    port = free_port()
    command = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--enable-debug-command", "yes", "--logfile", ""]
    cli = lambda *words: subprocess.run([REDIS_CLI, "-p", str(port), *words], capture_output=True, text=True,
                                        timeout=600).stdout.strip()
    with running(command) as server:
        deadline = time.monotonic() + 30
        while cli("PING") != "PONG":
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit("bench: redis-server did not answer PING")
            time.sleep(0.1)
        if cli("DEBUG", "POPULATE", str(keys)) != "OK":
            sys.exit("bench: redis DEBUG POPULATE failed")
        cli("MEMORY", "PURGE")
        take_core(server.pid, core)


def capture_at_ready(core, program_args):
    """A program that prints READY once in the state to capture: scripts/capture-core takes its core."""
    subprocess.check_call([os.path.join(ROOT, "scripts", "capture-core"), "--out", core, "--timeout", "1200", "--"]
                          + program_args)


def python_core(core, objects, allocator="malloc"):
    capture_at_ready(core, ["env", f"PYTHONMALLOC={allocator}", PYTHON, "-c", PYTHON_PROGRAM, str(objects)])


def swipl_core(core, clauses, work):
    program = os.path.join(work, "swipl-bench.pl")
    with open(program, "w", encoding="ascii") as f:
        f.write(SWIPL_PROGRAM.replace("{clauses}", str(clauses)))
    capture_at_ready(core, [SWIPL, program])


def make_program_core(work, kind, scale):
    """The core of program `kind` at `scale` (keys, objects or clauses), reused while newer than the program and
    this file."""
    core = os.path.join(work, f"program-{kind}-{scale}.core")
    newest_input = max(os.path.getmtime(PROGRAMS[kind]), os.path.getmtime(__file__))
    if os.path.exists(core) and os.path.getmtime(core) >= newest_input:
        return core
    t0 = time.time()
    if kind == "redis":
        redis_core(core, scale)
    elif kind == "python":
        python_core(core, scale)
    elif kind == "pymalloc":
        python_core(core, scale, "pymalloc")
    else:
        swipl_core(core, scale, work)
    print(f"  captured {core} ({os.path.getsize(core) / 2**20:.0f} MiB) in {time.time() - t0:.1f} s", flush=True)
    return core
