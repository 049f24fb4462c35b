#!/usr/bin/env python3
"""What heapscope's allocation-site recorder (libheapscope_sites.so) costs the programs it records, beside
heaptrack (which records every allocation to a file): allocation-heavy runs, each plain, under the recorder
at its default rate (one sample per 512 KiB on average), under the recorder at every allocation, and
under heaptrack. Not a test: it prints a table for docs/performance.md ("The allocation-site recorder").

Workloads: python3 with PYTHONMALLOC=malloc building and dropping strings and dicts; troff formatting
bash(1); malloc_churn.c, two threads allocating and freeing 8M blocks of random sizes (a worst case: all
the program does is call malloc and free). Times are the best of --runs (wall and CPU, user + system; CPU
is what a shared machine disturbs least); the plain runs, the default-rate runs and those under a preloaded
wrapper that only forwards to glibc (forwarding_interposer.c: the floor of any LD_PRELOAD allocator
wrapper) alternate.

    scripts/benchmarks/recorder_overhead.py [--build build] [--runs 5] [--instructions]
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from measure import measure  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))

PYTHON_WORK = """
d = {}
for i in range(400000):
    s = "key-%d" % i
    d[s] = {"name": s * 3, "values": [i, i + 1, str(i)]}
for k in list(d)[::2]:
    del d[k]
"""


def forwarding_interposer(scratch):
    """The floor: a preloaded malloc/free that only jumps on to glibc's (forwarding_interposer.c)."""
    library = os.path.join(scratch, "libforwarding.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, os.path.join(HERE, "forwarding_interposer.c")],
                   check=True)
    return library


def workloads(scratch):
    script = os.path.join(scratch, "work.py")
    with open(script, "w") as f:
        f.write(PYTHON_WORK)
    page = os.path.join(scratch, "bash.1")
    with gzip.open("/usr/share/man/man1/bash.1.gz", "rb") as src, open(page, "wb") as dst:
        dst.write(src.read())
    churn = os.path.join(scratch, "malloc_churn")
    subprocess.run(["cc", "-O2", "-pthread", "-o", churn, os.path.join(HERE, "malloc_churn.c")], check=True)
    # A fixed hash seed: the same dictionaries, so the same allocations, in every run.
    return [("python3 strings and dicts", ["/usr/bin/python3", script], {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}),
            ("troff bash(1)", ["troff", "-man", "-Tutf8", page], {}),
            ("malloc_churn (2 threads, 16M calls)", [churn], {})]


def best(cmd, env, runs):
    results = [measure(cmd, env=env, sample=False)[0] for _ in range(runs)]
    return min(r.wall for r in results), min(r.cpu for r in results)


def instructions(cmd, env):
    """Instructions the program runs (callgrind's count: the same whatever else the machine does)."""
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return int(result.stderr.rsplit("Collected :", 1)[1].split()[0])


def best_alternating(cmd, environments, runs):
    """Best wall and CPU time of each environment, their runs taken in turn (A B A B …) so that a shared
    machine's load, which drifts, weighs on each alike."""
    results = [[] for _ in environments]
    for _ in range(runs):
        for i, env in enumerate(environments):
            results[i].append(measure(cmd, env=env, sample=False)[0])
    return [(min(r.wall for r in runs_of), min(r.cpu for r in runs_of)) for runs_of in results]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of the plain, forwarding-wrapper and default-rate runs "
                             "under callgrind")
    args = parser.parse_args()
    library = os.path.join(args.build, "recorder", "libheapscope_sites.so")
    heaptrack = shutil.which("heaptrack")
    scratch = tempfile.mkdtemp(prefix="recorder-overhead-")
    try:
        forwarding = forwarding_interposer(scratch)
        columns = ["workload", "plain", "any preloaded wrapper (forwards only)", "recorder, default rate",
                   "recorder, every allocation", "heaptrack"]
        if args.instructions:
            columns.append("instructions: plain → forwarding wrapper → recorder, default rate")
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for name, cmd, extra in workloads(scratch):
            base = dict(os.environ, **extra)
            plain, floor, default_rate = best_alternating(
                cmd, [base, dict(base, LD_PRELOAD=forwarding), dict(base, LD_PRELOAD=library)], args.runs)
            cells = [f"{plain[0]:.3f} s wall, {plain[1]:.3f} s CPU"]

            def relative(figures):
                return (f"{figures[0]:.3f} s ({figures[0] / plain[0] - 1:+.0%}), "
                        f"CPU {figures[1]:.3f} s ({figures[1] / plain[1] - 1:+.0%})")
            cells.append(relative(floor))
            cells.append(relative(default_rate))
            cells.append(relative(best(cmd, dict(base, LD_PRELOAD=library, HEAPSCOPE_SAMPLE_BYTES="1",
                                                 HEAPSCOPE_SITES_SLOTS="4194304"), max(1, args.runs // 2))))
            if heaptrack:
                output = os.path.join(scratch, "heaptrack")
                cells.append(relative(best([heaptrack, "-o", output, *cmd], base, max(1, args.runs // 2))))
            else:
                cells.append("not installed")
            if args.instructions:
                counted = instructions(cmd, base)
                forwarded = instructions(cmd, dict(base, LD_PRELOAD=forwarding))
                recorded = instructions(cmd, dict(base, LD_PRELOAD=library))
                cells.append(f"{counted / 1e6:,.0f}M → {forwarded / 1e6:,.0f}M ({forwarded / counted - 1:+.1%}) → "
                             f"{recorded / 1e6:,.0f}M ({recorded / counted - 1:+.1%})")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
