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
import reference  # noqa: E402
from loglog_svg import write_loglog_svg  # noqa: E402
from measure import CommandFailed, best_of, read_floor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


# The heap kinds a generator makes: its source and how it is built. Both take BLOCKS LEAK_PERCENT LEAK_FILE.
GENERATORS = {
    # chains of 50 small blocks, half in a second thread's arena
    "chains": ("heap_generator.c", ["cc", "-O2", "-g", "-pthread"]),
    # a C++ server's heap: std::map of strings, vectors of strings, polymorphic objects, trees, rings,
    # half-freed temporaries; most blocks in the main arena, two workers' arenas
    "mixed": ("mixed_heap.cpp", ["c++", "-std=c++20", "-O2", "-g", "-pthread"]),
}


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
TOP_OVER_LEAKS = 2.0
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


def verdict_line(blocks, expected, found, false_pos, false_neg):
    return (f"{blocks:,} blocks: generator leaked {expected:,}, heapscope found {found:,}: "
            f"{len(false_pos)} false positives, {len(false_neg)} false negatives"
            + (f" (e.g. {', '.join(hex(a) for a in sorted(false_neg)[:3])})" if false_neg else ""))


def print_read_floors(cores, floors, results, runs):
    print()
    print(f"Read floor: the whole core file read once, sequentially in 64 MiB reads, page cache warm "
          f"(best of {runs}):")
    print("| blocks | core | read floor | GiB/s | fastest command | its time / read floor |")
    print("|---|---|---|---|---|---|")
    for blocks, core in cores:
        size = os.path.getsize(core)
        fastest = min(results[blocks].items(), key=lambda item: item[1].wall, default=None)
        ratio = f"{fastest[0]}: {fastest[1].wall:.3f} s | {fastest[1].wall / floors[blocks]:.1f}×" if fastest else "— | —"
        print(f"| {blocks:,} | {size / 2**20:.0f} MiB | {floors[blocks]:.3f} s | "
              f"{size / 2**30 / floors[blocks]:.2f} | {ratio} |")


def reference_load(chap, core, runs):
    """chap's load of core (Measurement or None), why it failed, and its leaked count."""
    load, failure = reference.time_load(chap, core, runs)
    count, count_failure = reference.leak_count(chap, core) if load else (None, None)
    return load, failure or count_failure, count


