"""Compressed cores in the benchmark: what the first command on a compressed core costs (decompressing it
into the core copy cache, then the analysis) and what every later one costs (the copy is read), beside the
same command on the raw core. docs/performance.md's target: a second command costs at most half the first.

Per format the core is compressed by the format's own tool, as a user would find it (zstd at its default
level, as systemd-coredump writes it; lz4, xz -T0 and gzip at theirs; not timed); each first command runs
with an empty cache directory, the second with what the first left. Two pairs: with heapscope's defaults
(the first command also leaves the index cache's file, written by its child after the output: the bench
waits for it before the second command), and with the index cache off (HEAPSCOPE_NO_CACHE=1), where the
second command computes everything the first did but the decompression."""

import os
import shutil
import subprocess
import tempfile

from index_cache_bench import wait_for_index
from measure import best_of

FORMATS = {  # suffix: (tool, arguments that compress stdin to stdout)
    "zst": ("zstd", ["-q", "-c", "-T0"]),
    "lz4": ("lz4", ["-q", "-c"]),
    "xz": ("xz", ["-c", "-T0"]),
    "gz": ("gzip", ["-c"]),
}


def compressed_copy(core, suffix):
    tool, arguments = FORMATS[suffix]
    path = f"{core}.{suffix}"
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(core):
        with open(core, "rb") as source, open(path + ".new", "wb") as sink:
            subprocess.run([tool, *arguments], stdin=source, stdout=sink, check=True)
        os.replace(path + ".new", path)
    return path


def time_first_and_second(heapscope, compressed, command, runs, index_cache):
    """(first command, with an empty cache directory; second, with what the first left): best of `runs` each."""
    firsts, seconds = [], []
    for _ in range(runs):
        directory = tempfile.mkdtemp(prefix="heapscope-bench-cores-")
        try:
            env = dict(os.environ, HEAPSCOPE_CACHE_DIR=directory, HEAPSCOPE_NO_CORE_CACHE="0")
            if index_cache:
                env.pop("HEAPSCOPE_NO_CACHE", None)
            first, _, _ = best_of(1, [heapscope, command, compressed], env=env, memory=False)
            if index_cache:
                wait_for_index(directory)
            second, _, _ = best_of(1, [heapscope, command, compressed], env=env, memory=False)
            firsts.append(first.wall)
            seconds.append(second.wall)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return min(firsts), min(seconds)


def print_compressed(heapscope, cores, runs, targets, command="leaks"):
    print()
    print(f"Compressed cores: `{command}`, first command (decompressing) and second (reading the copy), best of "
          f"{runs}, beside the raw core:")
    print(f"| heap | blocks | core | format | compressed | first {command} | second | second / first | first, no index "
          f"cache | second, no index cache | second / first | raw core, no index cache |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for heap_core in cores:
        blocks, core = heap_core.blocks, heap_core.core
        raw, _, _ = best_of(runs, [heapscope, command, core], memory=False)
        for suffix in FORMATS:
            if shutil.which(FORMATS[suffix][0]) is None:
                print(f"| {heap_core.kind} | {blocks:,} | | {suffix} | ({FORMATS[suffix][0]} not installed) | | | | | | | |")
                continue
            compressed = compressed_copy(core, suffix)
            first, second = time_first_and_second(heapscope, compressed, command, runs, index_cache=True)
            bare_first, bare_second = time_first_and_second(heapscope, compressed, command, runs, index_cache=False)
            print(f"| {heap_core.kind} | {blocks:,} | {os.path.getsize(core) / 2**20:.0f} MiB | {suffix} | "
                  f"{os.path.getsize(compressed) / 2**20:.0f} MiB | {first:.3f} s | {second:.3f} s | "
                  f"{second / first:.2f} | {bare_first:.3f} s | {bare_second:.3f} s | {bare_second / bare_first:.2f} | "
                  f"{raw.wall:.3f} s |", flush=True)
            targets.check(f"{heap_core.kind}: second {command} on a {suffix} core ≤ half the first", blocks,
                          f"{second / first:.2f}", second <= first / 2)
