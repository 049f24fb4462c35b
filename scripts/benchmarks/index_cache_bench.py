"""The index cache in the benchmark: one-block commands on the same core in new processes, after a first one.

With an empty cache directory, `leaks` computes the products and leaves the index (a forked writer finishes
it after the command has exited: the bench waits for the finished file, `<hash>.hsindex` with no temporary
beside it); then `describe`, `retainers` and `refs` of one block run in new processes, with the index and,
for `retainers`, with --no-cache for comparison. The block: the last of the first thousand reachable blocks
(lowest addresses first)."""

import json
import os
import shutil
import subprocess
import tempfile
import time

from measure import best_of

SECOND_COMMAND_SECONDS = 1.0  # at 20M blocks
SECOND_COMMAND_BLOCKS = 20_000_000
ONE_BLOCK_COMMANDS = ("describe", "retainers", "refs")
ONE_BLOCK_OVER_FIRST = 0.1  # a one-block command after a first command, against that first command


def one_block_address(heapscope, heap_core):
    """A reachable block (what `retainers` is asked about most: who keeps this alive?), whose paths and
    retained sizes need the whole dominator tree."""
    out = subprocess.run([heapscope, "blocks", heap_core.core, "--state", "reachable", "--limit", "1000", "--json"],
                         check=True, capture_output=True, text=True, env=dict(os.environ, HEAPSCOPE_NO_CACHE="1")).stdout
    return str(json.loads(out)["blocks"][-1]["address"])


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


def time_one_block_commands(heapscope, heap_core, runs):
    """(leaks that writes the index, {command: with the index}, retainers without it, index bytes)."""
    address = one_block_address(heapscope, heap_core)
    directory = tempfile.mkdtemp(prefix="heapscope-bench-cache-")
    try:
        env = cache_environment(directory)
        writing, _, _ = best_of(1, [heapscope, "leaks", heap_core.core], env=env, memory=False)
        index_bytes = wait_for_index(directory)
        with_index = {command: best_of(runs, [heapscope, command, heap_core.core, address], env=env, memory=False)[0]
                      for command in ONE_BLOCK_COMMANDS}
        without, _, _ = best_of(runs, [heapscope, "retainers", heap_core.core, address, "--no-cache"], env=env,
                                memory=False)
        return writing, with_index, without, index_bytes
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def print_one_block_commands(heapscope, cores, runs, targets):
    print()
    print(f"Index cache: one-block commands in new processes after a first `leaks` (best of {runs}; `leaks` once):")
    print("| heap | blocks | leaks, leaving the index to its writer | index | "
          + " | ".join(f"{c} with the index" for c in ONE_BLOCK_COMMANDS) + " | retainers with --no-cache |")
    print("|---" * (5 + len(ONE_BLOCK_COMMANDS)) + "|")
    for heap_core in cores:
        writing, with_index, without, index_bytes = time_one_block_commands(heapscope, heap_core, runs)
        print(f"| {heap_core.kind} | {heap_core.blocks:,} | {writing.wall:.3f} s | {index_bytes / 2**20:.0f} MiB | "
              + " | ".join(f"{m.wall:.3f} s ({m.wall / writing.wall:.2f}×)" for m in with_index.values())
              + f" | {without.wall:.3f} s |", flush=True)
        for command, m in with_index.items():
            targets.check(f"{heap_core.kind}: {command} after leaks, new process, ≤ {ONE_BLOCK_OVER_FIRST:g}× leaks",
                          heap_core.blocks, f"{m.wall / writing.wall:.2f}× ({m.wall:.3f} s / {writing.wall:.3f} s)",
                          m.wall <= ONE_BLOCK_OVER_FIRST * writing.wall)
        if heap_core.blocks == SECOND_COMMAND_BLOCKS:
            m = with_index["retainers"]
            targets.check(f"{heap_core.kind}: retainers after leaks, new process, ≤ {SECOND_COMMAND_SECONDS:g} s",
                          heap_core.blocks, f"{m.wall:.3f} s", m.wall <= SECOND_COMMAND_SECONDS)
