"""Real Debian programs nobody here wrote, each against an oracle that the program or its allocator gives:
redis-server (jemalloc) with a million keys loaded by DEBUG POPULATE against INFO memory, SWI-Prolog (linked
with tcmalloc) holding asserted clauses against its own malloc_property/1, Python under mimalloc (Debian's
libmimalloc.so.2 preloaded) against mimalloc's own mi_stats_print_out and the addresses of Python's objects,
groff's troff (stripped C++) at its exit against valgrind's memcheck, troff recorded by heapscope's
allocation-site recorder against heaptrack's record of every allocation, and Guile (Boehm GC, libgc1)
holding a long list against its own (gc-stats), and pydoc's HTTP server (Debian's python3, pymalloc,
tracemalloc) against its own gc.collect() and tracemalloc. Python's objects by class are
tests/e2e/test_python_live.py (gc.get_objects()).

A program whose package is not installed skips with a line saying which; nothing else skips."""

import bisect
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from heapscope_e2e import RemovesItsCore, heapscope_json, run_heapscope, work_dir
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import take_core
from test_gdb import json_between_markers, marked, run_gdb
from test_sites_recorder import recorder_library

REDIS = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
SWIPL = "/usr/bin/swipl"
GUILE = "/usr/bin/guile-3.0"
TROFF = "/usr/bin/troff"
VALGRIND = shutil.which("valgrind")
HEAPTRACK = shutil.which("heaptrack")
RECORDER_MAX_FRAMES = 32  # HS_SITES_MAX_FRAMES, recorder/sites_table.h
START_TIMEOUT_SECONDS = 60
GCORE_TIMEOUT_SECONDS = 300
REDIS_KEYS = 1_000_000
SWIPL_CLAUSES = 200_000
GUILE_PAIRS = 200_000
# Guile 3.0 on Boehm GC: a list of GUILE_PAIRS pairs and 2,000 vectors held by globals; after a collection
# it prints the collector's heap size as Guile's own (gc-stats) reports it, then READY, and sleeps.
GUILE_PROGRAM = """
(define kept (make-list {pairs} "x"))
(define vecs (map (lambda (i) (make-vector 100 i)) (iota 2000)))
(gc)
(format #t "heap-size ~a~%" (assq-ref (gc-stats) 'heap-size))
(display "READY\\n")
(force-output)
(sleep 100000)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def figure(summary, name):
    return {f["name"]: f for f in summary["heap"]["figures"]}[name]


@contextlib.contextmanager
def redis_server(env=None):
    port = free_port()
    server = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--daemonize", "no", "--enable-debug-command", "yes", "--logfile", ""],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, **(env or {})))
    cli = lambda *words: subprocess.run([REDIS_CLI, "-p", str(port), *words], capture_output=True, text=True,
                                        timeout=START_TIMEOUT_SECONDS).stdout.strip()
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while cli("PING") != "PONG":
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("redis-server did not answer PING")
            time.sleep(0.1)
        yield server, cli
    finally:
        server.kill()
        server.wait()


def info_fields(text):
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


@unittest.skipUnless(os.access(REDIS, os.X_OK) and os.access(REDIS_CLI, os.X_OK),
                     "redis-server is not installed (apt-get install redis-server)")
class RedisWithJemalloc(RemovesItsCore, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core = os.path.join(work_dir(), "redis-server.core")
        with redis_server() as (server, cli):
            if cli("DEBUG", "POPULATE", str(REDIS_KEYS)) != "OK":
                raise AssertionError("DEBUG POPULATE failed")
            cls.keys = int(cli("DBSIZE"))
            cli("MEMORY", "PURGE")  # jemalloc purges what it freed: its address space is then retained
            cls.info = info_fields(cli("INFO", "memory"))
            take_core(server.pid, cls.core)
        cls.summary = heapscope_json("summary", cls.core)
        cls.leaks = heapscope_json("leaks", cls.core)

    def test_the_walk_is_jemallocs_own_count(self):
        allocated = figure(self.summary, "stats.allocated")
        self.assertEqual(allocated["own"], allocated["walk"])
        # INFO's allocator_allocated is the same counter, read a moment before the core.
        info = int(self.info["allocator_allocated"])
        self.assertLess(abs(allocated["own"] - info), 0.01 * info, (allocated, info))

    def test_retained_address_space_is_jemallocs_not_outside_malloc(self):
        # jemalloc keeps the address space of what it purged (stats.retained): reserved under the allocator,
        # not memory "outside malloc" (which it all was before).
        retained = figure(self.summary, "stats.retained")["own"]
        self.assertGreater(retained, 1 << 20, "redis freed its smaller key tables as the keys came")
        self.assertEqual(self.summary["heap"]["reserved"]["bytes"], retained)
        outside = self.summary["outside_malloc"]
        self.assertLess(outside["bytes"], retained // 4, outside)
        for mapping in outside["largest"]:  # a mapping's extent and its bytes outside malloc agree
            self.assertLessEqual(mapping["bytes"], mapping["end"] - mapping["start"], mapping)

    def test_keys_held_past_their_header_are_reachable(self):
        # Every key is an SDS string pointed to one byte in (past its one-byte header) from its dict entry.
        self.assertEqual(self.keys, REDIS_KEYS)
        prefixed = {g["offset"]: g["blocks"] for g in self.leaks["held_by_idioms"] if g["idiom"] == "length-prefixed"}
        self.assertGreaterEqual(prefixed.get(1, 0), REDIS_KEYS, self.leaks["held_by_idioms"])
        in_use = self.summary["heap"]["totals"]["in_use"]["blocks"]
        self.assertLess(self.leaks["totals"]["possibly"]["blocks"], 0.01 * in_use, self.leaks["totals"])
        self.assertLess(self.leaks["totals"]["blocks"], 0.01 * in_use, self.leaks["totals"])


SWIPL_PROGRAM = r"""
:- initialization(main, main).
main :-
    forall(between(1, {clauses}, I), assertz(fact(I, text_of(I)))),
    garbage_collect,
    malloc_property('generic.current_allocated_bytes'(Bytes)),
    getenv('HEAPSCOPE_LEDGER', Ledger),
    current_prolog_flag(pid, Pid),
    setup_call_cleanup(open(Ledger, write, Out), format(Out, "~w ~w~n", [Pid, Bytes]), close(Out)),
    format("READY~n"), flush_output,
    repeat, sleep(3600), fail.
