"""Allocation sites from the allocator's own sampling: jemalloc's heap profiling (MALLOC_CONF=prof:true) keeps
each sampled block's stack, which heapscope reads from the core or the live process (model/provenance.h).

The fixture (tests/fixtures/allocation_sites.c) allocates from four known functions, one of which leaks, and
tags each block in its ledger with the function. With lg_prof_sample:0 every allocation is sampled, so every
block's site and every site's count are exact; jemalloc's own heap profile (mallctl "prof.dump"), written by
the fixture at the very stop the core is taken, is the oracle for the sampled blocks and their stacks. At
jemalloc's default rate (one sample per 512 KiB on average), the estimates of four bulk sites are checked
against the bytes the fixture is known to allocate.
"""

import collections
import json
import os
import re
import unittest

from heapscope_e2e import capture_program, fixture_path, heapscope_json, parse_ledger, run_heapscope, work_dir
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import ParkedProgram
from test_gdb import json_between_markers, marked, run_gdb

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TCMALLOC_MINIMAL = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
FIXTURE = "allocation_sites"
EVERY_ALLOCATION = {"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "prof:true,lg_prof_sample:0"}
DEFAULT_RATE = {"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "prof:true"}
SITES = {"make_sessions": 40, "make_buffers": 12, "make_images": 3, "lose_records": 25}
LEAKING_SITE = "lose_records"
# The bulk sites' bytes (allocation_sites.c, --bulk): every size is a jemalloc size class, so usable bytes
# are the bytes asked for.
BULK_BYTES = {"bulk_huge": 32 * (4 << 20), "bulk_large": 256 * (1 << 20), "bulk_medium": 8192 * (64 << 10),
              "bulk_small": 524288 * 1024}


def require_fixture():
    if not os.path.exists(JEMALLOC):
        raise unittest.SkipTest(f"{JEMALLOC} is not installed (scripts/install-deps)")


def capture_with_dump():
    """The fixture's core under jemalloc sampling every allocation, its ledger, and the heap profile
    jemalloc wrote at the same stop."""
    dump = os.path.join(work_dir(), "allocation_sites-prof.heap")
    executable = fixture_path(FIXTURE)
    core, ledger = capture_program("allocation_sites-prof", executable, env=EVERY_ALLOCATION, args=("--dump", dump))
    if not os.path.exists(dump) or os.path.getmtime(dump) + 60 < os.path.getmtime(core):
        os.remove(core)  # a core kept from before without its profile: take both again
        core, ledger = capture_program("allocation_sites-prof", executable, env=EVERY_ALLOCATION, args=("--dump", dump))
    return executable, core, parse_ledger(ledger), dump


def read_prof_dump(path):
    """jemalloc's heap profile (heap_v2): {stack (tuple of return addresses): (objects, bytes)} and the
    profile's own totals."""
    sites, totals, stack = {}, None, None
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("heap_v2/"):
                continue
            if line.startswith("@"):
                stack = tuple(int(pc, 16) for pc in line.split()[1:])
                continue
            match = re.match(r"\s+t\*: (\d+): (\d+) \[", line)
            if match:
                counts = (int(match.group(1)), int(match.group(2)))
                if stack is None:
                    totals = counts
                else:
                    sites[stack] = counts
                    stack = None
            if line.startswith("MAPPED_LIBRARIES"):
                break
    return sites, totals


def top_function(site):
    return site["frames"][0]["function"] if site and site["frames"] else None


def by_function(histogram):
    """histogram --by site --json: {innermost function of the program: row}."""
    return {top_function(row["site"]): row for row in histogram["sites"] if row["site"]}


class EverySampledOnACore(unittest.TestCase):
    """lg_prof_sample:0: every block of the fixture has its site, and counts are exact."""

    @classmethod
    def setUpClass(cls):
        require_fixture()
        cls.executable, cls.core, cls.ledger, cls.dump = capture_with_dump()
        cls.histogram = heapscope_json("histogram", cls.core, "--by", "site", "--examples", "1000")

    def test_every_block_is_at_its_site(self):
        rows = by_function(self.histogram)
        expected = collections.defaultdict(set)
        for allocation in self.ledger.live:
            expected[allocation.how].add(allocation.address)
        for function, addresses in expected.items():
            self.assertEqual(set(rows[function]["examples"]), addresses, function)

    def test_histogram_counts_are_exact(self):
        rows = by_function(self.histogram)
        for function, count in SITES.items():
            self.assertEqual(rows[function]["count"], count, function)
            self.assertEqual(rows[function]["leaked_count"], count if function == LEAKING_SITE else 0, function)
        self.assertTrue(self.histogram["sites_note"]["exact"])
        self.assertNotIn("estimated_bytes", rows["make_sessions"])

    def test_leaks_by_site_name_the_leaking_function(self):
        leaks = heapscope_json("leaks", self.core, "--by", "site")
        self.assertEqual(leaks["by"], "site")
        groups = [g for g in leaks["groups"] if g["site"]]
        self.assertEqual([top_function(g["site"]) for g in groups], [LEAKING_SITE])
        self.assertEqual((groups[0]["count"], groups[0]["direct"]), (SITES[LEAKING_SITE], SITES[LEAKING_SITE]))
        self.assertEqual(leaks["totals"]["blocks"], SITES[LEAKING_SITE])

    def test_describe_says_where_each_kind_of_block_was_allocated(self):
        for function in SITES:
            allocation = next(a for a in self.ledger.live if a.how == function)
            report = heapscope_json("describe", self.core, hex(allocation.address))
            site = report["allocated_at"]
            self.assertEqual(top_function(site), function)
            self.assertEqual(site["frames"][0]["file"].rsplit("/", 1)[-1], "allocation_sites.c")
            self.assertEqual(site["frames"][1]["function"], "main")
            self.assertEqual(site["requested"], allocation.size)
        text = run_heapscope("describe", self.core, hex(self.ledger.live[0].address)).stdout
        self.assertRegex(text, r"allocated at: make_sessions\(\) at allocation_sites\.c:\d+\n\s+← main\(\)")

    def test_stack_shows_every_frame(self):
        address = hex(self.ledger.live[0].address)
        short = heapscope_json("retainers", self.core, address)["allocated_at"]
        whole = heapscope_json("retainers", self.core, address, "--stack")["allocated_at"]
        self.assertEqual(whole["more_frames"], 0)
        self.assertEqual(whole["frames"][:len(short["frames"])], short["frames"])
        self.assertEqual(len(whole["frames"]), len(short["frames"]) + short["more_frames"])

    def test_sampled_blocks_and_stacks_equal_jemallocs_own_profile(self):
        dumped, totals = read_prof_dump(self.dump)
        ours = {tuple(row["site"]["stack"]): (row["count"], row["bytes"])
                for row in self.histogram["sites"] if row["site"]}
        self.assertEqual(ours, dumped)
        summary = heapscope_json("summary", self.core)["heap"]["allocation_sites"]
        self.assertEqual(summary["blocks"], totals[0])
        self.assertEqual(summary["sites"], len(dumped))
        self.assertTrue(summary["present"] and summary["exact"])

    def test_top_ranks_sites_by_retained_bytes(self):
        top = heapscope_json("top", self.core, "--by", "site", "-n", "0")
        rows = {top_function(row.get("site")): row for row in top["rows"]}
        # The kept sites, each block reachable from its global table; the leaking site retains nothing.
        for function in ("make_sessions", "make_buffers", "make_images"):
            self.assertEqual(rows[function]["count"], SITES[function], function)
            self.assertGreaterEqual(rows[function]["retained_bytes"], rows[function]["bytes"], function)
        self.assertNotIn(LEAKING_SITE, rows)

    def test_html_report_has_a_where_allocated_section(self):
        page = run_heapscope("report", self.core, "--format", "html").stdout
        self.assertIn("Where allocated", page)
        self.assertIn('data-table="sites"', page)
        self.assertIn("lose_records() at allocation_sites.c:", page)
        self.assertEqual(heapscope_json("report", self.core)["sites"]["by"], "site")

    def test_summary_says_sites_are_present(self):
        text = run_heapscope("summary", self.core).stdout
        self.assertRegex(text, r"Sites: +jemalloc heap profiling \(prof\), every allocation sampled: \d+ blocks at "
                               r"\d+ allocation sites")

    def test_lldb_and_gdb_say_what_the_cli_says(self):
        require_lldb_and_gdb()
        cli = heapscope_json("histogram", self.core, "--by", "site")
        lldb = run_lldb([f"target create {self.executable} --core {self.core}", "heap histogram --by site --json"])
        self.assertEqual(lldb.json_of("heap histogram --by site --json")["sites"], cli["sites"])
        gdb = run_gdb(marked("sites", "heap histogram --by site --json"), self.executable, self.core)
        self.assertEqual(json_between_markers(gdb, "sites")["sites"], cli["sites"])


class EverySampledLive(unittest.TestCase):
    """The running fixture, attached, gives what its core gives."""

    def test_attach_gives_the_sites_of_the_core(self):
        require_fixture()
        _, core, _, _ = capture_with_dump()
        environment = [f"{name}={value}" for name, value in EVERY_ALLOCATION.items()]
        with ParkedProgram("env", *environment, fixture_path(FIXTURE)) as program:
            live = heapscope_json("attach", program.pid, "histogram", "--by", "site")
        from_core = heapscope_json("histogram", core, "--by", "site")

        def tally(report):
            return {top_function(row["site"]): (row["count"], row["bytes"], row["leaked_count"])
                    for row in report["sites"]}
        self.assertEqual(tally(live), tally(from_core))
        for function, count in SITES.items():
            self.assertEqual(tally(live)[function][0], count)


class DefaultRateEstimates(unittest.TestCase):
    """At jemalloc's default rate, each bulk site's estimated bytes are within 10 % of what it allocated."""

    def test_estimates_are_within_a_tenth(self):
        require_fixture()
        environment = [f"{name}={value}" for name, value in DEFAULT_RATE.items()]
        with ParkedProgram("env", *environment, fixture_path(FIXTURE), "--bulk") as program:
            report = heapscope_json("attach", program.pid, "histogram", "--by", "site")
        note = report["sites_note"]
        self.assertEqual((note["exact"], note["mean_interval"]), (False, 512 * 1024))
        rows = by_function(report)
        for function, truth in BULK_BYTES.items():
            estimate = rows[function]["estimated_bytes"]
            self.assertLess(abs(estimate - truth) / truth, 0.10, f"{function}: {estimate:.0f} for {truth}")
            self.assertLessEqual(rows[function]["bytes"], truth)
        self.assertLess(rows["bulk_small"]["bytes"], BULK_BYTES["bulk_small"] / 100)  # few of its blocks are sampled


class WithoutSampling(unittest.TestCase):
    """Without sampling, the commands say how to have sites; nothing is guessed."""

    def test_jemalloc_without_prof_says_how_to_turn_it_on(self):
        require_fixture()
        core, _ = capture_program("allocation_sites-noprof", fixture_path(FIXTURE), env={"LD_PRELOAD": JEMALLOC})
        summary = heapscope_json("summary", core)["heap"]["allocation_sites"]
        self.assertEqual((summary["present"], summary["blocks"]), (False, 0))
        self.assertIn("MALLOC_CONF=prof:true", summary["note"])
        result = run_heapscope("histogram", core, "--by", "site")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("MALLOC_CONF=prof:true", result.stderr)
        describe = heapscope_json("describe", core, hex(heapscope_json("blocks", core, "--state", "used")["blocks"][0]["address"]))
        self.assertIsNone(describe["allocated_at"])
        self.assertIn("off", describe["no_site"])

    def test_tcmalloc_minimal_says_it_records_no_stacks(self):
        # Debian's libtcmalloc_minimal is built with NO_TCMALLOC_SAMPLES: asking for samples changes nothing.
        if not os.path.exists(TCMALLOC_MINIMAL):
            raise unittest.SkipTest(f"{TCMALLOC_MINIMAL} is not installed (scripts/install-deps)")
        core, _ = capture_program("allocation_sites-tcmalloc", fixture_path(FIXTURE),
                                  env={"LD_PRELOAD": TCMALLOC_MINIMAL, "TCMALLOC_SAMPLE_PARAMETER": "1"})
        summary = heapscope_json("summary", core)["heap"]
        self.assertEqual(summary["allocator"], "tcmalloc")
        self.assertFalse(summary["allocation_sites"]["present"])
        self.assertIn("built without sampling", summary["allocation_sites"]["note"])
        result = run_heapscope("histogram", core, "--by", "site")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("libtcmalloc_minimal is built without sampling", result.stderr)

    def test_glibc_without_the_recorder_says_how_to_have_sites(self):
        # glibc keeps no stacks; heapscope's recorder does (tests/e2e/test_sites_recorder.py).
        core, _ = capture_program("allocation_sites-glibc", fixture_path(FIXTURE))
        summary = heapscope_json("summary", core)["heap"]["allocation_sites"]
        self.assertFalse(summary["present"])
        self.assertIn("heapscope record", summary["note"])
        result = run_heapscope("leaks", core, "--by", "site")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("heapscope record -- PROGRAM", result.stderr)


if __name__ == "__main__":
    unittest.main()
