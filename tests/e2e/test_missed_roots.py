"""Roots heapscope once missed or mislabelled (issue 17), on the missed_roots leak fixture
(tests/fixtures/leaks/missed_roots.c):

- a block whose only pointer is in a worker's xmm0 (and, with AVX, one only in the upper half of its ymm1)
  is reachable, and `retainers` names the register: in a gdb core (with the CLI, and in LLDB, which reads
  no ymm from a core and says so), attached with `heapscope attach`, in LLDB and in GDB attached to the
  process, and through the C API without a debugger (the vector registers come from NT_PRFPREG /
  NT_X86_XSTATE, PTRACE_GETREGSET, LLDB's register sets, and GDB's registers or ptrace through
  hs_open_live_with_vector_registers);
- a block held only by a worker's __thread variable is held by that thread's static TLS in `retainers`,
  `roots` and `threads`, not by a frame of its stack (glibc puts static TLS at the top of the stack
  mapping, above the outermost frame, __clone3);
- a lost 1 MiB mmapped block whose mapping mprotect split in pieces (a read-only page, a PROT_NONE guard
  page) is found: it is a direct leak and the blocks only it points to are indirect leaks, with no
  disagreement with mp_'s count of mmapped chunks; with a piece of it unmapped instead, it cannot be found,
  and `leaks` says that its result is partial and why.
"""

import os
import re
import unittest

from heapscope_e2e import cached_heapscope_json, capture_program, heapscope_json, run_heapscope, work_dir
from lldb_session import LiveScenario, parked_fixture, require_lldb_and_gdb, run_lldb
from test_capi import driver_json
from test_gdb import json_between_markers, run_gdb
from test_leaks import capture_leak_fixture, leak_fixture_path, parse_leak_ledger

FIXTURE = "missed_roots"
XMM_BLOCK_SIZE = 1240
YMM_BLOCK_SIZE = 1352
TLS_BLOCK_SIZE = 1464
SPLIT_BLOCK_SIZE = (1 << 20) + 8


def designed_block(expectations, ledger, size):
    """The address of the fixture's block of `size` requested bytes, or None when it made none."""
    sizes = {a.address: a.size for a in ledger.live}
    found = [e.address for e in expectations if sizes.get(e.address) == size]
    if len(found) > 1:
        raise AssertionError(f"{len(found)} blocks of {size} bytes; the fixture makes at most one")
    return found[0] if found else None


def root_labels(retainers_report):
    return [path["root"]["label"] for path in retainers_report["paths"]]


def register_label(register, thread_tid):
    return re.compile(rf"^register {register}, thread \d+ \(tid {thread_tid}\)$")


class RegisterChecks:
    """What every frontend must say of the blocks held only in vector registers. Subclasses set
    expectations, ledger and retainers(address) -> the retainers JSON report."""

    reads_ymm = True  # whether the frontend can read the upper halves of ymm registers

    def vector_blocks(self):
        blocks = [("xmm0", designed_block(self.expectations, self.ledger, XMM_BLOCK_SIZE))]
        ymm = designed_block(self.expectations, self.ledger, YMM_BLOCK_SIZE)
        if ymm is not None and self.reads_ymm:  # the fixture ran on a CPU with AVX
            blocks.append(("ymm1", ymm))
        return blocks

    def test_a_pointer_only_in_a_vector_register_keeps_its_block_and_is_named(self):
        tid = self.ledger.properties["vector_thread_tid"]
        for register, address in self.vector_blocks():
            with self.subTest(register=register):
                report = self.retainers(address)
                self.assertEqual(report["verdict"], "reachable")
                labels = root_labels(report)
                self.assertTrue(any(register_label(register, tid).match(label) for label in labels), labels)
                self.assertEqual({path["root"]["kind"] for path in report["paths"]}, {"register"})


