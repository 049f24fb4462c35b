"""CPython under its default allocator (pymalloc), as production runs it: the pools are walked beside malloc's
heap, exactly — the blocks in use of every size class are those sys._debugmallocstats() counted just before
the core —, their objects named by their own types (every user class counted as gc.get_objects() counts it),
and garbage cycles of __del__ objects, dropped with the collector disabled, found as leaks while nothing the
program holds is. On Debian's python3 (3.11) and on pyenv's 3.9 (4 KiB pools) and 3.13 (16 KiB pools, values
inline) when this machine has them; live with `heapscope attach` too.

tests/fixtures/python_pymalloc.py writes the ledger: a JSON line (census, the garbage objects' ids) and then
pymalloc's own statistics."""

import bisect
import glob
import json
import os
import re
import struct
import unittest

from allocator_walk import damaged_copy
from heapscope_e2e import RemovesItsCore, capture_program, heapscope_json, run_heapscope, work_dir
from lldb_session import parked_fixture, require_lldb_and_gdb, run_lldb
from test_attach import take_core
from test_gdb import between_markers, json_between_markers, marked, run_gdb

DEBIAN_PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python_pymalloc.py")
USERS, CYCLES = 20_000, 500
GARBAGE_FOUND = 0.99  # a few cycles stay reachable from the interpreter's stale slots (a frame's old locals)


def pyenv_python(release):
    """pyenv's interpreter of `release` ("3.9"), or None."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", release + ".*", "bin", "python" + release)))
    return found[-1] if found and os.access(found[-1], os.X_OK) else None


def read_ledger(path):
    """The fixture's JSON line, and its pymalloc statistics as {slot size: (pools, blocks in use)}."""
    with open(path, encoding="utf-8") as f:
        first, *rest = f.read().split("\n")
    ledger = json.loads(first)
    stats = {}
    for line in rest:
        fields = line.split()
        if len(fields) == 5 and all(f.isdigit() for f in fields):
            stats[int(fields[1])] = (int(fields[2]), int(fields[3]))
    return ledger, stats


def inside_any(blocks):
    """Whether an address (an object's id) lies in one of `blocks` (a `blocks --json` listing)."""
    blocks = sorted(blocks, key=lambda b: b["address"])
    starts = [b["address"] for b in blocks]

    def holds(address):
        i = bisect.bisect_right(starts, address) - 1
        return i >= 0 and address < starts[i] + blocks[i]["usable_size"]

    return holds


def pause_line():
    """The line of the fixture where serve() sleeps."""
    with open(SCRIPT, encoding="utf-8") as f:
        (line,) = [n for n, text in enumerate(f, 1) if "signal.pause()  # the line serve()'s frame is at" in text]
    return line


def pymalloc_figure(summary):
    (figure,) = [f for f in summary["heap"]["figures"] if f["name"] == "pools' counts of blocks in use"]
    return figure


class FixtureCore:
    """The fixture's core and ledger on the release PYTHON, captured once per KEY with the variables ENV and
    USERS users."""
    PYTHON = None
    KEY = None
    ENV = {"PYTHONMALLOC": "pymalloc"}
    USERS = USERS

    @classmethod
    def setUpClass(cls):
        if not cls.PYTHON:
            raise unittest.SkipTest("this CPython release is not installed")
        cls.core, ledger_file = capture_program(cls.KEY, cls.PYTHON, extra_sources=(SCRIPT,), env=cls.ENV,
                                                args=(SCRIPT, str(cls.USERS), str(CYCLES)))
        cls.ledger, cls.stats = read_ledger(ledger_file)


