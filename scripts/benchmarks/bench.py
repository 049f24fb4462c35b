#!/usr/bin/env python3
"""heapscope benchmark: builds cores with millions of live blocks and times heapscope on them.

Not a test: it prints figures for docs/performance.md. Wall and CPU time are the best of --runs runs that
nothing samples; memory is the peak anonymous RSS (heap + stacks of heapscope itself) of one more run,
sampled from /proc every 2 ms, which excludes the pages of the mmapped core; peak total RSS is shown too.

Per core it also prints the read floor (reading the whole core file once, warm: what touching every byte
costs, the floor under any analysis), and checks `leaks`' verdicts against the generator's record of what
it leaked. With HEAPSCOPE_BENCH_REFERENCE=/path/to/chap (vmware/chap, built outside this repository; not a
dependency) it times chap's load of the same core beside heapscope's `leaks` (scripts/benchmarks/
reference.py says why that is the fair pair). A targets section ends the run: each target of
docs/performance.md with its measured figure and PASS or FAIL.

--debugger-reuse times two `heap` commands at one stop in LLDB and in GDB (the second reuses the first's products);
--plot FILE.svg draws time and memory against blocks, log-log.

With --types it also measures DWARF typing: per heap core, the "dwarf types" phase of `summary --names` (loading each
module's DWARF type index, then propagating types from globals, TLS variables and frame locals through the
heap), split into its sub-phase "dwarf types: indexes" (the load) and the propagation that follows (phases
print their own time, nested phases excluded, so the whole is their sum), and the typed share of bytes (`summary
--names --json`); and the same for the demo's core and for the C++ fixture typed_containers.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import debugger_reuse  # noqa: E402
import compressed_core_bench  # noqa: E402
import index_cache_bench  # noqa: E402
import program_heaps  # noqa: E402
import reference  # noqa: E402
from loglog_svg import write_loglog_svg  # noqa: E402
from measure import CommandFailed, best_of, read_floor  # noqa: E402
from collections import namedtuple  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


# The heap kinds a generator makes: its source and how it is built. Both take BLOCKS LEAK_PERCENT LEAK_FILE.
GENERATORS = {
    # chains of 50 small blocks, half in a second thread's arena
    "chains": ("heap_generator.c", ["cc", "-O2", "-g", "-pthread"]),
    # a C++ server's heap: std::map of strings, vectors of strings, polymorphic objects, trees, rings,
    # half-freed temporaries; most blocks in the main arena, two workers' arenas
    "mixed": ("mixed_heap.cpp", ["c++", "-std=c++20", "-O2", "-g", "-pthread"]),
}


# One core the bench measures: its heap kind (a generator's or a program's), its live blocks (the generator's
# count; for a program, the walk's), the file, and the generator's record of what it leaked (None for a program).
HeapCore = namedtuple("HeapCore", "kind blocks core leaked")
HEAP_KINDS = sorted(GENERATORS) + sorted(program_heaps.DEFAULT_SCALES)


def label(heap_core):
    return f"{heap_core.kind} {heap_core.blocks:,}"


def build_generator(work, heap="chains"):
    source_name, compile_command = GENERATORS[heap]
    exe = os.path.join(work, os.path.splitext(source_name)[0])
    src = os.path.join(ROOT, "scripts", "benchmarks", source_name)
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.check_call(compile_command + ["-o", exe, src])
    return exe


def stale(path, source):
    """True when `path` is missing or older than `source` (a core taken from an older build of its program)."""
    return not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(source)


def capture(core, program_args, ledger=None, quiet=False):
    t0 = time.time()
    cmd = [os.path.join(ROOT, "scripts", "capture-core"), "--out", core, "--timeout", "600"]
    if ledger:
        cmd += ["--ledger", ledger]
    subprocess.check_call(cmd + ["--"] + program_args)
    if not quiet:
        print(f"  captured {core} ({os.path.getsize(core) / 2**20:.0f} MiB) in {time.time() - t0:.1f} s", flush=True)


def make_core(work, generator, blocks, leak_percent, preload=None):
    """The generator's core (reused while newer than the generator); with `preload`, run under that
    allocator library (LD_PRELOAD), into a core named after it."""
    suffix = "-" + os.path.basename(preload).split(".so")[0] if preload else ""
    kind = "" if os.path.basename(generator) == "heap_generator" else os.path.basename(generator) + "-"
    core = os.path.join(work, f"heap-{kind}{blocks}{suffix}.core")
    leaks = os.path.join(work, f"heap-{kind}{blocks}{suffix}.leaked")
    if stale(core, generator):
        program = ["env", f"LD_PRELOAD={preload}"] if preload else []
        capture(core, program + [generator, str(blocks), str(leak_percent), leaks])
    return core, leaks


def check_verdicts(heapscope, core, leaked_file):
    """Compares heapscope's leaked set with the generator's record of what it leaked."""
    out = subprocess.run([heapscope, "blocks", core, "--state", "leaked", "--json"], check=True,
                         capture_output=True, text=True).stdout
    found = {b["address"] for b in json.loads(out)["blocks"]}
    with open(leaked_file) as f:
        expected = {int(line) for line in f if line.strip()}
    false_pos = found - expected
    false_neg = expected - found
    return len(expected), len(found), false_pos, false_neg


def dwarf_typing(heapscope, core, runs):
    """The "dwarf types" phase of `summary --names` on core and its load sub-phase, from the run whose phase
    was shortest, and the typed share ("typed" of summary --names --json)."""
    env = dict(os.environ, HEAPSCOPE_TIMING="1")
    best = None
    for _ in range(runs):
        err = subprocess.run([heapscope, "summary", "--names", core], env=env, capture_output=True, text=True,
                             check=True).stderr
        phases = {}  # "dwarf types: indexes" is printed once per module: summed
        for line in err.splitlines():
            if line.startswith("heapscope: phase dwarf types"):
                name = line[len("heapscope: phase "):].rsplit(" ", 2)[0]
                phases[name] = phases.get(name, 0.0) + float(line.split()[-2])
        load = phases.get("dwarf types: indexes", 0.0)
        run = (phases.get("dwarf types", 0.0) + load, load)
        best = run if best is None or run[0] < best[0] else best
    out = subprocess.run([heapscope, "summary", "--names", core, "--json"], capture_output=True, text=True, check=True).stdout
    return best[0], best[1], json.loads(out)["typed"]


def size_text(n):
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def typed_share(typed):
    return (f"{typed['bytes_percent']:.1f} % ({size_text(typed['bytes'])} of {size_text(typed['allocated_bytes'])})"
            f" | {typed['blocks']:,} of {typed['allocated_blocks']:,}")


def fixture_cores(work):
    """(label, core) of the demo's core (scripts/demo's, else captured here) and of typed_containers."""
    cores = []
    demo = os.path.join(ROOT, "build", "demo", "demo.core")
    demo_program = os.path.join(ROOT, "build", "tests", "fixtures", "heapscope-demo")
    if not os.path.exists(demo) and os.path.exists(demo_program):
        demo = os.path.join(work, "demo.core")
        if stale(demo, demo_program):
            capture(demo, [demo_program], quiet=True)
    if os.path.exists(demo):
        cores.append(("demo (heapscope-demo)", demo))
    fixture = os.path.join(ROOT, "build", "tests", "fixtures", "typed_containers")
    if os.path.exists(fixture):
        core = os.path.join(work, "typed_containers.core")
        if stale(core, fixture):
            capture(core, [fixture], ledger=os.path.join(work, "typed_containers.ledger"), quiet=True)
        cores.append(("C++ fixture typed_containers", core))
    else:
        print(f"  (no {fixture}: build the tests to measure it)")
    return cores



# Targets (docs/performance.md): `leaks` at least this many times faster than the reference's load, at these
# sizes; seconds at 20 M blocks; memory beyond the mmapped core per block and per edge.
REFERENCE_SPEEDUP, REFERENCE_SIZES = 10.0, (5_000_000, 20_000_000)
LEAKS_SECONDS_20M, SUMMARY_SECONDS_20M = 4.0, 1.5
LEAKS_BYTES_PER_BLOCK, LEAKS_BYTES_PER_EDGE, OTHERS_BYTES_PER_BLOCK = 32, 4, 56
TOP_OVER_LEAKS, SUMMARY_OVER_LEAKS = 2.0, 0.5
# Real heaps' `leaks` per block at most this times the mixed heap's: redis (jemalloc, interior pointers
# everywhere) and python3 under pymalloc (objects past their headers, two heaps).
PROGRAM_OVER_MIXED = {"redis": 1.2, "pymalloc": 1.2}
# Growth counts as linear up to this log-log exponent: best-of-3 timings on a shared machine move the
# exponent between two sizes by a few hundredths from run to run.
LINEAR_EXPONENT = 1.05


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def measure_heapscope(heapscope, core, command, runs):
    try:
        return best_of(runs, [heapscope, command, core])[0]
    except CommandFailed as failure:
        sys.exit(str(failure))


def print_phases(heapscope, core, command):
    env = dict(os.environ, HEAPSCOPE_TIMING="1")
    err = subprocess.run([heapscope, command, core], env=env, capture_output=True, text=True).stderr
    phases = [line.split(" ", 2)[2] for line in err.splitlines() if line.startswith("heapscope: phase")]
    print(f"|   | | phases: {'; '.join(phases)} | | | | | |", flush=True)


def find_int(document, keys):
    """The first integer value under one of `keys` anywhere in a JSON document, or None."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in keys and isinstance(value, int) and not isinstance(value, bool):
                return value
        document = list(document.values())
    if isinstance(document, list):
        for item in document:
            found = find_int(item, keys)
            if found is not None:
                return found
    return None


