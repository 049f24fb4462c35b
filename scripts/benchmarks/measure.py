"""Running a command while sampling its memory: the one measurement every part of the benchmark uses."""
import collections
import os
import subprocess
import tempfile
import time

# Wall time in seconds; peak anonymous RSS (the process's own heap and stacks, without the pages of an
# mmapped core) and peak total RSS, in bytes; CPU time (user + system, all threads) in seconds, which other
# work on a shared machine disturbs much less than the wall time; page faults (minor and major: on a mapped
# core, mostly the first touch of each of its pages).
Measurement = collections.namedtuple("Measurement", "wall anon rss cpu faults")


class CommandFailed(Exception):
    pass


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


def measure(cmd, stdin_text=None, env=None, sample=True):
    """Runs cmd (stdin: stdin_text, else /dev/null), sampling /proc every 2 ms (unless not `sample`: then the
    memory peaks are 0); returns (Measurement, stdout, stderr). Output goes to temporary files, not pipes,
    so a chatty process never blocks on a full pipe. Raises CommandFailed when it exits non-zero."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if stdin_text is not None:
            stdin.write(stdin_text.encode())
            stdin.seek(0)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=stdin if stdin_text is not None else subprocess.DEVNULL,
                                stdout=out, stderr=err, env=env)
        peak_anon = peak_rss = 0
        while True:
            # wait4 rather than poll: it also gives the child's CPU time.
            pid, wait_status, usage = os.wait4(proc.pid, os.WNOHANG if sample else 0)
            if pid:
                break
            status = read_status(proc.pid)
            peak_anon = max(peak_anon, status.get("RssAnon", 0))
            peak_rss = max(peak_rss, status.get("VmRSS", 0))
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)} failed (exit {proc.returncode}): {stderr[-2000:].strip()}")
    cpu = usage.ru_utime + usage.ru_stime
    return Measurement(wall, peak_anon, peak_rss, cpu, usage.ru_minflt + usage.ru_majflt), stdout, stderr


def best_of(runs, cmd, stdin_text=None, env=None, memory=True):
    """The best wall and CPU times of `runs` runs, with the last run's output; with `memory`, the memory
    peaks of one more run, sampled. Times come from runs nobody samples: on this 2-core machine the sampler's
    500 wake-ups a second take a core's share from a command that keeps both busy (about 10 % of `leaks`'
    wall time at 5M blocks) and nothing from a single-threaded one, which leaves the other core idle."""
    results = [measure(cmd, stdin_text, env, sample=False) for _ in range(runs)]
    sampled = measure(cmd, stdin_text, env)[0] if memory else Measurement(0, 0, 0, 0, 0)
    best = Measurement(min(m.wall for m, _, _ in results), sampled.anon, sampled.rss,
                       min(m.cpu for m, _, _ in results), min(m.faults for m, _, _ in results))
    return best, results[-1][1], results[-1][2]


def read_floor(path, runs):
    """The best time of `runs` sequential reads of the whole file in 64 MiB reads, after one read that warms
    the page cache: what touching every byte of the core once costs, the floor under any analysis of it."""
    buffer = memoryview(bytearray(64 << 20))
    best = float("inf")
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
        best = min(best, time.perf_counter() - t0)
    return best
