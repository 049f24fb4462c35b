"""Reuse in a debugger: two `heap` commands at one stop of one LLDB or GDB session on a core.

The first command computes the session's products (heap walk, reference graph, verdicts, names); the second
at the same stop reuses them, so it should cost little more than printing. Each command is timed between
two timestamps the debugger's own Python prints (so the debugger's start-up, loading the core and its
symbols are not counted), and with HEAPSCOPE_TIMING=1 the products each command computed are counted
(a product that was reused prints no phase line): markers written to file descriptor 2 between the
commands split heapscope's phase lines by command.
"""
import collections
import os
import re

from measure import CommandFailed, measure

STAMP = re.compile(r"^@@stamp (\w+) ([0-9.]+)$", re.M)

# Seconds of the first and second command, and how many phases (products) each computed.
Reuse = collections.namedtuple("Reuse", "first second first_phases second_phases")


def stamp_python(name):
    """Python for the debugger: prints a timestamp on stdout and a marker on stderr (where phases go)."""
    return (f"import os, time; os.write(2, b'@@mark {name}\\n'); "
            f"print('@@stamp {name} %.6f' % time.time())")


def phases_between(stderr, start, end):
    section = stderr.split(f"@@mark {start}\n", 1)[-1].split(f"@@mark {end}\n", 1)[0]
    return sum(1 for line in section.splitlines() if line.startswith("heapscope: phase"))


def parse_session(out, err):
    stamps = {name: float(value) for name, value in STAMP.findall(out)}
    if set(stamps) != {"t0", "t1", "t2"}:
        raise CommandFailed(f"the debugger printed no timestamps:\n{out[-1500:]}\n{err[-1500:]}")
    return Reuse(stamps["t1"] - stamps["t0"], stamps["t2"] - stamps["t1"],
                 phases_between(err, "t0", "t1"), phases_between(err, "t1", "t2"))


def lldb_session(plugin, program, core, first, second):
    cmd = ["lldb-16", "--batch", "--no-lldbinit", "-o", f"plugin load {plugin}",
           "-o", f"target create {program} --core {core}"]
    for name, command in (("t0", first), ("t1", second), ("t2", None)):
        cmd += ["-o", "script " + stamp_python(name)]
        if command:
            cmd += ["-o", f"heap {command}"]
    return cmd


def gdb_session(script, program, core, first, second):
    cmd = ["gdb", "-batch", "-nx", "-ex", f"source {script}"]
    for name, command in (("t0", first), ("t1", second), ("t2", None)):
        cmd += ["-ex", "python " + stamp_python(name)]
        if command:
            cmd += ["-ex", f"heap {command}"]
    return cmd + [program, core]


def time_reuse(session_cmd, runs):
    """The best first and best second command times over `runs` sessions, with the phase counts of the
    first session (they do not vary)."""
    env = dict(os.environ, HEAPSCOPE_TIMING="1")
    sessions = []
    for _ in range(runs):
        _, out, err = measure(session_cmd, env=env)
        sessions.append(parse_session(out, err))
    return Reuse(min(s.first for s in sessions), min(s.second for s in sessions),
                 sessions[0].first_phases, sessions[0].second_phases)


def frontends(build_dir):
    """(debugger, how to make its session command, the file it loads), for each frontend that is built."""
    found = []
    plugin = os.path.join(build_dir, "frontends", "lldb", "libheapscope_lldb.so")
    script = os.path.join(build_dir, "frontends", "capi", "heapscope_gdb.py")
    for name, make, path in (("LLDB", lldb_session, plugin), ("GDB", gdb_session, script)):
        if os.path.exists(path):
            found.append((name, make, path))
        else:
            print(f"  {name}: {path} is not built (cmake --build build --target heapscope_lldb heapscope_capi "
                  "heapscope_gdb_script); skipped")
    return found


def print_reuse(build_dir, program, core, blocks, first, second, runs):
    print()
    print(f"Reuse at one stop ({blocks:,}-block core, best of {runs} sessions each; times between timestamps "
          f"printed by the debugger's Python; phases: products computed, HEAPSCOPE_TIMING=1):")
    print(f"| debugger | first: heap {first} | phases | second: heap {second} | phases | second / first |")
    print("|---|---|---|---|---|---|")
    for name, make, path in frontends(build_dir):
        try:
            reuse = time_reuse(make(path, program, core, first, second), runs)
        except CommandFailed as failure:
            print(f"| {name} | failed: {failure} | | | | |")
            continue
        print(f"| {name} | {reuse.first:.3f} s | {reuse.first_phases} | {reuse.second:.3f} s | "
              f"{reuse.second_phases} | {reuse.second / reuse.first:.1%} |", flush=True)
