"""The index cache in the benchmark: a second command on the same core in a new process.

With an empty cache directory, `leaks` computes the products and leaves the index (a forked writer finishes
it after the command has exited: the bench waits for the finished file, `<hash>.hsindex` with no temporary
beside it); then `retainers CORE ADDR` (ADDR: the first block the generator leaked) runs in new processes,
with the index and, for comparison, with --no-cache."""

import os
import shutil
import subprocess
import tempfile
import time

from measure import best_of

SECOND_COMMAND_SECONDS = 1.0  # at 20M blocks
SECOND_COMMAND_BLOCKS = 20_000_000


def first_leaked_address(leaked_file):
    with open(leaked_file) as f:
        return f.readline().split()[0]


def wait_for_index(directory, timeout=600):
    """The bytes of the index once its writer has renamed it into place."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = os.listdir(directory)
        done = [n for n in names if n.endswith(".hsindex")]
        if done and not any(".tmp." in n for n in names):
            return sum(os.path.getsize(os.path.join(directory, n)) for n in done)
        time.sleep(0.05)
    raise SystemExit(f"bench: no index in {directory} after {timeout} s")


def cache_environment(directory):
    env = dict(os.environ, HEAPSCOPE_CACHE_DIR=directory)
    env.pop("HEAPSCOPE_NO_CACHE", None)
    return env


def time_second_command(heapscope, core, leaked_file, runs):
    """(leaks that writes the index, retainers with the index, retainers without it, index bytes)."""
    address = first_leaked_address(leaked_file)
    directory = tempfile.mkdtemp(prefix="heapscope-bench-cache-")
    try:
        env = cache_environment(directory)
        writing, _, _ = best_of(1, [heapscope, "leaks", core], env=env, memory=False)
        index_bytes = wait_for_index(directory)
        with_index, _, _ = best_of(runs, [heapscope, "retainers", core, address], env=env, memory=False)
        without, _, _ = best_of(runs, [heapscope, "retainers", core, address, "--no-cache"], env=env, memory=False)
        return writing, with_index, without, index_bytes
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def print_second_commands(heapscope, cores, leaked_files, runs, targets):
    print()
    print(f"Index cache: a second command in a new process (best of {runs}; `leaks` once):")
    print("| blocks | leaks, leaving the index to its writer | index | retainers with the index | "
          "retainers with --no-cache |")
    print("|---|---|---|---|---|")
    for blocks, core in cores:
        writing, with_index, without, index_bytes = time_second_command(heapscope, core, leaked_files[blocks], runs)
        print(f"| {blocks:,} | {writing.wall:.3f} s | {index_bytes / 2**20:.0f} MiB | {with_index.wall:.3f} s | "
              f"{without.wall:.3f} s |", flush=True)
        if blocks == SECOND_COMMAND_BLOCKS:
            targets.check(f"retainers after leaks, new process, ≤ {SECOND_COMMAND_SECONDS:g} s", blocks,
                          f"{with_index.wall:.3f} s", with_index.wall <= SECOND_COMMAND_SECONDS)
