"""valgrind's memcheck as an independent oracle for heapscope's leak verdicts.

Each leak fixture (tests/fixtures/leaks) runs twice: parked, its core captured for heapscope (as in
test_leaks.py), and under valgrind in exit mode (`--exit`), where it stops at the very point it would
park, from the same frame and without freeing anything, so that memcheck's leak check at exit sees the
same heap. Allocation addresses differ under valgrind, so the two are compared by number of leaked
blocks and leaked bytes: valgrind's "definitely lost" plus "indirectly lost" against every block heapscope
calls direct, indirect or cycle. Every request size is 8 mod 16, so glibc's usable size (what heapscope
counts) equals the requested size (what valgrind counts).

Where valgrind cannot see a root the parked process has, the difference is stated here, not tolerated:
  - register: leak_shapes holds one block only in r15 of the main thread, up to and including its
    exit_group(2) (the asm in leak_fixture.h). memcheck's leak check at exit does not look at the
    registers of the thread that ended the process (observed with valgrind 3.19, with and without
    --run-libc-freeres) and reports that block as definitely lost; heapscope, reading the parked
    thread's registers, must call it reachable. So valgrind's count must exceed heapscope's by exactly
    the register-anchored blocks of the ledger, and test_valgrind_agrees_with_the_ledger fails loudly
    should a valgrind version start to see them.
The other roots (the worker thread's stack, static TLS, the dlopen'ed library's global, the anonymous
mapping, main's frame) are all still in place at exit, and valgrind scans them.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

from test_leaks import capture_leak_fixture, leak_fixture_path, leaked_totals, parse_leak_ledger

VALGRIND = shutil.which("valgrind")
VALGRIND_TIMEOUT_SECONDS = 300

# Anchor kinds valgrind cannot see at exit (see the module comment).
ANCHORS_VALGRIND_CANNOT_SEE_AT_EXIT = frozenset({"register"})

# "72 (24 direct, 48 indirect) bytes in 1 blocks are definitely lost ...": valgrind's XML gives a definite
# loss record's bytes including what it indirectly loses; only its text splits the two.
DIRECT_AND_INDIRECT = re.compile(r"^\s*[\d,]+ \(([\d,]+) direct, ([\d,]+) indirect\) bytes")


def number(text):
    return int(text.replace(",", ""))


def valgrind_lost(xml_file):
    """(blocks, bytes) memcheck reports definitely or indirectly lost, each block counted once."""
    root = ElementTree.parse(xml_file).getroot()
    blocks = direct_bytes = indirect_bytes = indirect_under_definite = 0
    for error in root.iter("error"):
        kind = error.findtext("kind")
        if kind not in ("Leak_DefinitelyLost", "Leak_IndirectlyLost"):
            continue
        what = error.find("xwhat")
        record_bytes, record_blocks = number(what.findtext("leakedbytes")), number(what.findtext("leakedblocks"))
        blocks += record_blocks
        if kind == "Leak_IndirectlyLost":
            indirect_bytes += record_bytes
            continue
        split = DIRECT_AND_INDIRECT.match(what.findtext("text"))
        if split:
            direct, indirect = number(split.group(1)), number(split.group(2))
            if direct + indirect != record_bytes:
                raise AssertionError(f"valgrind record does not add up: {what.findtext('text')!r}")
            direct_bytes += direct
            indirect_under_definite += indirect
        else:
            direct_bytes += record_bytes
    # Each indirectly lost block hangs under exactly one definitely lost one: the two views must agree.
    if indirect_under_definite != indirect_bytes:
        raise AssertionError(f"valgrind's indirectly lost records hold {indirect_bytes} bytes, its definitely "
                             f"lost records say {indirect_under_definite}")
    return blocks, direct_bytes + indirect_bytes


def run_under_valgrind(name, scratch):
    """Runs leak fixture `name` in exit mode under memcheck; returns ((blocks, bytes) lost, its ledger)."""
    xml_file = os.path.join(scratch, f"{name}.valgrind.xml")
    ledger_file = os.path.join(scratch, f"{name}.ledger")
    result = subprocess.run(
        [VALGRIND, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=all", "--xml=yes",
         f"--xml-file={xml_file}", leak_fixture_path(name), "--exit"],
        env={**os.environ, "HEAPSCOPE_LEDGER": ledger_file}, capture_output=True, text=True,
        timeout=VALGRIND_TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise AssertionError(f"{name} --exit under valgrind exited {result.returncode}:\n{result.stderr[-2000:]}")
    return valgrind_lost(xml_file), parse_leak_ledger(ledger_file)


def blocks_and_bytes(ledger, expectations):
    sizes = {a.address: a.size for a in ledger.live}
    return len(expectations), sum(sizes[e.address] for e in expectations)


@unittest.skipIf(VALGRIND is None, "valgrind is not installed (scripts/install-deps installs it)")
class ValgrindOracleChecks:
    """Mixed into one TestCase per fixture below."""

    fixture = ""

    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory(prefix="heapscope-valgrind-") as scratch:
            cls.valgrind_lost, (cls.valgrind_ledger, cls.valgrind_expectations) = run_under_valgrind(cls.fixture, scratch)
        cls.capture = capture_leak_fixture(cls.fixture)

    def expected_under_valgrind(self):
        """(blocks, bytes) valgrind must report lost: the ledger's leaks, and the blocks whose only root
        valgrind cannot see at exit."""
        lost = [e for e in self.valgrind_expectations
                if e.verdict == "leaked" or e.tag in ANCHORS_VALGRIND_CANNOT_SEE_AT_EXIT]
        return blocks_and_bytes(self.valgrind_ledger, lost)

    def invisible_to_valgrind(self):
        """(blocks, bytes) of the parked process's blocks anchored only where valgrind cannot look at exit."""
        hidden = [e for e in self.capture.expectations
                  if e.verdict == "reachable" and e.tag in ANCHORS_VALGRIND_CANNOT_SEE_AT_EXIT]
        return blocks_and_bytes(self.capture.ledger, hidden)

    def test_valgrind_agrees_with_the_ledger(self):
        # The oracle is only an oracle if it sees what the fixture designed.
        self.assertEqual(self.valgrind_lost, self.expected_under_valgrind(), "(blocks, bytes)")

    def test_heapscope_leaks_as_much_as_valgrind_less_what_valgrind_cannot_see(self):
        valgrind_blocks, valgrind_bytes = self.valgrind_lost
        hidden_blocks, hidden_bytes = self.invisible_to_valgrind()
        self.assertEqual(leaked_totals(self.capture), (valgrind_blocks - hidden_blocks, valgrind_bytes - hidden_bytes),
                         f"(blocks, bytes) heapscope calls leaked; valgrind lost {self.valgrind_lost}, of which "
                         f"{(hidden_blocks, hidden_bytes)} are anchored where valgrind cannot see at exit")


class LeakShapesOracleTests(ValgrindOracleChecks, unittest.TestCase):
    fixture = "leak_shapes"

    def test_the_stated_difference_is_real(self):
        # leak_shapes has exactly one block held only by a register: if it had none, the comparison above
        # would not be testing the difference it states.
        self.assertEqual(self.invisible_to_valgrind()[0], 1)


class AllReachableOracleTests(ValgrindOracleChecks, unittest.TestCase):
    fixture = "all_reachable"

    def test_valgrind_finds_nothing_lost(self):
        self.assertEqual(self.valgrind_lost, (0, 0))


if __name__ == "__main__":
    unittest.main()
