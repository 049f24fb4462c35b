"""Interior-pointer idioms (model/interior_idioms.h) against valgrind's memcheck as the oracle.

tests/fixtures/interior_idioms.cpp holds blocks only through interior pointers: in each of the four idioms
memcheck knows, plain ones no idiom explains, and redis-like length-prefixed strings (SDS) in a table in the
heap. The fixture runs twice: parked, its core captured for heapscope, and under memcheck to exit. For each
setting of --leak-check-heuristics (memcheck's option, and heapscope's of the same name) the two must
agree on how many blocks are possibly lost and how many each idiom alone makes reachable. memcheck knows
no length-prefixed idiom: heapscope's own is checked against the fixture's counts, and left out of the
comparison by naming memcheck's four explicitly."""

import os
import re
import shutil
import subprocess
import unittest

from heapscope_e2e import capture_program, fixture_path, heapscope_json

VALGRIND = shutil.which("valgrind")
VALGRIND_TIMEOUT_SECONDS = 300
MEMCHECK_IDIOMS = ("stdstring", "length64", "newarray", "multipleinheritance")
# tests/fixtures/interior_idioms.cpp's counts.
COUNTS = {"stdstring": 3, "length64": 4, "newarray": 5, "multipleinheritance": 6}
PLAIN_INTERIOR, SHORT_SDS, SDS8 = 7, 20, 24

SUMMARY_LINE = re.compile(r"^==\d+==\s+(definitely lost|indirectly lost|possibly lost|still reachable):"
                          r" ([\d,]+) bytes in ([\d,]+) blocks")
HEURISTIC_LINE = re.compile(r"^==\d+==\s+(\w+)\s*: ([\d,]+) bytes in ([\d,]+) blocks")


def number(text):
    return int(text.replace(",", ""))


def memcheck(heuristics):
    """{'possibly lost': blocks, ..., 'via': {idiom: blocks}} from memcheck's leak summary at exit."""
    return memcheck_summary(fixture_path("interior_idioms"), heuristics)


def memcheck_summary(fixture, heuristics):
    """memcheck's leak summary of `fixture` run to exit with --exit (the fixtures that park for a core take
    it), as memcheck() gives it."""
    result = subprocess.run(
        [VALGRIND, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=all",
         f"--leak-check-heuristics={heuristics}", fixture, "--exit"],
        capture_output=True, text=True, timeout=VALGRIND_TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise AssertionError(f"{fixture} under valgrind exited {result.returncode}:\n{result.stderr[-2000:]}")
    summary = {"via": {}}
    in_summary = in_heuristics = False
    for line in result.stderr.splitlines():
        if "LEAK SUMMARY" in line:
            in_summary = True
            continue
        if not in_summary:
            continue
        if match := SUMMARY_LINE.match(line):
            summary[match.group(1)] = number(match.group(3))
            in_heuristics = False
        elif "of which reachable via heuristic" in line:
            in_heuristics = True
        elif in_heuristics and (match := HEURISTIC_LINE.match(line)):
            summary["via"][match.group(1)] = number(match.group(3))
    if "possibly lost" not in summary and "still reachable" not in summary:
        raise AssertionError(f"no leak summary in memcheck's output:\n{result.stderr[-3000:]}")
    summary.setdefault("possibly lost", 0)
    return summary


def heapscope(core, heuristics):
    leaks = heapscope_json("leaks", core, "--leak-check-heuristics", heuristics)
    via = {}
    for group in leaks["held_by_idioms"]:
        via[group["idiom"]] = via.get(group["idiom"], 0) + group["blocks"]
    return leaks, via


@unittest.skipIf(VALGRIND is None, "valgrind is not installed (scripts/install-deps installs it)")
class InteriorIdiomsAgainstMemcheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core, _ = capture_program("interior_idioms", fixture_path("interior_idioms"))

    def compare(self, heuristics):
        oracle = memcheck(heuristics)
        leaks, via = heapscope(self.core, heuristics)
        self.assertEqual(leaks["totals"]["possibly"]["blocks"], oracle["possibly lost"], (heuristics, oracle, leaks["totals"]))
        self.assertEqual(via, {k: v for k, v in oracle["via"].items() if v}, (heuristics, oracle))
        self.assertEqual(leaks["totals"]["blocks"], oracle.get("definitely lost", 0) + oracle.get("indirectly lost", 0))
        return oracle, via

    def test_no_idiom(self):
        oracle, _ = self.compare("none")
        everything = sum(COUNTS.values()) + PLAIN_INTERIOR + SHORT_SDS + SDS8
        self.assertEqual(oracle["possibly lost"], everything, "the fixture's blocks are all held by interior pointers")

    def test_each_idiom_alone(self):
        for idiom in MEMCHECK_IDIOMS:
            with self.subTest(idiom=idiom):
                _, via = self.compare(idiom)
                self.assertGreaterEqual(via.get(idiom, 0), COUNTS[idiom], via)

    def test_memchecks_four(self):
        _, via = self.compare(",".join(MEMCHECK_IDIOMS))
        self.assertEqual(via, COUNTS)

    def test_length_prefixed_strings_are_heapscopes_own(self):
        leaks, via = heapscope(self.core, "all")
        self.assertEqual(via, {**COUNTS, "length-prefixed": SHORT_SDS + SDS8})
        offsets = {g["offset"]: g["blocks"] for g in leaks["held_by_idioms"] if g["idiom"] == "length-prefixed"}
        self.assertEqual(offsets, {1: SHORT_SDS, 3: SDS8})
        self.assertEqual(leaks["totals"]["possibly"]["blocks"], PLAIN_INTERIOR)

    def test_the_default_is_all(self):
        self.assertEqual(heapscope_json("leaks", self.core), heapscope_json("leaks", self.core, "--leak-check-heuristics", "all"))

    def test_a_wrong_idiom_is_refused(self):
        from heapscope_e2e import run_heapscope
        result = run_heapscope("leaks", self.core, "--leak-check-heuristics", "stdstrings")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("unknown idiom 'stdstrings'", result.stderr)


if __name__ == "__main__":
    unittest.main()
