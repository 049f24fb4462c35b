"""heapscope's population idioms (model/idiom_census.h) on tests/fixtures/intrusive_idioms.c, whose blocks
C programs hold through pointers into their middle by design — an intrusive list (fixed-offset +8), a pool
of slots (pool), header-prefixed records (fixed-offset +16) — beside leaks of the same shapes and one block
held by a stray interior pointer. Ground truth is the fixture's own counts; valgrind's memcheck is the oracle
for what the same heap is without heapscope's idioms (--leak-check-heuristics memcheck, valgrind's default
set), where every block held by design is "possibly lost"."""

import shutil
import unittest

from heapscope_e2e import capture_program, fixture_path, heapscope_json, run_heapscope
from test_interior_idioms import memcheck_summary

VALGRIND = shutil.which("valgrind")

# tests/fixtures/intrusive_idioms.c's counts.
ENTRIES, LOST_ENTRIES, SLOTS, RECORDS_PER_SIZE, DIRECT_LEAKS = 200, 30, 64, 40, 5
RECORDS = 3 * RECORDS_PER_SIZE
STRAY_OFFSET = 56
# Each entry (and lost entry) holds a name; each slot a payload.
HELD_BY_DESIGN = ENTRIES * 2 + 1 + SLOTS + RECORDS  # entries and names, the pool and payloads, the records
LEAKED = DIRECT_LEAKS + LOST_ENTRIES * 2


def idiom_groups(leaks):
    return {(g["idiom"], g["offset"]): g["blocks"] for g in leaks["held_by_idioms"]}


class IntrusiveIdioms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core, _ = capture_program("intrusive_idioms", fixture_path("intrusive_idioms"))

    def leaks(self, *args):
        return heapscope_json("leaks", self.core, "--no-cache", *args)

    def test_no_possibly_leaked_flood_and_the_stray_pointer_still_reported(self):
        leaks = self.leaks()
        self.assertEqual(leaks["totals"]["possibly"]["blocks"], 1, leaks["totals"])
        possibly = heapscope_json("blocks", self.core, "--no-cache", "--state", "possibly")["blocks"]
        self.assertEqual(len(possibly), 1, possibly)
        self.assertGreaterEqual(possibly[0]["usable_size"], 200)
        self.assertEqual(leaks["totals"]["blocks"], LEAKED, leaks["totals"])

    def test_each_idiom_holds_its_blocks(self):
        groups = idiom_groups(self.leaks())
        self.assertEqual(groups, {("fixed-offset", 8): ENTRIES, ("fixed-offset", 16): RECORDS, ("pool", 0): 1})

    def test_each_idiom_alone(self):
        without_slots = idiom_groups(self.leaks("--leak-check-heuristics", "fixed-offset"))
        self.assertEqual(without_slots, {("fixed-offset", 8): ENTRIES, ("fixed-offset", 16): RECORDS})
        self.assertEqual(self.leaks("--leak-check-heuristics", "fixed-offset")["totals"]["possibly"]["blocks"],
                         1 + 1 + SLOTS)  # the stray block, the pool and its payloads
        pool_alone = self.leaks("--leak-check-heuristics", "pool")
        self.assertEqual(idiom_groups(pool_alone), {("pool", 0): 1})
        # the entries and their names, the records (each pointed into once), the stray block
        self.assertEqual(pool_alone["totals"]["possibly"]["blocks"], ENTRIES * 2 + RECORDS + 1)

    def test_memchecks_set_keeps_memchecks_verdicts(self):
        leaks = self.leaks("--leak-check-heuristics", "memcheck")
        self.assertEqual(leaks["held_by_idioms"], [])
        self.assertEqual(leaks["totals"]["possibly"]["blocks"], HELD_BY_DESIGN + 1)
        self.assertEqual(leaks["totals"]["blocks"], LEAKED)
        if VALGRIND is None:
            self.skipTest("valgrind is not installed (scripts/install-deps installs it)")
        oracle = memcheck_summary(fixture_path("intrusive_idioms"), "all")  # valgrind's all: memcheck's four
        self.assertEqual(oracle["possibly lost"], HELD_BY_DESIGN + 1, oracle)
        self.assertEqual(oracle.get("definitely lost", 0) + oracle.get("indirectly lost", 0), LEAKED, oracle)
        self.assertEqual(oracle["via"], {}, oracle)

    def test_the_new_idioms_are_named_and_refused_when_misspelt(self):
        result = run_heapscope("leaks", self.core, "--leak-check-heuristics", "fixed-offsets")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("fixed-offset,pool", result.stderr)
        text = run_heapscope("leaks", self.core, "--no-cache")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("fixed-offset +8", text.stdout)
        self.assertIn("pool", text.stdout)


if __name__ == "__main__":
    unittest.main()