def graph_edge_count(heapscope, core):
    """The reference graph's edge count, if `leaks --json` reports one (no command did when this was
    written: the memory target's 4 bytes per edge is then checked only where 32 per block alone holds)."""
    out = subprocess.run([heapscope, "leaks", core, "--json"], capture_output=True, text=True).stdout
    try:
        return find_int(json.loads(out), {"edge_count", "edges", "graph_edges"})
    except ValueError:
        return None


def verdict_line(heap_core, expected, found, false_pos, false_neg):
    return (f"{label(heap_core)} blocks: generator leaked {expected:,}, heapscope found {found:,}: "
            f"{len(false_pos)} false positives, {len(false_neg)} false negatives"
            + (f" (e.g. {', '.join(hex(a) for a in sorted(false_neg)[:3])})" if false_neg else ""))


def print_read_floors(floors, results, runs):
    print()
    print(f"Read floor: the whole core file read once, sequentially in 64 MiB reads, page cache warm "
          f"(best of {runs}):")
    print("| heap | blocks | core | read floor | GiB/s | fastest command | its time / read floor |")
    print("|---|---|---|---|---|---|---|")
    for heap_core, floor in floors.items():
        size = os.path.getsize(heap_core.core)
        fastest = min(results[heap_core].items(), key=lambda item: item[1].wall, default=None)
        ratio = f"{fastest[0]}: {fastest[1].wall:.3f} s | {fastest[1].wall / floor:.1f}×" if fastest else "— | —"
        print(f"| {heap_core.kind} | {heap_core.blocks:,} | {size / 2**20:.0f} MiB | {floor:.3f} s | "
              f"{size / 2**30 / floor:.2f} | {ratio} |")


