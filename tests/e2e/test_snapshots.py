"""Heap snapshots, diffs and evolution on growing_cache (tests/fixtures/growing_cache.cpp), a program whose
CacheEntry cache grows by 100 entries at each of three stops while Setting stays flat, Request churns and
Batch rises and falls.

- Three cores, one per stop (gdb's gcore, the program waiting between stops): `heapscope diff c1 c2` puts
  CacheEntry first with the deltas the program's ledger gives, and, the cores being of one process, lists
  exactly the ledger's new entries as new blocks, held through the global g_buckets;
  `heapscope evolution c3 c1 c2` orders the cores by time, flags CacheEntry (only) as growing steadily and
  writes an SVG chart that parses as XML with one series per type.
- LLDB on the live program: `heap snapshot save a` at the first stop, `continue` to the second,
  `heap snapshot diff a` names CacheEntry first and lists new blocks at the ledger's new addresses with
  their retainers; `heap snapshot list` lists the snapshot. GDB does the same through the C API.
"""

import os
import selectors
import subprocess
import unittest
import xml.etree.ElementTree as ElementTree

from heapscope_e2e import fixture_path, heapscope_json, parse_ledger, run_heapscope, work_dir
from lldb_session import GCORE_TIMEOUT_SECONDS, READY_TIMEOUT_SECONDS, require_lldb_and_gdb, run_lldb
from test_gdb import json_between_markers, marked, run_gdb

FIXTURE = "growing_cache"
STOPS = 3
ENTRIES_PER_STEP = 100
# sizeof of each type in growing_cache.cpp (a static_assert there keeps them true).
SIZES = {"CacheEntry": 112, "Setting": 48, "Request": 208, "Batch": 312}
SVG = "{http://www.w3.org/2000/svg}"
# The fixture's types live in an anonymous namespace; reports name them as DWARF does.
TYPE = {name: "(anonymous namespace)::" + name for name in SIZES}


def usable_size(requested):
    """malloc_usable_size of a small request on x86-64 glibc: the 16-byte-rounded chunk minus one word."""
    return max(32, (requested + 8 + 15) & ~15) - 8


def live_of(ledger, type_name):
    return {a.address for a in ledger.live if a.size == SIZES[type_name]}