class OnACore(RegisterChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        capture = capture_leak_fixture(FIXTURE)
        cls.core, cls.ledger, cls.expectations = capture.core, capture.ledger, capture.expectations

    def retainers(self, address):
        return cached_heapscope_json("retainers", self.core, hex(address), "--paths", "8")

    def leaked(self):
        return {b["address"]: b for b in cached_heapscope_json("blocks", self.core, "--state", "leaked")["blocks"]}

    def test_the_capture_holds_vector_registers_of_every_thread(self):
        warnings = cached_heapscope_json("summary", self.core)["warnings"]
        self.assertEqual([w for w in warnings if "vector register" in w], [])

    def test_every_designed_block_gets_its_verdict(self):
        leaked = self.leaked()
        for e in self.expectations:
            with self.subTest(address=hex(e.address), tag=e.tag):
                self.assertEqual(e.address in leaked, e.verdict == "leaked")

    def test_static_tls_of_a_worker_is_labelled_tls(self):
        tls_block = designed_block(self.expectations, self.ledger, TLS_BLOCK_SIZE)
        tid = self.ledger.properties["tls_thread_tid"]
        report = self.retainers(tls_block)
        self.assertEqual(report["verdict"], "reachable")
        self.assertEqual([path["root"]["kind"] for path in report["paths"]], ["tls"])
        label = root_labels(report)[0]
        self.assertRegex(label, rf"^static TLS of thread \d+ \(tid {tid}\): t_anchor in {FIXTURE}$")

    def test_roots_and_threads_count_a_workers_static_tls_as_tls(self):
        tid = self.ledger.properties["tls_thread_tid"]
        roots = cached_heapscope_json("roots", self.core, "-n", "0")
        held = [r for r in roots["roots"] if r["tid"] == tid and r["retained_bytes"] >= TLS_BLOCK_SIZE]
        # The thread (its owner row), and under it its static TLS; no stack part.
        self.assertEqual([r["kind"] for r in held], ["thread", "tls"], held)
        self.assertNotIn("__clone3", " ".join(r["label"] for r in held))
        thread = next(t for t in cached_heapscope_json("threads", self.core)["threads"] if t["tid"] == tid)
        self.assertGreaterEqual(thread["tls_retained_bytes"], TLS_BLOCK_SIZE)
        self.assertLess(thread["stack_retained_bytes"], TLS_BLOCK_SIZE)

    def test_a_split_mmapped_block_is_found_and_its_leaks_too(self):
        split = designed_block(self.expectations, self.ledger, SPLIT_BLOCK_SIZE)
        leaked = self.leaked()
        self.assertIn(split, leaked)
        self.assertEqual(leaked[split]["state"], "mmapped")
        children = [e.address for e in self.expectations if e.tag == "list-node"]
        self.assertEqual(len(children), 3)
        leaks = cached_heapscope_json("leaks", self.core)
        self.assertFalse(leaks["partial"])
        self.assertEqual([w for w in leaks["warnings"] if "mmapped chunks" in w], [])
        verdicts = {b["address"]: b["verdict"] for b in leaked.values()}
        self.assertEqual(verdicts[split], "direct")
        self.assertEqual([verdicts.get(c) for c in children], ["indirect"] * 3)


class WithPartOfTheBlockUnmapped(unittest.TestCase):
    """missed_roots --unmap-tail: the mmapped block's last page unmapped, so no run of mappings holds the
    chunk its header describes. It is not found, and the result must say it is partial and why."""

    @classmethod
    def setUpClass(cls):
        core, ledger_file = capture_program(f"leaks-{FIXTURE}-unmap-tail", leak_fixture_path(FIXTURE),
                                            args=("--unmap-tail",))
        cls.core = core
        cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)

    def test_leaks_are_partial_and_say_why(self):
        leaks = heapscope_json("leaks", self.core)
        self.assertTrue(leaks["partial"])
        self.assertTrue(leaks["warnings"][0].startswith("partial result: "), leaks["warnings"])
        mmapped = [w for w in leaks["warnings"] if w.startswith("mmapped chunks: found 0 (0 bytes) but mp_ counts 1 ")]
        self.assertEqual(len(mmapped), 1, leaks["warnings"])
        self.assertIn("missing from leak reports", mmapped[0])
        text = run_heapscope("leaks", self.core)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("partial result", text.stdout + text.stderr)

    def test_the_block_is_no_block_and_its_memory_anonymous(self):
        split = designed_block(self.expectations, self.ledger, SPLIT_BLOCK_SIZE)
        report = run_heapscope("retainers", self.core, hex(split + 64))
        self.assertNotEqual(report.returncode, 0)
        self.assertIn("not in any heap block", report.stderr)


