#!/usr/bin/env python3
"""heapscope benchmark: one live process with millions of blocks, analysed by `heapscope attach PID
COMMAND` and by LLDB (`process attach` + `heap COMMAND`) in turn.

Not a test: it prints figures for docs/performance.md. The generator (scripts/benchmarks/heap_generator.c)
runs parked while both are timed, alternately, --runs times each; the figures are the best run.
- attach: the wall time of `heapscope attach PID COMMAND` (stop, analyse, let go).
- LLDB: the time of the `heap COMMAND` line alone, taken between two `script` timestamps inside one
  `lldb-16 --batch` run (LLDB's own attach and detach are not counted), and LLDB's peak RSS for the run.
Both give the same answer on the same process: the script checks that the leak totals agree.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import ROOT, build_generator  # noqa: E402

STAMP = re.compile(r"^@@stamp (\S+) ([0-9.]+)$", re.M)


def start_generator(generator, blocks, work):
    leaked = os.path.join(work, f"lldb-live-{blocks}.leaked")
    process = subprocess.Popen([generator, str(blocks), "10", leaked], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    line = process.stdout.readline()
    if line.strip() != b"READY":
        process.kill()
        sys.exit(f"the generator printed {line!r} instead of READY")
    return process


def peak_rss_of(cmd):
    """Runs cmd; returns (wall seconds, its peak RSS in bytes, stdout, stderr)."""
    t0 = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    outputs = {}
    readers = [threading.Thread(target=lambda name, pipe: outputs.__setitem__(name, pipe.read()), args=(n, p))
               for n, p in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - t0
    for reader in readers:
        reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    out, err = outputs["out"].decode(errors="replace"), outputs["err"].decode(errors="replace")
    if process.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({process.returncode}): {err[-2000:]}")
    return wall, usage.ru_maxrss * 1024, out, err


def time_attach(heapscope, pid, command):
    wall, _, out, _ = peak_rss_of([heapscope, "attach", str(pid), command, "--json"])
    return wall, json.loads(out)


def time_lldb(plugin, pid, command):
    stamp = "script import time; print('@@stamp {} %.6f' % time.time())"
    cmd = ["lldb-16", "--batch", "--no-lldbinit", "-o", f"plugin load {plugin}", "-o", f"process attach -p {pid}",
           "-o", stamp.format("start"), "-o", f"heap {command} --json", "-o", stamp.format("end"),
           "-o", "process detach"]
    wall, peak, out, err = peak_rss_of(cmd)
    stamps = {name: float(value) for name, value in STAMP.findall(out)}
    if set(stamps) != {"start", "end"}:
        sys.exit(f"lldb printed no timestamps: {out[-2000:]} {err[-2000:]}")
    start = out.index("@@stamp start")
    body = out[out.index("\n", start) + 1:out.index("@@stamp end")]
    body = body[body.index("{"):body.rindex("}") + 1]
    return stamps["end"] - stamps["start"], peak, json.loads(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, nargs="+", default=[5_000_000], help="live blocks of the process")
    ap.add_argument("--commands", nargs="+", default=["summary", "leaks"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--heapscope", default=os.path.join(ROOT, "build", "frontends", "cli", "heapscope"))
    ap.add_argument("--plugin", default=os.path.join(ROOT, "build", "frontends", "lldb", "libheapscope_lldb.so"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    generator = build_generator(args.work)
    print(f"machine: {os.cpu_count()} cores; heapscope: {args.heapscope}; plugin: {args.plugin}")
    print(f"| blocks | process RSS | command | heapscope attach (best of {args.runs}) | LLDB heap command (best of "
          f"{args.runs}) | LLDB / attach | LLDB peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for blocks in args.blocks:
        process = start_generator(generator, blocks, args.work)
        try:
            with open(f"/proc/{process.pid}/status") as f:
                rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
            for command in args.commands:
                attach_times, lldb_times, lldb_peaks = [], [], []
                for _ in range(args.runs):
                    wall, attach_report = time_attach(args.heapscope, process.pid, command)
                    attach_times.append(wall)
                    seconds, peak, lldb_report = time_lldb(args.plugin, process.pid, command)
                    lldb_times.append(seconds)
                    lldb_peaks.append(peak)
                    if attach_report.get("totals") != lldb_report.get("totals"):
                        sys.exit(f"{command}: attach and LLDB disagree: {attach_report.get('totals')} vs "
                                 f"{lldb_report.get('totals')}")
                best_attach, best_lldb = min(attach_times), min(lldb_times)
                print(f"| {blocks:,} | {rss / 2**20:.0f} MiB | {command} | {best_attach:.2f} s | {best_lldb:.2f} s | "
                      f"{best_lldb / best_attach:.2f}× | {max(lldb_peaks) / 2**20:.0f} MiB |", flush=True)
        finally:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
