"""The reference analyzer (vmware/chap) beside heapscope: optional, named by HEAPSCOPE_BENCH_REFERENCE.

chap analyses a core eagerly when it opens it: it finds the modules, walks malloc's heap, resolves every
allocation's boundaries, finds the anchors and builds its allocation graph and leak tags before its first
prompt. Its load with no commands (stdin at end of file: chap exits at once) is therefore the work that
heapscope's `leaks` does before printing, and that is what the side-by-side compares.

chap prints nothing on stdout for a load without commands and exits 0 even on a core it cannot make much
of, so the load is checked by one more run that asks `count leaked` and compares its count with the
generator's record of what it leaked.

chap writes CORE.symreqs (a gdb script to name its anchors) beside the core it opens, so it is given the core
through a symbolic link in a directory of its own: the directory the cores are in is left as it was.
"""
import os
import re
import tempfile

from measure import CommandFailed, best_of, measure

ENV = "HEAPSCOPE_BENCH_REFERENCE"
LEAK_COUNT = re.compile(r"^(\d+) allocations? use", re.M)


def reference_binary():
    """The chap binary named by the environment, or None (with a line saying why)."""
    path = os.environ.get(ENV)
    if not path:
        print(f"reference: none named ({ENV}=/path/to/chap adds chap's load time beside heapscope's leaks)")
        return None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"reference: {ENV}={path} is not an executable file; no side-by-side")
        return None
    print(f"reference: {path}")
    return path


def linked_core(core):
    """A symbolic link to core in a scratch directory, where chap may write its files."""
    directory = os.path.join(tempfile.gettempdir(), "heapscope-bench-reference")
    os.makedirs(directory, exist_ok=True)
    link = os.path.join(directory, os.path.basename(core))
    if os.path.islink(link) and os.readlink(link) != os.path.abspath(core):
        os.remove(link)
    if not os.path.islink(link):
        os.symlink(os.path.abspath(core), link)
    return link


def time_load(chap, core, runs):
    """chap's load of core with no commands, best of `runs`: (Measurement, None) or (None, why it failed)."""
    try:
        measurement, _, stderr = best_of(runs, [chap, linked_core(core)])
    except CommandFailed as failure:
        return None, str(failure)
    # What chap says when it cannot analyse a core, or cannot trust its leak analysis of it.
    for complaint in ("truncated", "unsupported format", "cannot be trusted"):
        if complaint in stderr:
            return None, f"chap could not analyse {core}: {stderr.strip()[:500]}"
    return measurement, None


def leak_count(chap, core):
    """How many allocations chap calls leaked (`count leaked`), or None with the reason."""
    try:
        _, stdout, stderr = measure([chap, linked_core(core)], stdin_text="count leaked\n")
    except CommandFailed as failure:
        return None, str(failure)
    match = LEAK_COUNT.search(stdout)
    if not match:
        return None, f"chap printed no count for `count leaked`: {(stdout + stderr).strip()[-500:]}"
    return int(match.group(1)), None