class PymallocChecks(FixtureCore):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.summary = heapscope_json("summary", cls.core)
        cls.leaked = heapscope_json("blocks", cls.core, "--state", "leaked")["blocks"]
        cls.histogram = {row["type"]: row for row in heapscope_json("histogram", cls.core)["types"]}

    def test_the_pools_hold_what_pymalloc_counts(self):
        figure = pymalloc_figure(self.summary)
        in_use = sum(blocks for _, blocks in self.stats.values())
        self.assertEqual(figure["own"], in_use)
        self.assertEqual(figure["walk"], in_use)
        self.assertTrue(self.summary["heap"]["complete"], self.summary["warnings"])

    def test_each_size_class_is_pymallocs(self):
        classes = {c["object_bytes"]: c for c in heapscope_json("fragmentation", self.core)["size_classes"]}
        for size, (pools, blocks) in self.stats.items():
            with self.subTest(size=size):
                self.assertEqual(classes[size]["in_use"], blocks)
                # pymalloc's rows leave out its empty pools, which the walk counts as free slabs.
                self.assertGreaterEqual(classes[size]["slabs"], pools)

    def test_every_user_class_is_counted_as_gc_counts_it(self):
        for name in ("Customer", "Point", "Garbage"):
            with self.subTest(type=name):
                self.assertEqual(self.histogram[name]["count"], self.ledger["census"][name])

    def test_the_garbage_cycles_are_leaked(self):
        leaked_block = inside_any(self.leaked)
        garbage = [int(x) for x in self.ledger["garbage"]]
        found = sum(leaked_block(x) for x in garbage)
        self.assertGreaterEqual(found, GARBAGE_FOUND * len(garbage), f"{found} of {len(garbage)}")

    def test_describe_names_an_objects_class(self):
        text = run_heapscope("describe", self.core, hex(int(self.ledger["customer"])))
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"^Block 0x[0-9a-f]+ \(Customer, \d+ bytes\)")

    def test_a_path_names_the_module_variable(self):
        # customers = [...] at module level: the module's dict keys' entry and the list's index say so. (A
        # Customer the fixture did not touch last: the one whose id it took may still sit in a frame's
        # spent value stack, a shorter path.)
        customer = heapscope_json("blocks", self.core, "--type", "Customer")["blocks"][USERS // 3]
        text = run_heapscope("retainers", self.core, hex(customer["address"]), "--paths", "6")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn('(["customers"])', text.stdout)
        if self.ledger["version"] >= [3, 11]:
            # The module's code runs in a frame whose globals are the module's dict: the first path says so.
            self.assertRegex(text.stdout, r"Path 1 \(\d+ steps\):\n  thread 1 \(tid \d+\), python frame <module>\(\) at "
                                          r"\S*python_pymalloc\.py:\d+, globals \[0x[0-9a-f]+\]\n  → [^\n]*\(dict, "
                                          r'\d+ bytes\)[^\n]*\n  → [^\n]*\(\["customers"\]\)')
        self.assertRegex(text.stdout, r"\(list items, \d+ bytes\), .*, pointer at \+0x[0-9a-f]+ \(\[\d+\]\)")
        # refs and describe name the same words.
        refs = run_heapscope("refs", self.core, hex(customer["address"])).stdout
        self.assertRegex(refs, r"block 0x[0-9a-f]+ \(list items, \d+ bytes\) at \+0x[0-9a-f]+ \(\[\d+\]\) → ")
        paths = heapscope_json("retainers", self.core, hex(customer["address"]), "--paths", "6")["paths"]
        keys = [step["address"] for path in paths for step in path["steps"] if step["field"] == '["customers"]']
        self.assertTrue(keys)
        described = run_heapscope("describe", self.core, hex(keys[0])).stdout
        self.assertRegex(described, r'\n  \+0x[0-9a-f]+ +\["customers"\] 0x[0-9a-f]+ → block ')

    def test_fields_are_named_as_python_names_them(self):
        # A __slots__ class's slots by name (its type's members), a header's words by what they are, and an
        # instance's attributes by their keys in its class's shared keys: in its split dict values (3.11,
        # 3.12), or inline past its type (3.13).
        point = heapscope_json("blocks", self.core, "--type", "Point")["blocks"][USERS // 3]
        described = run_heapscope("describe", self.core, hex(point["address"])).stdout
        self.assertRegex(described, r"\n  \+0x[0-9a-f]+ +\.x 0x[0-9a-f]+ → block ")
        self.assertRegex(described, r"\n  \+0x[0-9a-f]+ +\.y 0x[0-9a-f]+ → block ")
        self.assertRegex(described, r"\n  \+0x[0-9a-f]+ +gc list prev 0x")
        if self.ledger["version"] >= [3, 13]:  # the values inline, past the instance's type
            customer = heapscope_json("blocks", self.core, "--type", "Customer")["blocks"][USERS // 3]
            described = run_heapscope("describe", self.core, hex(customer["address"])).stdout
            for attribute in ("number", "name", "tags"):
                self.assertRegex(described, rf"\n  \+0x[0-9a-f]+ +\.{attribute} 0x[0-9a-f]+ → block ")
            return
        if self.ledger["version"] < [3, 11]:
            return
        values = heapscope_json("blocks", self.core, "--type", "Customer.__dict__ values")["blocks"][USERS // 3]
        described = run_heapscope("describe", self.core, hex(values["address"])).stdout
        tags = re.search(r"\n  \+0x[0-9a-f]+ +\.tags 0x[0-9a-f]+ → block (0x[0-9a-f]+)", described)
        self.assertTrue(tags, described)
        path = run_heapscope("retainers", self.core, tags.group(1)).stdout
        self.assertRegex(path, r"\(Customer, \d+ bytes\)[^\n]*pointer at \+0x0 \(its __dict__ values\)\n  → [^\n]*"
                               r"\(Customer\.__dict__ values, \d+ bytes\)[^\n]*\(\.tags\)\n  → [^\n]*\(list, ")

    def test_a_local_is_charged_to_its_python_frame(self):
        # serve() sleeps holding session_cache, a list of 50 Points nothing else holds: the list, its items
        # and the Points are the local's, in the frame of serve() at the line it sleeps on (3.11+: before,
        # frames were heap objects).
        if self.ledger["version"] < [3, 11]:
            self.skipTest("frames are heap objects before 3.11")
        frame = rf"thread 1 \(tid \d+\), python frame serve\(\) at \S*python_pymalloc\.py:{pause_line()}"
        text = run_heapscope("retainers", self.core, hex(int(self.ledger["local"])))
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"Path 1 \(1 step\):\n  " + frame + r", local session_cache \[0x")
        roots = heapscope_json("roots", self.core, "-n", "0")["roots"]
        (local,) = [r for r in roots if re.fullmatch(frame + ", local session_cache", r["label"])]
        self.assertEqual(local["kind"], "interpreter_frame")
        self.assertEqual(local["retained_blocks"], 52)
        (owner,) = [r for r in roots if re.fullmatch(frame, r["label"])]
        self.assertEqual(owner["owner"], local["owner"])
        self.assertRegex(owner["owner"], r"^thread 1 \(tid \d+\)$")

    def test_no_reference_by_the_interpreters_rules_keeps_garbage(self):
        # Cycles held only by weak references, by a dict keyed by their id()s (whose hashes are their
        # addresses), or by a returned call's spent locals in the data stack (3.11+) are garbage.
        leaked_block = inside_any(self.leaked)
        for kind, ids in self.ledger["special"].items():
            if kind == "touched" and self.ledger["version"] < [3, 11]:
                continue  # frames were objects before 3.11's data stack (a zombie frame keeps its last call's)
            with self.subTest(held_by=kind):
                self.assertEqual([x for x in ids if not leaked_block(int(x))], [])

    def test_nothing_the_program_holds_is_leaked(self):
        names = {b["type"] for b in self.leaked}
        for held in ("Customer", "Point", "list", "str", "bytes", "tuple"):
            self.assertNotIn(held, names)
        # Each cycle: two Garbage objects, their two dicts and what only they hold (their values and
        # numbers): nothing more than 8 blocks a cycle.
        self.assertLessEqual(len(self.leaked), 8 * (CYCLES + 3 * 20))


class TracemallocChecks(FixtureCore):
    """Under PYTHONTRACEMALLOC=1 the interpreter keeps a trace of every block it allocates: read from the core,
    each leaked object's site is the file and line tracemalloc itself gives for it in the process, and
    `leaks --by site` counts no more blocks at a line than tracemalloc's snapshot taken just before."""
    ENV = {"PYTHONMALLOC": "pymalloc", "PYTHONTRACEMALLOC": "1"}
    USERS = USERS // 10

    def test_a_leaked_objects_site_is_where_tracemalloc_says(self):
        objects = self.ledger["tracemalloc"]["objects"]
        self.assertGreaterEqual(len(objects), 100)
        for address, where in list(objects.items())[:20]:
            with self.subTest(object=address):
                text = run_heapscope("describe", self.core, hex(int(address)))
                self.assertEqual(text.returncode, 0, text.stderr)
                self.assertIn(f"allocated at: {where}\n", text.stdout)

    def test_leaks_by_site_names_the_line_that_allocated_them(self):
        report = heapscope_json("leaks", self.core, "--by", "site")
        self.assertEqual(report["sites"]["source"], "tracemalloc")
        rows = {row["site"]["frames"][0]["text"]: row for row in report["groups"]}
        garbage_lines = set(self.ledger["tracemalloc"]["objects"].values())
        # Every cycle's two objects (or their dicts) are leaked where they were allocated; no line of the
        # fixture has more leaked blocks than tracemalloc counts there; the largest site is one of its lines.
        counted = self.ledger["tracemalloc"]["lines"]
        for line in garbage_lines:
            self.assertGreaterEqual(rows[line]["count"], GARBAGE_FOUND * 2 * CYCLES)
        for line, row in rows.items():
            if line.startswith("python_pymalloc.py:"):
                with self.subTest(line=line):
                    self.assertLessEqual(row["count"], counted[line])
        self.assertIn(max(rows, key=lambda site: rows[site]["count"]), counted)


# Each set of checks on each release: Debian's python3 (3.11), pyenv's 3.9 (4 KiB pools) and 3.13 (16 KiB
# pools, values inline) — DebianPythonPymalloc, Pyenv39Tracemalloc, … (a release not installed skips).
RELEASES = (("DebianPython", DEBIAN_PYTHON if os.access(DEBIAN_PYTHON, os.X_OK) else None, ""),
            ("Pyenv39", pyenv_python("3.9"), "-3.9"), ("Pyenv313", pyenv_python("3.13"), "-3.13"))
for _release, _python, _suffix in RELEASES:
    for _checks, _key in ((PymallocChecks, "python-pymalloc"), (TracemallocChecks, "python-tracemalloc")):
        _name = _release + _checks.__name__.removesuffix("Checks")
        globals()[_name] = type(_name, (_checks, unittest.TestCase), {"PYTHON": _python, "KEY": _key + _suffix})


@unittest.skipUnless(os.access(DEBIAN_PYTHON, os.X_OK), "Debian's python3 is not installed")
class PymallocDamage(unittest.TestCase):
    """A pool whose free list leads astray: the walk goes on with a warning and a partial heap, `verify`
    names the pool, and `leaks` still answers."""

    def test_a_free_list_that_leads_astray_is_a_finding(self):
        core, _ = capture_program("python-pymalloc", DEBIAN_PYTHON, extra_sources=(SCRIPT,),
                                  env={"PYTHONMALLOC": "pymalloc"}, args=(SCRIPT, str(USERS), str(CYCLES)))
        summary = heapscope_json("summary", core)
        (pools,) = [d["address"] for d in summary["heap"]["discovery"] if d["structure"] == "pools"]
        slots = [b for b in heapscope_json("blocks", core, "--state", "free")["blocks"]
                 if b["usable_size"] <= 512 and b["arena"] == pools]
        self.assertTrue(slots)
        # A free slot's first word is the next free slot's address: half a slot past the pool's start is none.
        for slot in slots[:16]:
            pool = slot["address"] & ~(16384 - 1)
            bad = damaged_copy(core, "python-pymalloc-bad-free-list", {slot["address"]: struct.pack("<Q", pool + 8)})
            findings = heapscope_json("verify", bad)["findings"]
            if findings:
                break
        self.assertIn("free_list", [f["kind"] for f in findings])
        damaged = heapscope_json("summary", bad)
        self.assertFalse(damaged["heap"]["complete"])
        self.assertTrue(any(w.startswith("pymalloc free_list at ") for w in damaged["warnings"]), damaged["warnings"])
        self.assertEqual(run_heapscope("leaks", bad).returncode, 0)


@unittest.skipUnless(os.access(DEBIAN_PYTHON, os.X_OK), "Debian's python3 is not installed")
class PymallocLive(RemovesItsCore, unittest.TestCase):
    """`heapscope attach`, the LLDB plugin and GDB attached to the running process walk its pools as the core
    of the same stop holds them, and find the same leaks."""

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        directory = work_dir()
        ledger_file = os.path.join(directory, "python-pymalloc-live.ledger")
        cls.core = os.path.join(directory, "python-pymalloc-live.core")
        with parked_fixture(DEBIAN_PYTHON, ledger_file, "python_pymalloc", env={"PYTHONMALLOC": "pymalloc"},
                            args=(SCRIPT, str(USERS), str(CYCLES))) as process:
            cls.ledger, cls.stats = read_ledger(ledger_file)
            local = hex(int(cls.ledger["local"]))
            # The fixture sleeps in pause(): a debugger's stop and continue run no Python code.
            cls.lldb = run_lldb(["heap summary --json", "heap leaks --json", f"heap retainers {local}", "process detach"],
                                lldb_args=["-p", str(process.pid)])
            cls.gdb = run_gdb(marked("summary", "heap summary --json") + marked("leaks", "heap leaks --json") +
                              marked("retainers", f"heap retainers {local}") + ["detach"], "-p", str(process.pid))
            cls.live = heapscope_json("attach", process.pid, "summary")
            cls.live_leaks = heapscope_json("attach", process.pid, "leaks")
            cls.live_retainers = run_heapscope("attach", process.pid, "retainers", local).stdout
            take_core(process.pid, cls.core)

    def test_attach_walks_the_pools(self):
        in_use = sum(blocks for _, blocks in self.stats.values())
        self.assertEqual(pymalloc_figure(self.live)["walk"], in_use)

    def test_attach_reads_what_the_core_holds(self):
        self.assertEqual(pymalloc_figure(self.live), pymalloc_figure(heapscope_json("summary", self.core)))
        self.assertEqual(self.live_leaks["totals"], heapscope_json("leaks", self.core)["totals"])

    def test_every_frontend_charges_the_local_to_its_python_frame(self):
        frame = rf"thread 1 \(tid \d+\), python frame serve\(\) at \S*python_pymalloc\.py:{pause_line()}, local session_cache"
        for name, text in (("attach", self.live_retainers), ("lldb", self.lldb.output_of(
                f"heap retainers {hex(int(self.ledger['local']))}")), ("gdb", between_markers(self.gdb, "retainers"))):
            with self.subTest(frontend=name):
                self.assertRegex(text, r"Path 1 \(1 step\):\n  " + frame)

    def test_lldb_and_gdb_read_what_the_core_holds(self):
        from_core = pymalloc_figure(heapscope_json("summary", self.core))
        leaks = heapscope_json("leaks", self.core)["totals"]
        self.assertEqual(pymalloc_figure(self.lldb.json_of("heap summary --json")), from_core)
        self.assertEqual(self.lldb.json_of("heap leaks --json")["totals"], leaks)
        self.assertEqual(pymalloc_figure(json_between_markers(self.gdb, "summary")), from_core)
        self.assertEqual(json_between_markers(self.gdb, "leaks")["totals"], leaks)


if __name__ == "__main__":
    unittest.main()