class LiveRetainers:
    """Runs the fixture parked and asks `run(pid, "retainers", ADDR, ...)` about each vector-register block
    while it runs; the ledger goes to <fixture>-<name>.ledger."""

    @classmethod
    def ask_live(cls, name, run):
        ledger_file = os.path.join(work_dir(), f"{FIXTURE}-{name}.ledger")
        cls.reports = {}
        with parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE) as process:
            cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)
            for size in (XMM_BLOCK_SIZE, YMM_BLOCK_SIZE):
                address = designed_block(cls.expectations, cls.ledger, size)
                if address is not None:
                    cls.reports[address] = run(process.pid, "retainers", hex(address), "--paths", "8")

    def retainers(self, address):
        return self.reports[address]


class AttachedWithTheCli(LiveRetainers, RegisterChecks, unittest.TestCase):
    """The fixture running, parked, analysed with `heapscope attach` (registers through ptrace)."""

    @classmethod
    def setUpClass(cls):
        cls.ask_live("attach", lambda pid, *command: heapscope_json("attach", pid, *command))


class ThroughTheCApi(LiveRetainers, RegisterChecks, unittest.TestCase):
    """tests/capi/capi_driver stopping the parked fixture with ptrace and handing each thread's vector
    registers to hs_open_live_with_vector_registers, as a debugger frontend does (also where no debugger
    can host the library: the sanitizer build)."""

    @classmethod
    def setUpClass(cls):
        cls.ask_live("capi", lambda pid, *command: driver_json("live-vectors", pid, *command))


class InLldb(RegisterChecks, unittest.TestCase):
    """LLDB attached to the parked fixture (registers from its register sets)."""

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        def commands(ledger_file):
            cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)
            cls.addresses = [a for a in (designed_block(cls.expectations, cls.ledger, size)
                                         for size in (XMM_BLOCK_SIZE, YMM_BLOCK_SIZE)) if a is not None]
            return [f"heap retainers {address:#x} --paths 8 --json" for address in cls.addresses]

        cls.lldb = LiveScenario("lldb-missed-roots", leak_fixture_path(FIXTURE), commands).lldb

    def retainers(self, address):
        return self.lldb.json_of(f"heap retainers {address:#x} --paths 8 --json")


class InLldbOnTheCore(RegisterChecks, unittest.TestCase):
    """LLDB on the fixture's gdb core (registers from the vector register sets LLDB reads from its notes).
    LLDB 16 reads a core's xmm registers but not the upper halves of its ymm registers: the plugin says so."""

    reads_ymm = False

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        capture = capture_leak_fixture(FIXTURE)
        cls.ledger, cls.expectations = capture.ledger, capture.expectations
        commands = [f"target create {capture.executable} --core {capture.core}"]
        for size in (XMM_BLOCK_SIZE, YMM_BLOCK_SIZE):
            address = designed_block(cls.expectations, cls.ledger, size)
            if address is not None:
                commands.append(f"heap retainers {address:#x} --paths 8 --json")
        cls.lldb = run_lldb(commands)

    def retainers(self, address):
        return self.lldb.json_of(f"heap retainers {address:#x} --paths 8 --json")

    def test_the_unread_ymm_halves_are_named_in_a_warning(self):
        address = designed_block(self.expectations, self.ledger, XMM_BLOCK_SIZE)
        warnings = self.retainers(address)["warnings"]
        self.assertEqual(len([w for w in warnings if "LLDB cannot read the ymm registers" in w]), 1, warnings)


class InGdb(RegisterChecks, unittest.TestCase):
    """GDB attached to the parked fixture (registers through the C API's hs_vector_registers)."""

    @classmethod
    def setUpClass(cls):
        ledger_file = os.path.join(work_dir(), f"{FIXTURE}-gdb.ledger")
        with parked_fixture(leak_fixture_path(FIXTURE), ledger_file, FIXTURE) as process:
            cls.ledger, cls.expectations = parse_leak_ledger(ledger_file)
            commands = []
            for size in (XMM_BLOCK_SIZE, YMM_BLOCK_SIZE):
                address = designed_block(cls.expectations, cls.ledger, size)
                if address is not None:
                    commands += [f"echo @@{address:x}-begin\\n", f"heap retainers {address:#x} --paths 8 --json",
                                 f"echo @@{address:x}-end\\n"]
            cls.gdb = run_gdb(commands + ["detach"], "-p", str(process.pid))

    def retainers(self, address):
        return json_between_markers(self.gdb, f"{address:x}")


if __name__ == "__main__":
    unittest.main()