"""



def sites_of_populate(histogram):
    """histogram --by site --json: the sites whose stacks pass through DEBUG POPULATE (which nothing changes
    once it has run), as {tuple of the program's functions: sampled blocks}."""
    out = {}
    for row in histogram["sites"]:
        functions = tuple(f["function"] for f in (row["site"] or {"frames": []})["frames"])
        if "debugCommand" in functions:
            out[functions] = row["count"]
    return out


@unittest.skipUnless(os.access(REDIS, os.X_OK) and os.access(REDIS_CLI, os.X_OK),
                     "redis-server is not installed (apt-get install redis-server)")
class RedisWithHeapProfiling(RemovesItsCore, unittest.TestCase):
    """redis-server started with MALLOC_CONF=prof:true: jemalloc samples its allocations at the default rate,
    and histogram --by site names redis' own functions (its exported symbols); live equals the core."""

    @classmethod
    def setUpClass(cls):
        cls.core = os.path.join(work_dir(), "redis-server-prof.core")
        cls.earlier_core = os.path.join(work_dir(), "redis-server-prof-earlier.core")
        with redis_server(env={"MALLOC_CONF": "prof:true"}) as (server, cli):
            if cli("DEBUG", "POPULATE", "100000", "early") != "OK":
                raise AssertionError("DEBUG POPULATE failed")
            take_core(server.pid, cls.earlier_core)
            if cli("DEBUG", "POPULATE", "300000") != "OK":
                raise AssertionError("DEBUG POPULATE failed")
            take_core(server.pid, cls.core)
            cls.live = heapscope_json("attach", server.pid, "histogram", "--by", "site")
            require_lldb_and_gdb()
            cls.lldb = run_lldb(["heap histogram --by site --json", "process detach"], lldb_args=["-p", str(server.pid)])
            cls.gdb = run_gdb(marked("sites", "heap histogram --by site --json") + ["detach"], "-p", str(server.pid))
        cls.histogram = heapscope_json("histogram", cls.core, "--by", "site")

    def test_sites_name_redis_functions(self):
        note = self.histogram["sites_note"]
        self.assertEqual((note["present"], note["exact"], note["mean_interval"]), (True, False, 512 * 1024))
        functions = {f["function"] for row in self.histogram["sites"] if row["site"] for f in row["site"]["frames"]}
        # DEBUG POPULATE's keys: each a dict entry and a string object, allocated through redis' zmalloc (the
        # top five frames of each site are shown: main is below them).
        self.assertTrue({"zmalloc", "dictAddRaw", "debugCommand"} <= functions, sorted(functions))
        populate = sites_of_populate(self.histogram)
        self.assertTrue(any("dictAddRaw" in stack for stack in populate), populate)
    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if os.path.exists(cls.earlier_core):
            os.remove(cls.earlier_core)

    def test_evolution_and_diff_by_site_say_which_code_grew(self):
        # 100,000 keys, then 300,000 more: the sites under DEBUG POPULATE grow about fourfold. Each sample stands
        # for 512 KiB of small blocks, so one site has a handful of samples before: the sites under debugCommand
        # are summed (a startup site through dictAddRaw with one sample, the same in both cores, is not one).
        evolution = heapscope_json("evolution", "--by", "site", self.earlier_core, self.core)
        self.assertEqual(evolution["by"], "site")
        growers = [s["type"] for s in evolution["series"][:3]]
        self.assertTrue(any("debugCommand()" in name for name in growers), growers)
        diff = heapscope_json("diff", "--by", "site", self.earlier_core, self.core)
        self.assertEqual(diff["by"], "site")
        populate = [row for row in diff["types"] if "debugCommand()" in row["type"]]
        self.assertTrue(any("zmalloc() ← dictAddRaw()" in row["type"] for row in populate), populate)
        before, after = (sum(row[key] for row in populate) for key in ("before_count", "after_count"))
        self.assertGreater(after, 2 * before)

    def test_live_attach_lldb_and_gdb_equal_the_core(self):
        expected = sites_of_populate(self.histogram)
        self.assertTrue(expected)
        self.assertEqual(sites_of_populate(self.live), expected)
        self.assertEqual(sites_of_populate(self.lldb.json_of("heap histogram --by site --json")), expected)
        self.assertEqual(sites_of_populate(json_between_markers(self.gdb, "sites")), expected)

@unittest.skipUnless(os.access(SWIPL, os.X_OK), "SWI-Prolog is not installed (apt-get install swi-prolog-core)")
class SwiPrologWithTcmalloc(RemovesItsCore, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        program = os.path.join(directory, "swipl-facts.pl")
        ledger = os.path.join(directory, "swipl-facts.ledger")
        cls.core = os.path.join(directory, "swipl-facts.core")
        with open(program, "w", encoding="ascii") as f:
            f.write(SWIPL_PROGRAM.replace("{clauses}", str(SWIPL_CLAUSES)))
        swipl = subprocess.Popen([SWIPL, program], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL, env=dict(os.environ, HEAPSCOPE_LEDGER=ledger))
        try:
            if swipl.stdout.readline().strip() != b"READY":
                raise AssertionError(f"swipl did not print READY (exit status {swipl.poll()})")
            with open(ledger, encoding="ascii") as f:
                _, cls.allocated = map(int, f.read().split())
            take_core(swipl.pid, cls.core)
        finally:
            swipl.kill()
            swipl.wait()
            swipl.stdout.close()
        cls.summary = heapscope_json("summary", cls.core)
        cls.top = heapscope_json("top", cls.core, "-n", "5")

    def test_the_walk_is_tcmallocs_own_count(self):
        for name in ("pageheap system_bytes", "pageheap free_bytes", "pageheap unmapped_bytes"):
            own = figure(self.summary, name)
            self.assertEqual(own["own"], own["walk"], name)
        # What the program read with malloc_property/1 just before READY (tcmalloc's bytes in use by the
        # application); printing READY allocates a little.
        in_use = self.summary["heap"]["totals"]["in_use"]["bytes"]
        self.assertLess(abs(in_use - self.allocated), 64 * 1024, (in_use, self.allocated))

    def test_the_clauses_are_the_largest_retained(self):
        self.assertGreaterEqual(self.top["rows"][0]["retained_blocks"], SWIPL_CLAUSES, self.top["rows"][0])


MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
PYTHON = "/usr/bin/python3"
# Under mimalloc: 100,000 bytes objects of 700 bytes (larger than pymalloc's 512-byte objects: each is one
# malloc'ed block, and id() is its address), then 20,000 of 600 bytes from a thread that ends (its segment is
# abandoned: the main thread allocates too little after it to reclaim it). mimalloc's statistics as mi_stats_print_out prints them,
# and every 100th object's address, go to the ledger before READY.
PYTHON_MIMALLOC_PROGRAM = r"""
import ctypes, os, signal, sys, threading, time
kept = [bytes([i % 256]) * 700 for i in range(100000)]
def worker():
    kept.extend(bytes([i % 256]) * 600 for i in range(20000))
thread = threading.Thread(target=worker)
thread.start()
thread.join()
# join() returns once the Python thread is done; mimalloc abandons its segment when the thread itself ends.
while len(os.listdir("/proc/self/task")) > 1:
    time.sleep(0.01)
mimalloc = ctypes.CDLL(None)
lines = []
printer = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)(lambda text, arg: lines.append(text.decode()))
mimalloc.mi_stats_merge()
mimalloc.mi_stats_print_out(printer, None)
counts = {}
for line in lines:
    label, _, rest = line.partition(":")
    label = label.strip()
    if label in ("segments", "-abandoned") and label not in counts and (label == "segments" or "segments" in counts):
        counts[label] = int(rest.split()[3])
with open(sys.argv[1], "w") as ledger:
    ledger.write(f"{counts['segments'] + counts['-abandoned']} {counts['-abandoned']}\n")
    ledger.write(" ".join(str(id(b)) + ":" + str(len(b)) for b in kept[::100]) + "\n")
print("READY", flush=True)
signal.pause()
"""


@unittest.skipUnless(os.path.exists(MIMALLOC), "libmimalloc2.0 is not installed (scripts/install-deps installs it)")
class PythonWithMimalloc(RemovesItsCore, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        ledger = os.path.join(directory, "python-mimalloc.ledger")
        cls.core = os.path.join(directory, "python-mimalloc.core")
        python = subprocess.Popen([PYTHON, "-c", PYTHON_MIMALLOC_PROGRAM, ledger], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                  env=dict(os.environ, LD_PRELOAD=MIMALLOC))
        try:
            if python.stdout.readline().strip() != b"READY":
                raise AssertionError(f"python3 did not print READY (exit status {python.poll()})")
            with open(ledger, encoding="ascii") as f:
                counts, objects = f.read().splitlines()
            cls.segments, cls.abandoned = map(int, counts.split())
            cls.objects = [tuple(map(int, o.split(":"))) for o in objects.split()]
            take_core(python.pid, cls.core)
        finally:
            python.kill()
            python.wait()
            python.stdout.close()
        cls.summary = heapscope_json("summary", cls.core)

    def test_the_walk_is_mimallocs_own_count(self):
        # mimalloc serves malloc; the interpreter's small objects are in pymalloc's pools beside it.
        self.assertEqual(self.summary["heap"]["allocator"], "mimalloc + pymalloc")
        self.assertTrue(self.summary["heap"]["complete"])
        self.assertEqual([w for w in self.summary["warnings"] if "glibc's malloc also holds" not in w], [])
        self.assertEqual((figure(self.summary, "segments")["own"], figure(self.summary, "segments")["walk"]),
                         (self.segments, self.segments))
        self.assertGreaterEqual(self.abandoned, 1, "the ended thread's segment was reclaimed: nothing abandoned to walk")
        abandoned = figure(self.summary, "segments_abandoned")
        self.assertEqual((abandoned["own"], abandoned["walk"]), (self.abandoned, self.abandoned))

    def test_pythons_objects_are_blocks_in_use(self):
        used = {b["address"]: b for b in heapscope_json("blocks", self.core, "--state", "used")["blocks"]}
        self.assertEqual(len(self.objects), 1200)
        for address, length in self.objects:
            block = used.get(address)
            self.assertIsNotNone(block, hex(address))
            self.assertGreaterEqual(block["usable_size"], length + 33)  # PyBytesObject's header and its NUL

    def test_verify_finds_the_heap_sound(self):
        report = heapscope_json("verify", self.core)
        self.assertEqual(report["findings"], [])


PYDOC_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pydoc_server.py")
PYDOC_PAGES = ("os", "sys", "json", "http.server", "email.message", "collections", "asyncio", "xml.dom.minidom",
               "unittest", "logging", "argparse", "socket", "ssl", "decimal", "fractions", "pathlib", "shutil",
               "subprocess", "threading", "urllib.request", "sqlite3", "csv")
PYDOC_SEARCHES = ("dict", "list", "http", "json", "path", "thread", "socket", "time", "re", "os")


def wait_until_asleep(pid, timeout=30):
    """Returns once every thread of `pid` has been asleep (state S) at two looks 100 ms apart."""
    def all_asleep():
        tasks = os.listdir(f"/proc/{pid}/task")
        states = []
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        return all(state == "S" for state in states)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all_asleep():
            time.sleep(0.1)
            if all_asleep():
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not fall asleep within {timeout} s")


@unittest.skipUnless(os.access(PYTHON, os.X_OK), "Debian's python3 is not installed")
class PydocServerAgainstItsCollector(RemovesItsCore, unittest.TestCase):
    """pydoc's HTTP server (Debian's python3.11, pymalloc, PYTHONTRACEMALLOC=1) after serving 22 pages and 10
    searches: the objects its own gc.collect() finds unreachable, asked after the core, are leaks of the core
    (docs/usage.md: 247 of 270 on this machine), and `leaks --by site` counts at least as many blocks as the
    collector's garbage at most of the lines tracemalloc names for it."""

    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        oracle = os.path.join(directory, "pydoc-server.oracle")
        cls.core = os.path.join(directory, "pydoc-server.core")
        server = subprocess.Popen([PYTHON, PYDOC_SERVER, oracle], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONTRACEMALLOC="1"))
        try:
            ready, port = server.stdout.readline().split()
            if ready != b"READY":
                raise AssertionError(f"pydoc's server did not start (exit status {server.poll()})")
            base = f"http://localhost:{int(port)}/"
            for page in PYDOC_PAGES:
                urllib.request.urlopen(base + page + ".html", timeout=60).read()
            for key in PYDOC_SEARCHES:
                urllib.request.urlopen(base + "search?key=" + key, timeout=60).read()
            # The server thread finishes a request after its answer is sent: what it still holds then is
            # garbage by the time the collector is asked. It serves one request at a time, so a last cheap
            # one (its style sheet) is answered only once the search is done with; the core then waits
            # until every thread sleeps.
            urllib.request.urlopen(base + "_pydoc.css", timeout=60).read()
            wait_until_asleep(server.pid)
            take_core(server.pid, cls.core)
            server.send_signal(signal.SIGUSR1)
            if server.stdout.readline().strip() != b"DONE":
                raise AssertionError("pydoc's server wrote no collector's account")
            with open(oracle, encoding="ascii") as f:
                cls.oracle = json.load(f)
        finally:
            server.kill()
            server.wait()
            server.stdout.close()
        cls.leaked = heapscope_json("blocks", cls.core, "--state", "leaked")["blocks"]
        cls.by_site = heapscope_json("leaks", cls.core, "--by", "site")
        cls.histogram = heapscope_json("histogram", cls.core, "--by", "site")

    def test_the_collectors_garbage_is_leaked(self):
        blocks = sorted(self.leaked, key=lambda b: b["address"])
        starts = [b["address"] for b in blocks]

        def leaked(address):
            i = bisect.bisect_right(starts, address) - 1
            return i >= 0 and address < starts[i] + blocks[i]["usable_size"]

        garbage = self.oracle["ids"]
        self.assertGreaterEqual(len(garbage), 50, "pydoc left too little garbage to compare")
        found = sum(leaked(x) for x in garbage)
        self.assertGreaterEqual(found, 0.85 * len(garbage), f"{found} of {len(garbage)}")

    def test_histogram_by_site_counts_what_tracemalloc_counts(self):
        # Every block in use by the line that allocated it: tracemalloc's own snapshot, taken in the process
        # just after the core, counts the same at its ten largest lines (within the few blocks its signal
        # handler's call allocates).
        counts = collections.Counter()
        for row in self.histogram["sites"]:
            frames = (row["site"] or {}).get("frames") or []
            if frames:
                counts[frames[0]["text"]] += row["count"]
        largest = sorted(self.oracle["traced"].items(), key=lambda item: -item[1][1])[:10]
        for line, (count, _) in largest:
            with self.subTest(line=line):
                self.assertLessEqual(abs(counts[line] - count), max(3, count // 100), (counts[line], count))

    def test_leaks_by_site_names_where_tracemalloc_says(self):
        self.assertEqual(self.by_site["sites"]["source"], "tracemalloc")
        counts = collections.Counter()
        for group in self.by_site["groups"]:
            frames = (group["site"] or {}).get("frames") or []
            if frames:
                counts[frames[0]["text"]] += group["count"]
        lines = {line: n for line, n in self.oracle["lines"].items() if line != "untraced"}
        covered = [line for line, n in lines.items() if counts[line] >= n]
        self.assertGreaterEqual(len(covered), 0.85 * len(lines), sorted(set(lines) - set(covered)))


@unittest.skipUnless(os.access(GUILE, os.X_OK), "Guile 3.0 is not installed (apt-get install guile-3.0)")
class GuileWithBoehmGc(RemovesItsCore, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        program = os.path.join(directory, "guile-list.scm")
        cls.core = os.path.join(directory, "guile-list.core")
        with open(program, "w", encoding="ascii") as f:
            f.write(GUILE_PROGRAM.replace("{pairs}", str(GUILE_PAIRS)))
        guile = subprocess.Popen([GUILE, "--no-auto-compile", program], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            heap_line = guile.stdout.readline().split()
            if guile.stdout.readline().strip() != b"READY" or heap_line[:1] != [b"heap-size"]:
                raise AssertionError(f"guile did not print its heap size and READY (exit status {guile.poll()})")
            cls.heap_size = int(heap_line[1])
            take_core(guile.pid, cls.core)
        finally:
            guile.kill()
            guile.wait()
            guile.stdout.close()
        cls.summary = heapscope_json("summary", cls.core)

    def test_the_collectors_heap_is_walked_and_its_figures_are_the_walks(self):
        self.assertTrue(self.summary["heap"]["allocator"].endswith("+ Boehm GC"), self.summary["heap"]["allocator"])
        self.assertTrue(self.summary["heap"]["complete"])
        for name in ("GC_get_heap_size()", "GC_get_free_bytes()", "GC_get_unmapped_bytes()"):
            own = figure(self.summary, name)
            self.assertEqual(own["own"], own["walk"], name)
        # Guile's own (gc-stats) just before READY: the heap's size never goes down, and printing READY
        # allocates too little to grow it.
        self.assertEqual(figure(self.summary, "GC_get_heap_size()")["own"], self.heap_size)

    def test_the_list_is_the_largest_retained(self):
        # The list's pairs are 16-byte objects; Guile's own stacks and registers may also point into its
        # middle (conservatively scanned, as the collector scans them), so its head retains most of it, not
        # always all.
        top = heapscope_json("top", self.core, "-n", "5")
        self.assertGreaterEqual(top["rows"][0]["retained_blocks"], GUILE_PAIRS // 2, top["rows"][0])
        self.assertEqual(heapscope_json("verify", self.core)["findings"], [])

    def test_no_block_is_named_by_the_c_librarys_own_structures(self):
        # Of guile's modules only the C library has DWARF here (libc6-dbg), and its structures (list_head,
        # malloc_chunk, nameserver_list, ...) are its own bookkeeping: layout inference names nothing.
        leaks = heapscope_json("leaks", self.core)
        self.assertEqual([g["type"] for g in leaks["groups"] if g["naming"] == "inferred"], [])


TROFF_PAGE = r""".TH DEMO 1
.SH NAME
demo \- a page
.SH DESCRIPTION
Some text with \fBbold\fR and \fIitalic\fR words.
.TP
.B \-x
An option.
"""


def scratch_with_page(prefix):
    """A scratch directory and TROFF_PAGE written in it."""
    scratch = tempfile.mkdtemp(prefix=prefix)
    page = os.path.join(scratch, "demo.1")
    with open(page, "w", encoding="ascii") as f:
        f.write(TROFF_PAGE)
    return scratch, page


def troff_core_at_exit(scratch, page, **environment):
    """troff formatting `page`, stopped as it exits (its exit handlers have run, where memcheck and heaptrack
    look for leaks too), under gdb (address randomisation off) with `environment`: its core's path."""
    core = os.path.join(scratch, "troff.core")
    settings = [arg for name, value in environment.items() for arg in ("-ex", f"set environment {name} {value}")]
    subprocess.run(["gdb", "-batch", "-nx", *settings, "-ex", "catch syscall exit_group",
                    "-ex", f"run -man -Tutf8 {page} > /dev/null", "-ex", f"gcore {core}", "-ex", "kill", TROFF],
                   capture_output=True, text=True, timeout=GCORE_TIMEOUT_SECONDS)
    return core


@unittest.skipUnless(os.access(TROFF, os.X_OK), "groff's troff is not installed (apt-get install groff-base)")
@unittest.skipIf(VALGRIND is None, "valgrind is not installed (scripts/install-deps installs it)")
class TroffAtExitBesideValgrind(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch, page = scratch_with_page("heapscope-troff-")
        cls.core = troff_core_at_exit(cls.scratch, page)
        valgrind = subprocess.run([VALGRIND, "--leak-check=full", TROFF, "-man", "-Tutf8", page],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=GCORE_TIMEOUT_SECONDS)
        cls.lost = cls.lost_bytes = 0
        for line in valgrind.stderr.splitlines():
            for kind in ("definitely lost:", "indirectly lost:"):
                if kind in line:
                    bytes_text, blocks_text = line.split(kind)[1].split("bytes in")
                    cls.lost += int(blocks_text.split()[0].replace(",", ""))
                    cls.lost_bytes += int(bytes_text.strip().replace(",", ""))
        cls.leaks = heapscope_json("leaks", cls.core)
        cls.text = run_heapscope("leaks", cls.core).stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_leaks_are_valgrinds(self):
        self.assertGreater(self.lost, 0, "troff leaks at exit")
        self.assertEqual(self.leaks["totals"]["blocks"], self.lost)

    def test_the_bytes_counted_are_said(self):
        # The same blocks, more bytes: heapscope counts usable sizes, valgrind requested ones, and says so.
        self.assertGreater(self.leaks["totals"]["bytes"], self.lost_bytes)
        self.assertEqual(self.leaks["bytes_counted"], "usable")
        self.assertIn("Bytes are usable sizes (what the allocator gave each block); valgrind counts the sizes asked for",
                      self.text)


def heaptrack_unfreed(path):
    """What heaptrack 1.4's data file `path` (zstd text, as heaptrack_interpret writes it) says was never
    freed: {(stack of (module, return address), innermost first): blocks}. Its lines: `s` strings (module
    paths among them), `i ip module-string …` instruction pointers, `t ip parent` traces (ips and traces
    1-based, 0 ends a trace), `a size trace` allocation kinds (0-based), `+ kind` and `- kind` each
    allocation and free. heaptrack writes a call's address, one before the return address."""
    text = subprocess.run(["zstdcat", path], capture_output=True, text=True, check=True).stdout
    strings, ips, traces, kinds = [], [], [], []
    unfreed = collections.Counter()
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        tag, numbers = fields[0], fields[1:]
        if tag == "s":
            strings.append(line.split(" ", 2)[2])
        elif tag == "i":
            ips.append((library_name(strings[int(numbers[1], 16) - 1]), int(numbers[0], 16) + 1))
        elif tag == "t":
            traces.append((int(numbers[0], 16), int(numbers[1], 16)))
        elif tag == "a":
            kinds.append(int(numbers[1], 16))
        elif tag in "+-":
            unfreed[kinds[int(numbers[0], 16)]] += 1 if tag == "+" else -1
    stacks = collections.Counter()
    for trace, blocks in unfreed.items():
        stack = []
        while trace:
            ip, trace = traces[trace - 1]
            stack.append(ips[ip - 1])
        if blocks > 0:
            stacks[tuple(stack)] += blocks
    return stacks


def library_name(path):
    """libstdc++ for /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30 and /lib/x86_64-linux-gnu/libstdc++.so.6."""
    return os.path.basename(path).split(".so")[0]


def module_of(address, modules):
    """The module of `modules` (summary's JSON) whose load bias is nearest below `address`."""
    below = [m for m in modules if m["load_bias"] <= address]
    return library_name(max(below, key=lambda m: m["load_bias"])["path"]) if below else "?"


def comparable(stack):
    """A stack as both sides can name it: troff's own frames by address (a PIE placed alike in both runs,
    with ASLR off), a library's frames by the library alone (heaptrack's and heapscope's preloads can move
    the libraries differently); at most the frames the recorder keeps."""
    return tuple((module, address if module == "troff" else 0) for module, address in stack[:RECORDER_MAX_FRAMES])


@unittest.skipUnless(os.access(TROFF, os.X_OK), "groff's troff is not installed (apt-get install groff-base)")
@unittest.skipIf(HEAPTRACK is None, "heaptrack is not installed (scripts/install-deps installs it)")
class TroffSitesBesideHeaptrack(unittest.TestCase):
    """One troff run recorded by heaptrack (every allocation, to a file) and one recorded by heapscope's
    recorder at every allocation, stopped as it exits (gcore): each stack's blocks not freed by then are
    heaptrack's "leaked" and heapscope's blocks at that site, and each site `leaks --by site` names has
    heaptrack's count.

    Two blocks differ by design: glibc's thread cache (allocated inside malloc, through no call heaptrack or
    the recorder sees: heapscope has it without a site) and libstdc++'s emergency exception pool, which
    heaptrack frees itself at exit (it calls __gnu_cxx::__freeres)."""

    @classmethod
    def setUpClass(cls):
        cls.scratch, page = scratch_with_page("heapscope-troff-sites-")
        subprocess.run(["setarch", "-R", HEAPTRACK, "-o", os.path.join(cls.scratch, "troff"), TROFF, "-man", "-Tutf8",
                        page], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       timeout=GCORE_TIMEOUT_SECONDS)
        cls.heaptrack = heaptrack_unfreed(os.path.join(cls.scratch, "troff.zst"))
        cls.core = troff_core_at_exit(cls.scratch, page, LD_PRELOAD=recorder_library(), HEAPSCOPE_SAMPLE_BYTES="1")
        cls.modules = heapscope_json("summary", cls.core)["modules"]
        cls.histogram = heapscope_json("histogram", cls.core, "--by", "site")
        cls.leaks = heapscope_json("leaks", cls.core, "--by", "site")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def named(self, stack):
        return comparable([(module_of(address, self.modules), address) for address in stack])

    def test_every_site_has_heaptracks_count(self):
        self.assertTrue(self.histogram["sites_note"]["exact"])
        ours = collections.Counter()
        for row in self.histogram["sites"]:
            ours[self.named(row["site"]["stack"]) if row["site"] else None] += row["count"]
        theirs = collections.Counter()
        for stack, blocks in self.heaptrack.items():
            theirs[comparable(stack)] += blocks
        self.assertEqual(ours.pop(None), 1, "glibc's thread cache, allocated inside malloc")
        pool = [key for key in ours if key not in theirs and key[0][0].startswith("libstdc++")]
        self.assertEqual(len(pool), 1, "libstdc++'s emergency pool, which heaptrack frees at exit")
        self.assertEqual(ours.pop(pool[0]), 1)
        self.assertGreater(len(theirs), 100)
        self.assertEqual(ours, theirs)

    def test_leaked_sites_have_heaptracks_counts(self):
        """heaptrack's leak report counts every block never freed, reachable or not; at each site `leaks --by
        site` names (troff's leaks are whole sites: arrays its static constructors fill and drop) heaptrack
        counts the same blocks."""
        self.assertGreater(self.leaks["totals"]["blocks"], 0)
        theirs = collections.Counter()
        for stack, blocks in self.heaptrack.items():
            theirs[comparable(stack)] += blocks
        for group in self.leaks["groups"]:
            with self.subTest(site=group["site"]["frames"][0]["text"]):
                self.assertEqual(group["count"], theirs[self.named(group["site"]["stack"])])


if __name__ == "__main__":
    unittest.main()