def reference_load(chap, core, runs):
    """chap's load of core (Measurement or None), why it failed, and its leaked count."""
    load, failure = reference.time_load(chap, core, runs)
    count, count_failure = reference.leak_count(chap, core) if load else (None, None)
    return load, failure or count_failure, count


def print_reference(loads, results, expected_leaks, runs):
    print()
    print(f"Against the reference (chap's load with no commands, stdin at end of file; best of {runs}):")
    print("| heap | blocks | chap load | chap CPU | chap peak anon RSS | chap: leaked (generator's record) | "
          f"heapscope leaks | leaks CPU | leaks peak anon RSS | chap load / leaks | ≥ {REFERENCE_SPEEDUP:g}× | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for heap_core, (load, failure, count) in loads.items():
        if load is None:
            print(f"| {heap_core.kind} | {heap_core.blocks:,} | failed: {failure} | | | | | | | | | |")
            continue
        leaks = results[heap_core].get("leaks")
        record = f"{expected_leaks[heap_core]:,}" if heap_core in expected_leaks else "no record"
        counted = f"{count:,} ({record})" if count is not None else f"? ({failure})"
        leaks_cells = f"{leaks.wall:.3f} s | {leaks.cpu:.3f} s | {mib(leaks.anon)}" if leaks else "not measured | — | —"
        ratio = load.wall / leaks.wall if leaks else None
        status = ("PASS" if ratio >= REFERENCE_SPEEDUP else "FAIL") if ratio else "—"
        ratio_text = f"{ratio:.1f}×" if ratio else "—"
        cpu_ratio = f"{load.cpu / leaks.cpu:.1f}×" if leaks else "—"
        print(f"| {heap_core.kind} | {heap_core.blocks:,} | {load.wall:.3f} s | {load.cpu:.3f} s | {mib(load.anon)} | "
              f"{counted} | {leaks_cells} | {ratio_text} | {status} | {cpu_ratio} |", flush=True)


class Targets:
    """Collects (target, blocks, measured figure, PASS/FAIL/n/a) rows."""

    def __init__(self):
        self.rows = []

    def check(self, target, blocks, measured, passed):
        status = "n/a" if passed is None else ("PASS" if passed else "FAIL")
        self.rows.append((target, blocks, measured, status))

    def print(self):
        print()
        print("Targets:")
        print("| target | blocks | measured | |")
        print("|---|---|---|---|")
        for target, blocks, measured, status in self.rows:
            print(f"| {target} | {blocks:,} | {measured} | {status} |")



def check_speed_targets(targets, heap_core, measured, loads):
    leaks, summary, top = (measured.get(c) for c in ("leaks", "summary", "top"))
    name, blocks = heap_core.kind, heap_core.blocks
    if name in GENERATORS and blocks in REFERENCE_SIZES:
        load = loads.get(heap_core, (None,))[0]
        target = f"{name}: leaks ≥ {REFERENCE_SPEEDUP:g}× faster than chap's load"
        if leaks and load:
            ratio = load.wall / leaks.wall
            targets.check(target, blocks, f"{ratio:.1f}× ({load.wall:.2f} s / {leaks.wall:.3f} s)",
                          ratio >= REFERENCE_SPEEDUP)
        else:
            targets.check(target, blocks, "no reference load" if leaks else "leaks not measured", None)
    if name == "chains" and blocks == 20_000_000:
        if leaks:
            targets.check(f"chains: leaks ≤ {LEAKS_SECONDS_20M:g} s", blocks, f"{leaks.wall:.3f} s",
                          leaks.wall <= LEAKS_SECONDS_20M)
        if summary:
            targets.check(f"chains: summary ≤ {SUMMARY_SECONDS_20M:g} s", blocks, f"{summary.wall:.3f} s",
                          summary.wall <= SUMMARY_SECONDS_20M)
    if summary and leaks:
        targets.check(f"{name}: summary ≤ {SUMMARY_OVER_LEAKS:g}× leaks", blocks,
                      f"{summary.wall / leaks.wall:.2f}× ({summary.wall:.3f} s / {leaks.wall:.3f} s)",
                      summary.wall <= SUMMARY_OVER_LEAKS * leaks.wall)
    if top and leaks:
        targets.check(f"{name}: top ≤ {TOP_OVER_LEAKS:g}× leaks", blocks,
                      f"{top.wall / leaks.wall:.2f}× ({top.wall:.3f} s / {leaks.wall:.3f} s)",
                      top.wall <= TOP_OVER_LEAKS * leaks.wall)


def check_programs_per_block(targets, results):
    """Each real heap's leaks per block (PROGRAM_OVER_MIXED) against the mixed heap's at the nearest size."""
    mixed = [(hc, m["leaks"]) for hc, m in results.items() if hc.kind == "mixed" and "leaks" in m]
    for heap_core, measured in results.items():
        bound = PROGRAM_OVER_MIXED.get(heap_core.kind)
        if bound is None or "leaks" not in measured or not mixed:
            continue
        nearest, mixed_leaks = min(mixed, key=lambda item: abs(math.log(item[0].blocks / heap_core.blocks)))
        program_ns = measured["leaks"].wall / heap_core.blocks * 1e9
        mixed_ns = mixed_leaks.wall / nearest.blocks * 1e9
        targets.check(f"{heap_core.kind}: leaks per block ≤ {bound:g}× mixed's ({nearest.blocks:,} blocks)",
                      heap_core.blocks, f"{program_ns:.0f} ns / {mixed_ns:.0f} ns = {program_ns / mixed_ns:.2f}×",
                      program_ns <= bound * mixed_ns)


def check_memory_targets(targets, heap_core, measured, edges):
    name, blocks = heap_core.kind, heap_core.blocks
    leaks = measured.get("leaks")
    if leaks:
        target = f"{name}: leaks anon ≤ {LEAKS_BYTES_PER_BLOCK} B/block + {LEAKS_BYTES_PER_EDGE} B/edge"
        if edges is not None:
            budget = LEAKS_BYTES_PER_BLOCK * blocks + LEAKS_BYTES_PER_EDGE * edges
            targets.check(target, blocks, f"{mib(leaks.anon)} of {mib(budget)} ({edges:,} edges)", leaks.anon <= budget)
        elif leaks.anon <= LEAKS_BYTES_PER_BLOCK * blocks:  # within budget whatever the edge count
            targets.check(target, blocks, f"{leaks.anon / blocks:.1f} B/block (edges not reported)", True)
        else:
            targets.check(target, blocks, f"{leaks.anon / blocks:.1f} B/block; needs the edge count, which "
                          "heapscope does not report", None)
    for command in ("top", "roots", "threads"):
        if command in measured:
            per_block = measured[command].anon / blocks
            targets.check(f"{name}: {command} anon ≤ {OTHERS_BYTES_PER_BLOCK} B/block", blocks,
                          f"{per_block:.1f} B/block", per_block <= OTHERS_BYTES_PER_BLOCK)


def growth_exponent(small, large):
    """The log-log slope between two (blocks, value) points: 1 is linear growth, below 1 better."""
    return math.log(large[1] / small[1]) / math.log(large[0] / small[0])


def scaling_series(results, loads):
    """{name: {blocks: Measurement}} for each heap kind's commands and chap's load (where it loaded)."""
    series = {}
    for heap_core, measured in results.items():
        for command, m in measured.items():
            series.setdefault(f"{heap_core.kind} {command}", {})[heap_core.blocks] = m
        load = loads.get(heap_core, (None,))[0]
        if load:
            series.setdefault(f"{heap_core.kind} chap load", {})[heap_core.blocks] = load
    return series


def print_scaling(results, loads, targets):
    """Time per block at each size of a heap kind and the growth exponents (time and memory) between sizes; the
    heapscope commands' whole-range exponents are targets (linear or better: ≤ LINEAR_EXPONENT). The CPU
    time's exponent is shown beside the wall time's: when they differ, the machine's other work made the
    difference."""
    series = {name: by_size for name, by_size in scaling_series(results, loads).items() if len(by_size) >= 2}
    if not series:
        return
    print()
    print("Scaling: wall time per block at each size, and growth exponents over the whole range (log-log slope; "
          "1 = linear, below 1 better):")
    print("| heap and command | ns/block at each size | time | CPU time | anon memory |")
    print("|---|---|---|---|---|")
    for name, by_size in series.items():
        points = sorted(by_size.items())
        per_block = "; ".join(f"{b:,}: {m.wall / b * 1e9:.0f}" for b, m in points)
        first, last = points[0], points[-1]
        time_exponent = growth_exponent((first[0], first[1].wall), (last[0], last[1].wall))
        cpu_exponent = growth_exponent((first[0], first[1].cpu), (last[0], last[1].cpu))
        anon_exponent = growth_exponent((first[0], max(first[1].anon, 1)), (last[0], max(last[1].anon, 1)))
        print(f"| {name} | {per_block} | {time_exponent:.2f} | {cpu_exponent:.2f} | {anon_exponent:.2f} |")
        if not name.endswith("chap load"):
            span = f"{first[0]:,} → {last[0]:,}"
            targets.check(f"{name} time grows linearly or better ({span}; exponent ≤ {LINEAR_EXPONENT})", last[0],
                          f"exponent {time_exponent:.2f}", time_exponent <= LINEAR_EXPONENT)
            targets.check(f"{name} anon memory grows linearly or better ({span}; exponent ≤ {LINEAR_EXPONENT})",
                          last[0], f"exponent {anon_exponent:.2f}", anon_exponent <= LINEAR_EXPONENT)


def plot(path, results, loads, floors, runs):
    times, memory = {}, {}
    for heap_core, measured in results.items():
        for command, m in measured.items():
            times.setdefault(f"{heap_core.kind} {command}", []).append((heap_core.blocks, m.wall))
            memory.setdefault(f"{heap_core.kind} {command}", []).append((heap_core.blocks, m.anon / 2**20))
        load = loads.get(heap_core, (None,))[0]
        if load:
            times.setdefault(f"{heap_core.kind} chap load", []).append((heap_core.blocks, load.wall))
            memory.setdefault(f"{heap_core.kind} chap load", []).append((heap_core.blocks, load.anon / 2**20))
        times.setdefault(f"{heap_core.kind} read floor", []).append((heap_core.blocks, floors[heap_core]))
    write_loglog_svg(path, f"scripts/bench: wall time (best of {runs}) and peak anonymous RSS against live blocks, "
                           f"{time.strftime('%Y-%m-%d')}",
                     [("wall time", "s", times), ("peak anonymous RSS", "MiB", memory)])
    print(f"\nplot: {path}")


def parse_scale(text):
    kind, _, number = text.partition("=")
    if kind not in program_heaps.DEFAULT_SCALES or not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected KIND=N with KIND one of {', '.join(program_heaps.DEFAULT_SCALES)}")
    return kind, int(number)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, nargs="+", default=[5_000_000],
                    help="live blocks per core of each generator (chains, mixed)")
    ap.add_argument("--heap", choices=HEAP_KINDS, nargs="+", default=["chains"],
                    help="heap kinds: generators (chains: heap_generator.c; mixed: mixed_heap.cpp, a C++ server's "
                         "heap) and real programs (redis: redis-server with jemalloc; python: python3 with "
                         "PYTHONMALLOC=malloc; pymalloc: the same under its default allocator; swipl: SWI-Prolog with tcmalloc); scripts/benchmarks/program_heaps.py "
                         "says how each program's heap is made")
    ap.add_argument("--scale", type=parse_scale, action="append", default=[], metavar="KIND=N",
                    help="a program's scale: redis keys, python objects, swipl clauses (defaults: "
                         + ", ".join(f"{k}={v}" for k, v in program_heaps.DEFAULT_SCALES.items()) + ")")
    ap.add_argument("--commands", nargs="+", default=["summary"],
                    help="heapscope commands to time (summary, leaks, top, roots, threads, ...)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--leak-percent", type=int, default=10)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--heapscope", default=os.path.join(ROOT, "build", "frontends", "cli", "heapscope"))
    ap.add_argument("--phases", action="store_true", help="also print per-phase times (HEAPSCOPE_TIMING)")
    ap.add_argument("--preload", metavar="LIB",
                    help="run the generators with this allocator preloaded (libtcmalloc_minimal.so.4, say)")
    ap.add_argument("--types", action="store_true",
                    help="also time DWARF typing (its load and its propagation) and report the typed share "
                         "of bytes, on each generator core, the demo's core and the typed_containers fixture")
    ap.add_argument("--debugger-reuse", action="store_true",
                    help="time two heap commands at one stop in lldb-16 and in gdb (the second reuses the "
                         "first's products), on the first generator's --reuse-blocks core")
    ap.add_argument("--reuse-blocks", type=int, default=5_000_000)
    ap.add_argument("--reuse-commands", nargs=2, default=["leaks", "leaks"], metavar=("FIRST", "SECOND"))
    ap.add_argument("--cache", action="store_true",
                    help="also time one-block commands (describe, retainers, refs) in new processes after a first "
                         "`leaks` that leaves the index cache, with the index and without it")
    ap.add_argument("--compressed", action="store_true",
                    help="also time the first and the second command on each core compressed with zstd, lz4, xz "
                         "and gzip (the first decompresses it into the core copy cache, the second reads the copy)")
    ap.add_argument("--plot", metavar="FILE.svg", help="write a log-log plot of time and memory against blocks")
    args = ap.parse_args()
    # Every run computes what it times: a run after the first would otherwise load the index cache
    # (--cache times that apart).
    os.environ["HEAPSCOPE_NO_CACHE"] = "1"
    return args


