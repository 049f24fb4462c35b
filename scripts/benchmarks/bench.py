#!/usr/bin/env python3
"""heapscope benchmark: builds cores with millions of live blocks and times heapscope on them.

Not a test: it prints figures for docs/performance.md. Wall time is the best of --runs runs; memory is the
peak anonymous RSS (heap + stacks of heapscope itself), sampled from /proc every 2 ms, which excludes the
pages of the mmapped core; peak total RSS is shown too.

With --types it also measures DWARF typing: per heap core, the "dwarf types" phase of `summary` (loading each
module's DWARF type index, then propagating types from globals, TLS variables and frame locals through the
heap), split into its sub-phase "dwarf types: indexes" (the load) and the propagation that follows (phases
print their own time, nested phases excluded, so the whole is their sum), and the typed share of bytes (`summary
--json`); and the same for the demo's core and for the C++ fixture typed_containers.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_generator(work):
    exe = os.path.join(work, "heap_generator")
    src = os.path.join(ROOT, "scripts", "benchmarks", "heap_generator.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.check_call(["cc", "-O2", "-g", "-pthread", "-o", exe, src])
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
    core = os.path.join(work, f"heap-{blocks}{suffix}.core")
    leaks = os.path.join(work, f"heap-{blocks}{suffix}.leaked")
    if stale(core, generator):
        program = ["env", f"LD_PRELOAD={preload}"] if preload else []
        capture(core, program + [generator, str(blocks), str(leak_percent), leaks])
    return core, leaks


def read_status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "VmRSS"):
                    fields[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return fields


def measure(cmd):
    """Runs cmd; returns (wall seconds, peak anonymous RSS, peak total RSS, stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_anon = peak_rss = 0
    out_chunks = []
    os.set_blocking(proc.stdout.fileno(), False)
    while proc.poll() is None:
        st = read_status(proc.pid)
        peak_anon = max(peak_anon, st.get("RssAnon", 0))
        peak_rss = max(peak_rss, st.get("VmRSS", 0))
        try:
            chunk = proc.stdout.read()
            if chunk:
                out_chunks.append(chunk)
        except (BlockingIOError, TypeError):
            pass
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    rest = proc.stdout.read()
    if rest:
        out_chunks.append(rest)
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {err}")
    return wall, peak_anon, peak_rss, b"".join(out_chunks).decode(errors="replace")


def check_verdicts(heapscope, core, leaked_file):
    """Compares heapscope's leaked set with the generator's record of what it leaked."""
    import json
    out = subprocess.run([heapscope, "blocks", core, "--state", "leaked", "--json"], check=True,
                         capture_output=True, text=True).stdout
    found = {b["address"] for b in json.loads(out)["blocks"]}
    with open(leaked_file) as f:
        expected = {int(line) for line in f if line.strip()}
    false_pos = found - expected
    false_neg = expected - found
    return len(expected), len(found), false_pos, false_neg


def dwarf_typing(heapscope, core, runs):
    """The "dwarf types" phase of `summary` on core and its load sub-phase, from the run whose phase was
    shortest, and the typed share ("typed" of summary --json)."""
    import json
    env = dict(os.environ, HEAPSCOPE_TIMING="1")
    best = None
    for _ in range(runs):
        err = subprocess.run([heapscope, "summary", core], env=env, capture_output=True, text=True,
                             check=True).stderr
        phases = {}
        for line in err.splitlines():
            if line.startswith("heapscope: phase dwarf types"):
                phases[line[len("heapscope: phase "):].rsplit(" ", 2)[0]] = float(line.split()[-2])
        load = phases.get("dwarf types: indexes", 0.0)
        run = (phases.get("dwarf types", 0.0) + load, load)
        best = run if best is None or run[0] < best[0] else best
    out = subprocess.run([heapscope, "summary", core, "--json"], capture_output=True, text=True, check=True).stdout
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, nargs="+", default=[5_000_000], help="live blocks per core")
    ap.add_argument("--commands", nargs="+", default=["summary"], help="heapscope commands to time")
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
    args = ap.parse_args()
    # Every run computes what it times: a run after the first would otherwise load the index cache
    # (docs/performance.md, "Index cache", times that apart).
    os.environ["HEAPSCOPE_NO_CACHE"] = "1"

    heapscope = args.heapscope
    os.makedirs(args.work, exist_ok=True)
    generator = build_generator(args.work)
    print(f"machine: {os.cpu_count()} cores; heapscope: {heapscope}")
    print("| core | blocks | command | wall (best of {}) | peak anon RSS | bytes/block | peak RSS incl. core pages |"
          .format(args.runs))
    print("|---|---|---|---|---|---|---|")
    verdict_lines = []
    for blocks in args.blocks:
        core, leaked_file = make_core(args.work, generator, blocks, args.leak_percent, args.preload)
        size_mib = os.path.getsize(core) / 2**20
        for command in args.commands:
            results = [measure([heapscope, command, core]) for _ in range(args.runs)]
            wall = min(r[0] for r in results)
            anon = max(r[1] for r in results)
            rss = max(r[2] for r in results)
            print(f"| {size_mib:.0f} MiB | {blocks:,} | {command} | {wall:.3f} s | {anon / 2**20:.1f} MiB | "
                  f"{anon / blocks:.1f} | {rss / 2**20:.0f} MiB |", flush=True)
            if args.phases:
                env = dict(os.environ, HEAPSCOPE_TIMING="1")
                err = subprocess.run([heapscope, command, core], env=env, capture_output=True, text=True).stderr
                phases = [l.split(" ", 2)[2] for l in err.splitlines() if l.startswith("heapscope: phase")]
                print(f"|   | | phases: {'; '.join(phases)} | | | | |", flush=True)
        if "leaks" in args.commands:
            expected, found, fp, fn = check_verdicts(heapscope, core, leaked_file)
            verdict_lines.append(f"{blocks:,} blocks: generator leaked {expected:,}, heapscope found {found:,}: "
                                 f"{len(fp)} false positives, {len(fn)} false negatives"
                                 + (f" (e.g. {', '.join(hex(a) for a in sorted(fn)[:3])})" if fn else ""))
    for line in verdict_lines:
        print(line)
    if args.types:
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


if __name__ == "__main__":
    main()