def capture_stops(key):
    """Runs the fixture, cores it with gcore at each of its three stops and copies its ledger there.
    Returns ([core paths], [ledgers]) in the order of the stops."""
    directory = work_dir()
    ledger_file = os.path.join(directory, f"{key}.ledger")
    cores = [os.path.join(directory, f"{key}-{stop}.core") for stop in range(1, STOPS + 1)]
    for stale in cores + [ledger_file]:
        if os.path.exists(stale):
            os.remove(stale)
    process = subprocess.Popen([fixture_path(FIXTURE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=dict(os.environ, HEAPSCOPE_LEDGER=ledger_file))
    ledgers = []
    try:
        for stop, core in enumerate(cores, 1):
            line = _read_line(process)
            if line != f"READY {stop}":
                raise AssertionError(f"{FIXTURE} printed {line!r} instead of READY {stop}")
            ledgers.append(parse_ledger(ledger_file))
            subprocess.run(["gdb", "-batch", "-nx", "-p", str(process.pid), "-ex", f"gcore {core}"],
                           capture_output=True, timeout=GCORE_TIMEOUT_SECONDS)
            if not os.path.isfile(core):
                raise AssertionError(f"gdb wrote no core at stop {stop}")
            if stop < STOPS:
                process.stdin.write(b"\n")
                process.stdin.flush()
    finally:
        process.kill()
        process.wait()
        process.stdin.close()
        process.stdout.close()
    return cores, ledgers


def _read_line(process):
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=READY_TIMEOUT_SECONDS):
            raise AssertionError(f"{FIXTURE} printed nothing within {READY_TIMEOUT_SECONDS} s")
    return process.stdout.readline().decode().strip()


def row_of(rows, name, key="type"):
    (row,) = [r for r in rows if r[key] == name]
    return row


class CoresOverTime(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cores, cls.ledgers = capture_stops("growing_cache-stops")
        cls.names = [os.path.basename(core) for core in cls.cores]
        cls.diff = heapscope_json("diff", cls.cores[0], cls.cores[1])

    def ledger_delta(self, type_name, before=0, after=1):
        return len(live_of(self.ledgers[after], type_name)) - len(live_of(self.ledgers[before], type_name))

    def test_the_ledger_tells_the_story(self):
        self.assertEqual([len(live_of(ledger, "CacheEntry")) for ledger in self.ledgers], [100, 200, 300])
        self.assertEqual([len(live_of(ledger, "Batch")) for ledger in self.ledgers], [60, 40, 80])
        self.assertEqual([len(live_of(ledger, "Request")) for ledger in self.ledgers], [0, 0, 0])

    def test_diff_puts_the_growing_type_first_with_the_ledgers_deltas(self):
        types = self.diff["types"]
        self.assertEqual(types[0]["type"], TYPE["CacheEntry"])
        self.assertEqual(types[0]["delta_count"], self.ledger_delta("CacheEntry"))
        self.assertEqual(types[0]["delta_count"], ENTRIES_PER_STEP)
        self.assertEqual(types[0]["delta_bytes"], ENTRIES_PER_STEP * usable_size(SIZES["CacheEntry"]))
        self.assertEqual(types[0]["after_count"], len(live_of(self.ledgers[1], "CacheEntry")))
        batch = row_of(types, TYPE["Batch"])
        self.assertEqual(batch["delta_count"], self.ledger_delta("Batch"))
        self.assertEqual(batch["delta_bytes"], -20 * usable_size(SIZES["Batch"]))
        setting = row_of(types, TYPE["Setting"])
        self.assertEqual((setting["before_count"], setting["delta_count"]), (32, 0))
        self.assertEqual([self.diff["before"]["name"], self.diff["after"]["name"]], self.names[:2])

    def test_diff_names_the_global_that_holds_the_growth(self):
        root = self.diff["roots"][0]
        self.assertEqual(root["root"], "global g_buckets in growing_cache")
        self.assertEqual(root["kind"], "global")
        self.assertEqual(root["delta_bytes"], ENTRIES_PER_STEP * usable_size(SIZES["CacheEntry"]))

    def test_cores_of_one_process_are_compared_address_by_address(self):
        self.assertTrue(self.diff["addresses_compared"])
        addresses = self.diff["addresses"]
        cache = row_of(addresses["by_type"], TYPE["CacheEntry"])
        new_entries = live_of(self.ledgers[1], "CacheEntry") - live_of(self.ledgers[0], "CacheEntry")
        self.assertEqual(cache["new_count"], len(new_entries))
        self.assertEqual(cache["gone_count"], 0)
        self.assertEqual(addresses["by_type"][0]["type"], TYPE["CacheEntry"])
        gone_batches = live_of(self.ledgers[0], "Batch") - live_of(self.ledgers[1], "Batch")
        self.assertEqual(row_of(addresses["by_type"], TYPE["Batch"])["gone_count"], len(gone_batches))
        samples = [s for s in addresses["new_samples"] if s["block"]["type"] == TYPE["CacheEntry"]]
        self.assertEqual(len(samples), 3)  # --sample's default
        for sample in samples:
            self.assertIn(sample["block"]["address"], new_entries)
            self.assertIn("g_buckets", sample["path"]["root"]["label"])

    def test_diff_options_follow_the_cores(self):
        diff = heapscope_json("diff", self.cores[0], self.cores[1], "-n", "2", "--sample", "1")
        self.assertEqual(len(diff["types"]), 2)
        self.assertEqual(len([s for s in diff["addresses"]["new_samples"] if s["block"]["type"] == TYPE["CacheEntry"]]), 1)
        text = run_heapscope("diff", self.cores[0], self.cores[1])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("CacheEntry", text.stdout.split("By type")[1].splitlines()[2])

    def test_evolution_orders_by_capture_time_and_flags_the_steady_grower(self):
        evolution = heapscope_json("evolution", self.cores[2], self.cores[0], self.cores[1])
        self.assertEqual([p["name"] for p in evolution["points"]], self.names)
        first = evolution["series"][0]
        self.assertEqual(first["type"], TYPE["CacheEntry"])
        self.assertTrue(first["steady"])
        self.assertEqual(first["counts"], [100, 200, 300])
        self.assertEqual(first["bytes"], [n * usable_size(SIZES["CacheEntry"]) for n in (100, 200, 300)])
        self.assertEqual([s["type"] for s in evolution["series"] if s["steady"]], [TYPE["CacheEntry"]])
        batch = row_of(evolution["series"], TYPE["Batch"])
        self.assertEqual(batch["counts"], [60, 40, 80])
        self.assertFalse(batch["steady"])

    def test_keep_order_keeps_the_order_given(self):
        evolution = heapscope_json("evolution", "--keep-order", self.cores[2], self.cores[0], self.cores[1])
        self.assertEqual([p["name"] for p in evolution["points"]], [self.names[2], self.names[0], self.names[1]])
        self.assertFalse(row_of(evolution["series"], TYPE["CacheEntry"])["steady"])

    def test_evolution_writes_an_svg_chart_with_one_series_per_type(self):
        chart = os.path.join(work_dir(), "growing_cache-evolution.svg")
        if os.path.exists(chart):
            os.remove(chart)
        result = run_heapscope("evolution", *self.cores, "-n", "4", "-o", chart)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("svg", result.stdout)
        root = ElementTree.parse(chart).getroot()
        self.assertEqual(root.tag, SVG + "svg")
        series = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
        self.assertEqual(len(series), 4)
        self.assertEqual(series[0].get("data-name"), TYPE["CacheEntry"])
        self.assertEqual([g.get("data-name") for g in series if g.get("data-highlighted") == "true"], [TYPE["CacheEntry"]])
        for g in series:
            self.assertEqual(len(g.findall(SVG + "circle")), STOPS)
        labels = " ".join(t.text or "" for t in root.iter(SVG + "text"))
        self.assertIn("KiB", labels)
        for name in self.names:
            self.assertIn(name, labels)

    def test_debuggers_compare_their_stop_with_earlier_cores_as_the_cli_does(self):
        """`heap diff OLD` and `heap evolution CORE…` are table commands: in LLDB and GDB on the last core they
        open the earlier cores themselves and give the CLI's figures."""
        require_lldb_and_gdb()
        executable = fixture_path(FIXTURE)
        cli_diff = heapscope_json("diff", self.cores[1], self.cores[2])
        cli_evolution = heapscope_json("evolution", *self.cores)
        lldb = run_lldb([f"target create {executable} --core {self.cores[2]}",
                         f"heap diff {self.cores[1]} --json", f"heap evolution {self.cores[1]} {self.cores[0]} --json"])
        gdb = run_gdb(marked("diff", f"heap diff {self.cores[1]} --json") +
                      marked("evolution", f"heap evolution {self.cores[0]} {self.cores[1]} --json"),
                      executable, self.cores[2])
        for frontend, diff, evolution in (
                ("lldb", lldb.json_of(f"heap diff {self.cores[1]} --json"),
                 lldb.json_of(f"heap evolution {self.cores[1]} {self.cores[0]} --json")),
                ("gdb", json_between_markers(gdb, "diff"), json_between_markers(gdb, "evolution"))):
            with self.subTest(frontend=frontend):
                self.assertEqual(diff["types"], cli_diff["types"])
                self.assertEqual(diff["roots"], cli_diff["roots"])
                self.assertEqual(diff["before"]["name"], self.names[1])
                self.assertEqual(diff["addresses"]["by_type"], cli_diff["addresses"]["by_type"])
                # The earlier cores by time, then the debugger's own stop.
                self.assertEqual([p["name"] for p in evolution["points"]][:2], self.names[:2])
                self.assertEqual(len(evolution["points"]), STOPS)
                self.assertEqual(evolution["series"], cli_evolution["series"])

    def test_a_core_that_cannot_be_read_is_named(self):
        missing = os.path.join(work_dir(), "no-such.core")
        result = run_heapscope("evolution", self.cores[0], missing)
        self.assertEqual(result.returncode, 1)
        self.assertIn(missing, result.stderr)
        result = run_heapscope("diff", missing, self.cores[0])
        self.assertEqual(result.returncode, 1)
        self.assertIn(missing, result.stderr)


def live_commands(ledger_file):
    """Breakpoint at the fixture's checkpoint, the first stop, a snapshot, the second stop, the diff."""
    return ["breakpoint set -n growing_cache_checkpoint",
            f"settings set target.env-vars HEAPSCOPE_LEDGER={ledger_file}",
            "process launch -i /dev/null -o /dev/null -e /dev/null",
            "heap snapshot save a",
            "continue",
            "heap snapshot diff a --json",
            "heap snapshot list",
            "heap snapshot diff a",
            "process kill"]


class SnapshotsInLldb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.ledger_file = os.path.join(work_dir(), "growing_cache-lldb.ledger")
        if os.path.exists(cls.ledger_file):
            os.remove(cls.ledger_file)
        cls.lldb = run_lldb(live_commands(cls.ledger_file), lldb_args=[fixture_path(FIXTURE)])
        cls.diff = cls.lldb.json_of("heap snapshot diff a --json")
        cls.ledger = parse_ledger(cls.ledger_file)  # written at the second stop, the last one reached

    def test_diff_across_a_continue_names_the_growing_type_first(self):
        self.assertEqual(self.diff["types"][0]["type"], TYPE["CacheEntry"])
        self.assertEqual(self.diff["types"][0]["delta_count"], ENTRIES_PER_STEP)
        self.assertEqual(self.diff["before"]["name"], "a")
        self.assertEqual(self.diff["after"]["name"], "now")
        self.assertEqual(self.diff["before"]["pid"], self.diff["after"]["pid"])

    def test_new_blocks_are_at_the_ledgers_addresses_with_their_retainers(self):
        self.assertTrue(self.diff["addresses_compared"])
        cache = row_of(self.diff["addresses"]["by_type"], TYPE["CacheEntry"])
        self.assertEqual(cache["new_count"], ENTRIES_PER_STEP)
        samples = self.diff["addresses"]["new_samples"]
        self.assertGreaterEqual(len(samples), 3)
        entries = live_of(self.ledger, "CacheEntry")
        for sample in samples:
            if sample["block"]["type"] == TYPE["CacheEntry"]:
                self.assertIn(sample["block"]["address"], entries)
                self.assertIn("g_buckets", sample["path"]["root"]["label"])

    def test_list_and_text_diff(self):
        listing = self.lldb.output_of("heap snapshot list")
        self.assertIn("1 saved snapshot", listing)
        self.assertIn("a: ", listing)
        text = self.lldb.output_of("heap snapshot diff a")
        self.assertIn("Same process, compared address by address", text)
        self.assertIn("path: global g_buckets", text)


class SnapshotsInGdb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.gdb = run_gdb(["break growing_cache_checkpoint", "run < /dev/null > /dev/null",
                           "heap snapshot save a", "continue"] + marked("diff", "heap snapshot diff a --json") +
                          marked("list", "heap snapshot list") + ["kill"], fixture_path(FIXTURE))

    def test_diff_across_a_continue_names_the_growing_type_first(self):
        diff = json_between_markers(self.gdb, "diff")
        self.assertEqual(diff["types"][0]["type"], TYPE["CacheEntry"])
        self.assertEqual(diff["types"][0]["delta_count"], ENTRIES_PER_STEP)
        self.assertTrue(diff["addresses_compared"])
        self.assertEqual(row_of(diff["addresses"]["by_type"], TYPE["CacheEntry"])["new_count"], ENTRIES_PER_STEP)


if __name__ == "__main__":
    unittest.main()