def print_types(heapscope, generator_cores, args):
    print()
    print(f"| heap | blocks | dwarf types (best of {args.runs}) | of which indexes and block index (≈ load) | "
          "propagation | typed share of bytes | typed blocks |")
    print("|---|---|---|---|---|---|---|")
    for heap_core in generator_cores:
        total, load, typed = dwarf_typing(heapscope, heap_core.core, args.runs)
        print(f"| {heap_core.kind}, {os.path.getsize(heap_core.core) / 2**20:.0f} MiB | {heap_core.blocks:,} | "
              f"{total:.3f} s | {load:.3f} s | {total - load:.3f} s | {typed_share(typed)} |", flush=True)
    for fixture_label, core in fixture_cores(args.work):
        total, load, typed = dwarf_typing(heapscope, core, args.runs)
        print(f"| {fixture_label} | | {total:.3f} s | {load:.3f} s | {total - load:.3f} s | {typed_share(typed)} |",
              flush=True)


def walked_blocks(heapscope, core):
    """The blocks in use the walk finds (a program's core has no generator count)."""
    out = subprocess.run([heapscope, "summary", core, "--json"], capture_output=True, text=True, check=True).stdout
    totals = json.loads(out)["heap"]["totals"]
    return totals["in_use"]["blocks"] + totals["mmapped"]["blocks"]