def print_reference(loads, results, expected_leaks, runs):
    print()
    print(f"Against the reference (chap's load with no commands, stdin at end of file; best of {runs}):")
    print("| blocks | chap load | chap CPU | chap peak anon RSS | chap: leaked (generator's record) | heapscope leaks | "
          f"leaks CPU | leaks peak anon RSS | chap load / leaks | ≥ {REFERENCE_SPEEDUP:g}× | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for blocks, (load, failure, count) in loads.items():
        if load is None:
            print(f"| {blocks:,} | failed: {failure} | | | | | | | | | |")
            continue
        leaks = results[blocks].get("leaks")
        counted = f"{count:,} ({expected_leaks.get(blocks, 0):,})" if count is not None else f"? ({failure})"
        leaks_cells = f"{leaks.wall:.3f} s | {leaks.cpu:.3f} s | {mib(leaks.anon)}" if leaks else "not measured | — | —"
        ratio = load.wall / leaks.wall if leaks else None
        status = ("PASS" if ratio >= REFERENCE_SPEEDUP else "FAIL") if ratio else "—"
        ratio_text = f"{ratio:.1f}×" if ratio else "—"
        cpu_ratio = f"{load.cpu / leaks.cpu:.1f}×" if leaks else "—"
        print(f"| {blocks:,} | {load.wall:.3f} s | {load.cpu:.3f} s | {mib(load.anon)} | {counted} | {leaks_cells} | "
              f"{ratio_text} | {status} | {cpu_ratio} |", flush=True)


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


def check_speed_targets(targets, blocks, measured, loads):
    leaks, summary, top = (measured.get(c) for c in ("leaks", "summary", "top"))
    if blocks in REFERENCE_SIZES:
        load = loads.get(blocks, (None,))[0]
        if leaks and load:
            ratio = load.wall / leaks.wall
            targets.check(f"leaks ≥ {REFERENCE_SPEEDUP:g}× faster than chap's load", blocks,
                          f"{ratio:.1f}× ({load.wall:.2f} s / {leaks.wall:.3f} s)", ratio >= REFERENCE_SPEEDUP)
        else:
            targets.check(f"leaks ≥ {REFERENCE_SPEEDUP:g}× faster than chap's load", blocks,
                          "no reference load" if leaks else "leaks not measured", None)
    if blocks == 20_000_000:
        if leaks:
            targets.check(f"leaks ≤ {LEAKS_SECONDS_20M:g} s", blocks, f"{leaks.wall:.3f} s",
                          leaks.wall <= LEAKS_SECONDS_20M)
        if summary:
            targets.check(f"summary ≤ {SUMMARY_SECONDS_20M:g} s", blocks, f"{summary.wall:.3f} s",
                          summary.wall <= SUMMARY_SECONDS_20M)
    if top and leaks:
        targets.check(f"top ≤ {TOP_OVER_LEAKS:g}× leaks", blocks,
                      f"{top.wall / leaks.wall:.2f}× ({top.wall:.3f} s / {leaks.wall:.3f} s)",
                      top.wall <= TOP_OVER_LEAKS * leaks.wall)


def check_memory_targets(targets, blocks, measured, edges):
    leaks = measured.get("leaks")
    if leaks:
        name = f"leaks anon ≤ {LEAKS_BYTES_PER_BLOCK} B/block + {LEAKS_BYTES_PER_EDGE} B/edge"
        if edges is not None:
            budget = LEAKS_BYTES_PER_BLOCK * blocks + LEAKS_BYTES_PER_EDGE * edges
            targets.check(name, blocks, f"{mib(leaks.anon)} of {mib(budget)} ({edges:,} edges)", leaks.anon <= budget)
        elif leaks.anon <= LEAKS_BYTES_PER_BLOCK * blocks:  # within budget whatever the edge count
            targets.check(name, blocks, f"{leaks.anon / blocks:.1f} B/block (edges not reported)", True)
        else:
            targets.check(name, blocks, f"{leaks.anon / blocks:.1f} B/block; needs the edge count, which "
                          "heapscope does not report", None)
    for command in ("top", "roots", "threads"):
        if command in measured:
            per_block = measured[command].anon / blocks
            targets.check(f"{command} anon ≤ {OTHERS_BYTES_PER_BLOCK} B/block", blocks, f"{per_block:.1f} B/block",
                          per_block <= OTHERS_BYTES_PER_BLOCK)


def growth_exponent(small, large):
    """The log-log slope between two (blocks, value) points: 1 is linear growth, below 1 better."""
    return math.log(large[1] / small[1]) / math.log(large[0] / small[0])


def scaling_series(results, loads):
    """{name: {blocks: Measurement}} for each heapscope command and chap's load (where it loaded)."""
    series = {}
    for blocks, measured in results.items():
        for command, m in measured.items():
            series.setdefault(command, {})[blocks] = m
        load = loads.get(blocks, (None,))[0]
        if load:
            series.setdefault("chap load", {})[blocks] = load
    return series


def print_scaling(results, loads, targets):
    """Time per block at each size and the growth exponents (time and memory) between sizes; the
    heapscope commands' whole-range exponents are targets (linear or better: ≤ LINEAR_EXPONENT). The CPU
    time's exponent is shown beside the wall time's: when they differ, the machine's other work made the
    difference."""
    sizes = sorted(results)
    if len(sizes) < 2:
        return
    steps = list(zip(sizes, sizes[1:]))
    print()
    print("Scaling: wall time per block, and growth exponents (log-log slope; 1 = linear, below 1 better):")
    print("| command | " + " | ".join(f"ns/block at {b:,}" for b in sizes) + " | "
          + " | ".join(f"time {a:,} → {b:,}" for a, b in steps) + " | time, whole range | CPU time, whole range | "
          "anon memory, whole range |")
    print("|---" * (1 + len(sizes) + len(steps) + 3) + "|")
    for name, by_size in scaling_series(results, loads).items():
        points = sorted((b, m) for b, m in by_size.items())
        if len(points) < 2:
            continue
        per_block = [f"{by_size[b].wall / b * 1e9:.0f}" if b in by_size else "—" for b in sizes]
        step_exponents = [f"{growth_exponent((a, by_size[a].wall), (b, by_size[b].wall)):.2f}"
                          if a in by_size and b in by_size else "—" for a, b in steps]
        first, last = points[0], points[-1]
        time_exponent = growth_exponent((first[0], first[1].wall), (last[0], last[1].wall))
        cpu_exponent = growth_exponent((first[0], first[1].cpu), (last[0], last[1].cpu))
        anon_exponent = growth_exponent((first[0], first[1].anon), (last[0], last[1].anon))
        print(f"| {name} | " + " | ".join(per_block) + " | " + " | ".join(step_exponents)
              + f" | {time_exponent:.2f} | {cpu_exponent:.2f} | {anon_exponent:.2f} |")
        if name != "chap load":
            span = f"{first[0]:,} → {last[0]:,}"
            targets.check(f"{name} time grows linearly or better ({span}; exponent ≤ {LINEAR_EXPONENT})", last[0],
                          f"exponent {time_exponent:.2f}", time_exponent <= LINEAR_EXPONENT)
            targets.check(f"{name} anon memory grows linearly or better ({span}; exponent ≤ {LINEAR_EXPONENT})",
                          last[0], f"exponent {anon_exponent:.2f}", anon_exponent <= LINEAR_EXPONENT)


def plot(path, results, loads, floors, runs):
    times, memory = {}, {}
    for blocks, measured in results.items():
        for command, m in measured.items():
            times.setdefault(f"heapscope {command}", []).append((blocks, m.wall))
            memory.setdefault(f"heapscope {command}", []).append((blocks, m.anon / 2**20))
        load = loads.get(blocks, (None,))[0]
        if load:
            times.setdefault("chap load", []).append((blocks, load.wall))
            memory.setdefault("chap load", []).append((blocks, load.anon / 2**20))
        times.setdefault("read floor", []).append((blocks, floors[blocks]))
    write_loglog_svg(path, f"scripts/bench: wall time (best of {runs}) and peak anonymous RSS against live blocks, "
                           f"{time.strftime('%Y-%m-%d')}",
                     [("wall time", "s", times), ("peak anonymous RSS", "MiB", memory)])
    print(f"\nplot: {path}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, nargs="+", default=[5_000_000], help="live blocks per core")
    ap.add_argument("--heap", choices=sorted(GENERATORS), default="chains",
                    help="the generator: chains (heap_generator.c) or mixed (mixed_heap.cpp, a C++ server's heap)")
    ap.add_argument("--commands", nargs="+", default=["summary"],
                    help="heapscope commands to time (summary, leaks, top, roots, threads, ...)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--leak-percent", type=int, default=10)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--heapscope", default=os.path.join(ROOT, "build", "frontends", "cli", "heapscope"))
    ap.add_argument("--phases", action="store_true", help="also print per-phase times (HEAPSCOPE_TIMING)")
    ap.add_argument("--preload", metavar="LIB",
                    help="run the generator with this allocator preloaded (libtcmalloc_minimal.so.4, say)")
    ap.add_argument("--types", action="store_true",
                    help="also time DWARF typing (its load and its propagation) and report the typed share "
                         "of bytes, on each core, the demo's core and the typed_containers fixture")
    ap.add_argument("--debugger-reuse", action="store_true",
                    help="time two heap commands at one stop in lldb-16 and in gdb (the second reuses the "
                         "first's products), on the --reuse-blocks core")
    ap.add_argument("--reuse-blocks", type=int, default=5_000_000)
    ap.add_argument("--reuse-commands", nargs=2, default=["leaks", "leaks"], metavar=("FIRST", "SECOND"))
    ap.add_argument("--cache", action="store_true",
                    help="also time a second command in a new process with the index cache: `retainers CORE "
                         "ADDR` after `leaks`, with and without the index")
    ap.add_argument("--compressed", action="store_true",
                    help="also time the first and the second command on each core compressed with zstd, lz4, xz "
                         "and gzip (the first decompresses it into the core copy cache, the second reads the copy)")
    ap.add_argument("--plot", metavar="FILE.svg", help="write a log-log plot of time and memory against blocks")
    args = ap.parse_args()
    # Every run computes what it times: a run after the first would otherwise load the index cache
    # (--cache times that apart).
    os.environ["HEAPSCOPE_NO_CACHE"] = "1"
    return args


def print_types(heapscope, generator, args):
    print()
    print(f"| core | blocks | dwarf types (best of {args.runs}) | of which indexes and block index (≈ load) | "
          "propagation | typed share of bytes | typed blocks |")
    print("|---|---|---|---|---|---|---|")
    for blocks in args.blocks:
        core, _ = make_core(args.work, generator, blocks, args.leak_percent)
        total, load, typed = dwarf_typing(heapscope, core, args.runs)
        print(f"| {os.path.getsize(core) / 2**20:.0f} MiB | {blocks:,} | {total:.3f} s | {load:.3f} s | "
              f"{total - load:.3f} s | {typed_share(typed)} |", flush=True)
    for label, core in fixture_cores(args.work):
        total, load, typed = dwarf_typing(heapscope, core, args.runs)
        print(f"| {label} | | {total:.3f} s | {load:.3f} s | {total - load:.3f} s | {typed_share(typed)} |",
              flush=True)


def main():
    args = parse_args()
    heapscope = args.heapscope
    os.makedirs(args.work, exist_ok=True)
    generator = build_generator(args.work, args.heap)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; heapscope: {heapscope}")
    chap = reference.reference_binary()
    print("| core | blocks | command | wall (best of {}) | CPU user+sys | peak anon RSS | bytes/block | "
          "peak RSS incl. core pages |".format(args.runs))
    print("|---|---|---|---|---|---|---|---|")
    cores, results, floors, edges, expected_leaks, verdict_lines, leaked_files = [], {}, {}, {}, {}, [], {}
    loads = {}
    for blocks in args.blocks:
        core, leaked_file = make_core(args.work, generator, blocks, args.leak_percent, args.preload)
        cores.append((blocks, core))
        leaked_files[blocks] = leaked_file
        results[blocks] = {}
        for command in args.commands:
            m = measure_heapscope(heapscope, core, command, args.runs)
            results[blocks][command] = m
            print(f"| {os.path.getsize(core) / 2**20:.0f} MiB | {blocks:,} | {command} | {m.wall:.3f} s | "
                  f"{m.cpu:.3f} s | {mib(m.anon)} | {m.anon / blocks:.1f} | {m.rss / 2**20:.0f} MiB |", flush=True)
            if args.phases:
                print_phases(heapscope, core, command)
        # chap's load of this core right after heapscope's runs on it, not after every core's: this VM's speed
        # drifts by a tenth over the half hour a full run takes, and the ratio is of the two at one time.
        if chap:
            loads[blocks] = reference_load(chap, core, args.runs)
        floors[blocks] = read_floor(core, args.runs)
        expected, found, false_pos, false_neg = check_verdicts(heapscope, core, leaked_file)
        expected_leaks[blocks] = expected
        verdict_lines.append((blocks, verdict_line(blocks, expected, found, false_pos, false_neg), len(false_pos)))
        if "leaks" in args.commands:
            edges[blocks] = graph_edge_count(heapscope, core)

    print_read_floors(cores, floors, results, args.runs)
    if chap:
        print_reference(loads, results, expected_leaks, args.runs)
    print()
    for blocks, line, _ in verdict_lines:
        print(line)
    for blocks in edges:
        print(f"{blocks:,} blocks: reference graph edges: "
              + (f"{edges[blocks]:,}" if edges[blocks] is not None else "not reported by heapscope"))

    targets = Targets()
    for blocks in args.blocks:
        check_speed_targets(targets, blocks, results[blocks], loads)
        check_memory_targets(targets, blocks, results[blocks], edges.get(blocks))
    for blocks, _, false_positives in verdict_lines:
        targets.check("0 false positives", blocks, f"{false_positives}", false_positives == 0)
    print_scaling(results, loads, targets)
    if args.cache:
        index_cache_bench.print_second_commands(heapscope, cores, leaked_files, args.runs, targets)
    if args.compressed:
        compressed_core_bench.print_compressed(heapscope, cores, args.runs, targets)
    targets.print()

    if args.debugger_reuse:
        core, _ = make_core(args.work, generator, args.reuse_blocks, args.leak_percent, args.preload)
        build_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(heapscope))))
        debugger_reuse.print_reuse(build_dir, generator, core, args.reuse_blocks, *args.reuse_commands, args.runs)
    if args.plot:
        plot(args.plot, results, loads, floors, args.runs)
    if args.types:
        print_types(heapscope, generator, args)


if __name__ == "__main__":
    main()
