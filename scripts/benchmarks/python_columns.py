#!/usr/bin/env python3
"""Benchmark (not a test): the Python module's used-block columns on the generator's core against the CLI's
`summary` on the same core. Target (issue 42): the columns arrive in at most 1.5 times the CLI's summary
time, with no Python object per block. Figures go in docs/performance.md.

Runs in Debian's python3 (the module is built for it) with the build's package on its path:
    scripts/benchmarks/python_columns.py --blocks 5000000 --runs 3

Times, best of --runs, index cache off in both (HEAPSCOPE_NO_CACHE=1):
  - `heapscope summary CORE`, the whole process;
  - in one Python process: heapscope.open(CORE) + Session.blocks(state="used") (the columns: address,
    chunk, size, chunk_size, state); then the first use of its type_id column (the heap named, as
    `histogram` names it), reported apart;
  - the whole Python process for the columns alone (interpreter start and numpy's import included).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench import build_generator, make_core  # noqa: E402
from measure import best_of  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"

# One timed run inside a fresh interpreter: prints "<columns seconds> <types seconds> <blocks> <object dtype>";
# with a second argument "columns", the columns alone (for the whole process's time).
IN_PROCESS = """
import sys, time
import heapscope
core = sys.argv[1]
t0 = time.perf_counter()
with heapscope.open(core, cache=False) as s:
    blocks = s.blocks(state="used")
    t1 = time.perf_counter()
    if sys.argv[2:] == ["columns"]:
        sys.exit(0)
    blocks.type_id
    t2 = time.perf_counter()
    objects = any(c.dtype == object for c in (blocks.address, blocks.size, blocks.state, blocks.type_id))
    print(f"{t1 - t0:.4f} {t2 - t1:.4f} {len(blocks)} {objects}")
"""


def python_env(build):
    return dict(os.environ, PYTHONPATH=os.path.join(build, "frontends", "python"), HEAPSCOPE_NO_CACHE="1")


def in_process(build, core, runs):
    """Best of `runs`: (columns seconds, types seconds, blocks, any object column)."""
    best = None
    for _ in range(runs):
        out = subprocess.run([DEBIAN_PYTHON, "-c", IN_PROCESS, core], env=python_env(build), capture_output=True,
                             text=True, check=True).stdout.split()
        result = (float(out[0]), float(out[1]), int(out[2]), out[3] == "True")
        best = result if best is None or result[0] < best[0] else best
    return best


def whole_process(build, core, runs):
    best = None
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([DEBIAN_PYTHON, "-c", IN_PROCESS, core, "columns"], env=python_env(build), capture_output=True,
                       check=True)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, nargs="+", default=[5_000_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    heapscope = os.path.join(args.build, "frontends", "cli", "heapscope")
    generator = build_generator(args.work)
    print("| blocks | core | CLI `summary` | `open` + `blocks(state=\"used\")` | ratio | target ≤ 1.5× | "
          "then `type_id` | whole Python process, columns | object columns |")
    print("|---|---|---|---|---|---|---|---|---|")
    for blocks in args.blocks:
        core, _ = make_core(args.work, generator, blocks, 10)
        summary = best_of(args.runs, [heapscope, "summary", core], env=dict(os.environ, HEAPSCOPE_NO_CACHE="1"),
                          memory=False)[0].wall
        columns, types, listed, objects = in_process(args.build, core, args.runs)
        process = whole_process(args.build, core, args.runs)
        ratio = columns / summary
        print(f"| {blocks:,} | {os.path.getsize(core) / 2**20:.0f} MiB | {summary:.3f} s | {columns:.3f} s ({listed:,} "
              f"blocks) | {ratio:.2f}× | {'PASS' if ratio <= 1.5 else 'FAIL'} | {types:.3f} s | {process:.3f} s | "
              f"{'yes' if objects else 'none'} |", flush=True)


if __name__ == "__main__":
    main()