def heap_cores(args, heapscope):
    """Every core the run measures, generators' first (each at every --blocks), then programs' (each at its scale)."""
    scales = dict(program_heaps.DEFAULT_SCALES, **dict(args.scale))
    cores = []
    for kind in args.heap:
        if kind in GENERATORS:
            generator = build_generator(args.work, kind)
            for blocks in args.blocks:
                core, leaked = make_core(args.work, generator, blocks, args.leak_percent, args.preload)
                cores.append(HeapCore(kind, blocks, core, leaked))
        elif not program_heaps.available(kind):
            print(f"  ({kind}: {program_heaps.PROGRAMS[kind]} is not installed; skipped)")
        else:
            core = program_heaps.make_program_core(args.work, kind, scales[kind])
            cores.append(HeapCore(kind, walked_blocks(heapscope, core), core, None))
    return cores


def reads_glibc_heap(heap_core, args):
    """chap reads glibc's malloc only: the generators' cores (unless another allocator was preloaded) and python's."""
    return (heap_core.kind in GENERATORS and not args.preload) or program_heaps.ALLOCATORS.get(heap_core.kind) == "glibc"


def main():
    args = parse_args()
    heapscope = args.heapscope
    os.makedirs(args.work, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; heapscope: {heapscope}")
    chap = reference.reference_binary()
    cores = heap_cores(args, heapscope)
    print(f"| heap | blocks | core | command | wall (best of {args.runs}) | ns/block | CPU user+sys | peak anon RSS | "
          "bytes/block | page faults | faults/1k blocks | peak RSS incl. core pages |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    results, floors, edges, expected_leaks, verdict_lines, loads = {}, {}, {}, {}, [], {}
    for heap_core in cores:
        results[heap_core] = {}
        blocks, size = heap_core.blocks, os.path.getsize(heap_core.core)
        for command in args.commands:
            m = measure_heapscope(heapscope, heap_core.core, command, args.runs)
            results[heap_core][command] = m
            print(f"| {heap_core.kind} | {blocks:,} | {size / 2**20:.0f} MiB | {command} | {m.wall:.3f} s | "
                  f"{m.wall / blocks * 1e9:.0f} | {m.cpu:.3f} s | {mib(m.anon)} | {m.anon / blocks:.1f} | "
                  f"{m.faults:,} | {m.faults / blocks * 1000:.1f} | {m.rss / 2**20:.0f} MiB |", flush=True)
            if args.phases:
                print_phases(heapscope, heap_core.core, command)
        # chap's load of this core right after heapscope's runs on it, not after every core's: this VM's speed
        # drifts by a tenth over the half hour a full run takes, and the ratio is of the two at one time.
        if chap and reads_glibc_heap(heap_core, args):
            loads[heap_core] = reference_load(chap, heap_core.core, args.runs)
        floors[heap_core] = read_floor(heap_core.core, args.runs)
        if heap_core.leaked:
            expected, found, false_pos, false_neg = check_verdicts(heapscope, heap_core.core, heap_core.leaked)
            expected_leaks[heap_core] = expected
            verdict_lines.append((heap_core, verdict_line(heap_core, expected, found, false_pos, false_neg),
                                  len(false_pos)))
        if "leaks" in args.commands:
            edges[heap_core] = graph_edge_count(heapscope, heap_core.core)

    print_read_floors(floors, results, args.runs)
    if loads:
        print_reference(loads, results, expected_leaks, args.runs)
    print()
    for _, line, _ in verdict_lines:
        print(line)
    for heap_core, count in edges.items():
        print(f"{label(heap_core)} blocks: reference graph edges: "
              + (f"{count:,}" if count is not None else "not reported by heapscope"))

    targets = Targets()
    for heap_core in cores:
        check_speed_targets(targets, heap_core, results[heap_core], loads)
        check_memory_targets(targets, heap_core, results[heap_core], edges.get(heap_core))
    check_programs_per_block(targets, results)
    for heap_core, _, false_positives in verdict_lines:
        targets.check(f"{heap_core.kind}: 0 false positives", heap_core.blocks, f"{false_positives}",
                      false_positives == 0)
    print_scaling(results, loads, targets)
    if args.cache:
        index_cache_bench.print_one_block_commands(heapscope, cores, args.runs, targets)
    if args.compressed:
        compressed_core_bench.print_compressed(heapscope, cores, args.runs, targets)
    targets.print()

    generator_cores = [hc for hc in cores if hc.leaked]
    if args.debugger_reuse and generator_cores:
        generator = build_generator(args.work, generator_cores[0].kind)
        core, _ = make_core(args.work, generator, args.reuse_blocks, args.leak_percent, args.preload)
        build_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(heapscope))))
        debugger_reuse.print_reuse(build_dir, generator, core, args.reuse_blocks, *args.reuse_commands, args.runs)
    if args.plot:
        plot(args.plot, results, loads, floors, args.runs)
    if args.types:
        print_types(heapscope, generator_cores, args)


if __name__ == "__main__":
    main()
