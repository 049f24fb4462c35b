"""End-to-end checks of heapscope's leak verdicts and retention paths on the leak fixtures
(tests/fixtures/leaks), whose ledgers say what every block they allocated must be.

leak_shapes holds one leak of each shape (a lost list, a lost tree, an unreachable ring, a lone block,
the block that borders the arena's top chunk) and one block held by each kind of root (register,
stack of the main thread and of a parked worker, globals of the executable and of a dlopen'ed library,
static TLS, an anonymous mapping, and a pointer into a block's middle). all_reachable holds only
reachable data, so its only right report is no leak at all.

A leak fixture's ledger is tests/fixtures/ledger.h's, followed by lines of its own (leak_fixture.h):
  expect <address> leaked <shape>
  expect <address> reachable <anchor> [interior]
The helpers here (capture_leak_fixture and the ledger parser) are shared with test_valgrind_oracle.py.
"""

import collections
import dataclasses
import glob
import os
import tempfile
import unittest

from heapscope_e2e import cached_heapscope_json, capture_program, fixture_path, parse_ledger

# The leak fixtures' build directory, relative to HEAPSCOPE_FIXTURES.
LEAK_FIXTURE_SUBDIR = "leaks"

# The verdict heapscope must give each shape of leak in leak_shapes.
VERDICT_OF_SHAPE = {
    "list-head": "direct",
    "list-node": "indirect",
    "tree-root": "direct",
    "tree-node": "indirect",
    "cycle": "cycle",
    "lone": "direct",
    "fastbin-neighbour": "direct",
    "top-neighbour": "direct",
}
ROOT_KINDS = frozenset({"register", "stack", "global", "tls", "dynamic_tls", "anonymous"})
# Every global of leak_shapes and libleak_anchor.so that anchors a block.
ANCHORING_GLOBALS = ("g_table", "g_kept_list", "g_middle_of_block", "g_data_anchor", "g_leak_anchor")
ANCHOR_LIBRARY = "libleak_anchor.so"
# How many retention paths to ask for: more than any fixture block has, so "some path" means any of them.
PATHS_WANTED = 8


# ---- the leak fixtures' ledgers ----

@dataclasses.dataclass(frozen=True)
class Expectation:
    address: int
    verdict: str   # "leaked" or "reachable"
    tag: str       # the leak's shape, or the reachable block's anchor kind
    interior: bool = False  # reachable only through a pointer into its middle


def parse_expectation(fields):
    """An `expect` line's fields (without "expect"); raises ValueError on anything else."""
    if len(fields) not in (3, 4):
        raise ValueError("expected: expect ADDRESS VERDICT TAG [interior]")
    address, verdict, tag = int(fields[0]), fields[1], fields[2]
    if verdict == "leaked":
        if tag not in VERDICT_OF_SHAPE or len(fields) != 3:
            raise ValueError(f"unknown shape {tag!r}")
    elif verdict == "reachable":
        if tag not in ROOT_KINDS:
            raise ValueError(f"unknown anchor {tag!r}")
        if len(fields) == 4 and fields[3] != "interior":
            raise ValueError(f"unknown note {fields[3]!r}")
    else:
        raise ValueError(f"unknown verdict {verdict!r}")
    return Expectation(address, verdict, tag, len(fields) == 4)


def parse_leak_ledger(path):
    """(Ledger, [Expectation]) of a leak fixture's ledger file. The ledger.h part is read by
    heapscope_e2e.parse_ledger, so both kinds of fixture are held to the same format."""
    base_lines, expectations = [], []
    with open(path, encoding="ascii") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if fields and fields[0] == "expect":
                try:
                    expectations.append(parse_expectation(fields[1:]))
                except ValueError as e:
                    raise ValueError(f"{path}:{number}: bad expect line {line.strip()!r} ({e})") from None
            else:
                base_lines.append(line)
    if not expectations:
        raise ValueError(f"{path}: no expect lines")
    with tempfile.NamedTemporaryFile("w", encoding="ascii", suffix=".ledger") as base:
        base.writelines(base_lines)
        base.flush()
        ledger = parse_ledger(base.name)
    live = {a.address for a in ledger.live}
    strays = [e for e in expectations if e.address not in live]
    if strays:
        raise ValueError(f"{path}: expectations for addresses with no live record: {strays[:3]}")
    return ledger, expectations


def leak_fixture_path(name):
    return fixture_path(os.path.join(LEAK_FIXTURE_SUBDIR, name))


# ---- capturing a leak fixture (like heapscope_e2e.capture_fixture, with the expect lines) ----

@dataclasses.dataclass(frozen=True)
class LeakCapture:
    fixture: str
    executable: str
    core: str
    ledger: object        # heapscope_e2e.Ledger
    expectations: tuple   # of Expectation

    def expected(self, verdict=None, tag=None):
        return [e for e in self.expectations
                if (verdict is None or e.verdict == verdict) and (tag is None or e.tag == tag)]

    def size_of(self, address):
        return next(a.size for a in self.ledger.live if a.address == address)


_leak_captures = {}


def capture_leak_fixture(name):
    """The core, ledger and expectations of leak fixture `name` in park mode, captured now or reused from
    the work directory (captured again when the fixture, its library or scripts/capture-core is newer)."""
    if name in _leak_captures:
        return _leak_captures[name]
    executable = leak_fixture_path(name)
    libraries = glob.glob(os.path.join(os.path.dirname(executable), "*.so"))
    core, ledger_file = capture_program(f"leaks-{name}", executable, libraries)
    ledger, expectations = parse_leak_ledger(ledger_file)
    capture = LeakCapture(name, executable, core, ledger, tuple(expectations))
    _leak_captures[name] = capture
    return capture


# ---- heapscope's answers ----

def blocks_in_state(capture, state, *flags):
    return cached_heapscope_json("blocks", capture.core, "--state", state, *flags)["blocks"]


def leaked_blocks(capture, *flags):
    """{address: block} of `blocks --state leaked`."""
    return {b["address"]: b for b in blocks_in_state(capture, "leaked", *flags)}


def leaked_totals(capture, *flags):
    """(blocks, usable bytes) heapscope calls leaked."""
    blocks = leaked_blocks(capture, *flags)
    return len(blocks), sum(b["usable_size"] for b in blocks.values())


def retainers(capture, address):
    return cached_heapscope_json("retainers", capture.core, hex(address), "--paths", PATHS_WANTED)


def describe_path(path):
    root = path["root"]
    steps = " -> ".join(f"{s['address']:#x}" + (f"+{s['offset']}" if "offset" in s else "") for s in path["steps"])
    return f"{root['kind']} ({root['label']}) -> {steps}"


class LeakCheckBase(unittest.TestCase):
    fixture = ""

    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture(cls.fixture)
        cls.leaked = leaked_blocks(cls.capture)

    def assert_path_is_well_formed(self, target, path):
        self.assertIn(path["root"]["kind"], ROOT_KINDS, describe_path(path))
        steps = path["steps"]
        self.assertTrue(steps, f"a path with no steps: {describe_path(path)}")
        self.assertEqual(steps[-1]["address"], target, f"the last step is the target: {describe_path(path)}")
        self.assertNotIn("offset", steps[-1], describe_path(path))
        for step in steps[:-1]:
            self.assertIn("offset", step, describe_path(path))
            self.assertTrue(0 <= step["offset"] < step["size"], f"offset outside its block: {describe_path(path)}")
            self.assertEqual(step["offset"] % 8, 0, f"pointers are aligned: {describe_path(path)}")

    def reachable_verdicts(self):
        """{address: block} of every block heapscope calls reachable (firmly or possibly)."""
        blocks = {}
        for state in ("reachable", "possibly"):
            blocks.update({b["address"]: b for b in blocks_in_state(self.capture, state)})
        return blocks


class LeakShapesTests(LeakCheckBase):
    fixture = "leak_shapes"

    def expected_one(self, verdict, tag):
        found = self.capture.expected(verdict, tag)
        self.assertEqual(len(found), 1, f"the fixture has one {verdict} block tagged {tag}")
        return found[0]

    # ---- which blocks are leaked ----

    def test_every_expected_leak_is_listed_as_leaked(self):
        missing = [f"{e.tag} at {e.address:#x}" for e in self.capture.expected("leaked") if e.address not in self.leaked]
        self.assertEqual(missing, [])

    def test_no_expected_reachable_block_is_listed_as_leaked(self):
        wrong = [f"{e.tag} block at {e.address:#x}: {self.leaked[e.address]['verdict']}"
                 for e in self.capture.expected("reachable") if e.address in self.leaked]
        self.assertEqual(wrong, [])

    def test_nothing_else_is_leaked(self):
        # Everything libc and ld.so allocated is reachable too (valgrind agrees: test_valgrind_oracle).
        expected = {e.address for e in self.capture.expected("leaked")}
        extra = [f"{a:#x} ({b['usable_size']} bytes, {b['verdict']})" for a, b in sorted(self.leaked.items())
                 if a not in expected]
        self.assertEqual(extra, [])

    def test_expected_reachable_blocks_are_reachable(self):
        reachable = self.reachable_verdicts()
        problems = []
        for e in self.capture.expected("reachable"):
            block = reachable.get(e.address)
            if block is None:
                problems.append(f"{e.tag} block at {e.address:#x}: not listed as reachable or possibly")
            elif block["verdict"] != "reachable":
                problems.append(f"{e.tag} block at {e.address:#x}: verdict {block['verdict']}")
        self.assertEqual(problems, [])

    def test_leaked_blocks_carry_their_usable_size(self):
        # Every request is 8 mod 16, so the usable size is the requested one.
        wrong = []
        for e in self.capture.expected("leaked"):
            block = self.leaked.get(e.address)
            if block is not None and block["usable_size"] != self.capture.size_of(e.address):
                wrong.append(f"{e.tag} at {e.address:#x}: {block['usable_size']} != {self.capture.size_of(e.address)}")
        self.assertEqual(wrong, [])

    # ---- the verdict of each shape ----

    def assert_verdicts(self, shapes):
        wrong = []
        for e in self.capture.expected("leaked"):
            if e.tag in shapes and e.address in self.leaked:
                block = self.leaked[e.address]
                if block["verdict"] != VERDICT_OF_SHAPE[e.tag] or block["possibly"]:
                    wrong.append(f"{e.tag} at {e.address:#x}: verdict {block['verdict']}, possibly {block['possibly']}")
        self.assertEqual(wrong, [])
        missing = [f"{e.tag} at {e.address:#x}" for e in self.capture.expected("leaked")
                   if e.tag in shapes and e.address not in self.leaked]
        self.assertEqual(missing, [], "not listed as leaked")

    def test_lost_list_is_one_direct_leak_and_the_rest_indirect(self):
        self.assertEqual(len(self.capture.expected("leaked", "list-head")), 1)
        self.assertGreater(len(self.capture.expected("leaked", "list-node")), 1)
        self.assert_verdicts({"list-head", "list-node"})

    def test_lost_tree_is_one_direct_leak_and_the_rest_indirect(self):
        self.assertEqual(len(self.capture.expected("leaked", "tree-root")), 1)
        self.assert_verdicts({"tree-root", "tree-node"})

    def test_ring_with_no_entry_is_a_cycle_leak(self):
        self.assertEqual(len(self.capture.expected("leaked", "cycle")), 3)
        self.assert_verdicts({"cycle"})

    def test_lone_leak_pointing_at_reachable_data_is_direct(self):
        self.assert_verdicts({"lone"})

    def test_block_before_a_fastbin_chunk_is_a_direct_leak(self):
        # main_arena's fastbin head points at the freed chunk's header, inside this block's last 8
        # bytes: allocator bookkeeping, not a reference. First make sure the fixture did put it there.
        block = self.expected_one("leaked", "fastbin-neighbour")
        all_blocks = blocks_in_state(self.capture, "all")
        chunk = next((b for b in all_blocks if b["address"] == block.address), None)
        self.assertIsNotNone(chunk, f"no block at {block.address:#x}")
        following = next((b for b in all_blocks if b["chunk"] == chunk["chunk"] + chunk["chunk_size"]), None)
        self.assertIsNotNone(following, "no chunk after the block")
        self.assertEqual(following["state"], "fastbin", "fixture precondition: a fastbin chunk follows the block")
        self.assert_verdicts({"fastbin-neighbour"})

    def test_block_bordering_top_is_a_direct_leak(self):
        # main_arena.top points at the top chunk's header, inside this block's last 8 bytes: allocator
        # bookkeeping, not a reference. First make sure the fixture did put it next to top.
        block = self.expected_one("leaked", "top-neighbour")
        all_blocks = blocks_in_state(self.capture, "all")
        chunk = next((b for b in all_blocks if b["address"] == block.address), None)
        self.assertIsNotNone(chunk, f"no block at {block.address:#x}")
        tops = [b for b in all_blocks if b["state"] == "top"]
        self.assertIn(chunk["chunk"] + chunk["chunk_size"], {t["chunk"] for t in tops},
                      "fixture precondition: the last block borders a top chunk")
        self.assert_verdicts({"top-neighbour"})

    def test_block_reached_only_through_an_interior_pointer_is_possibly_reachable(self):
        interior = [e for e in self.capture.expected("reachable") if e.interior]
        self.assertEqual(len(interior), 1)
        address = interior[0].address
        possibly = {b["address"]: b for b in blocks_in_state(self.capture, "possibly")}
        self.assertIn(address, possibly, "listed by --state possibly")
        self.assertEqual(possibly[address]["verdict"], "reachable")
        self.assertTrue(possibly[address]["possibly"])
        firmly_anchored = [f"{e.tag} block at {e.address:#x}" for e in self.capture.expected("reachable")
                           if not e.interior and e.address in possibly]
        self.assertEqual(firmly_anchored, [], "blocks with a pointer to their start are not 'possibly'")

    # ---- the leaks report ----

    def test_leaks_report_totals_add_up_to_the_leaked_blocks(self):
        report = cached_heapscope_json("leaks", self.capture.core)
        self.assertEqual(report["command"], "leaks")
        totals = report["totals"]
        by_verdict = collections.Counter(b["verdict"] for b in self.leaked.values())
        bytes_by_verdict = collections.Counter()
        for b in self.leaked.values():
            bytes_by_verdict[b["verdict"]] += b["usable_size"]
        self.assertEqual(totals["blocks"], len(self.leaked))
        self.assertEqual(totals["bytes"], sum(b["usable_size"] for b in self.leaked.values()))
        for verdict in ("direct", "indirect", "cycle"):
            self.assertEqual((totals[verdict]["blocks"], totals[verdict]["bytes"]),
                             (by_verdict[verdict], bytes_by_verdict[verdict]), verdict)
        self.assertEqual(sum(g["count"] for g in report["groups"]), len(self.leaked))
        self.assertEqual(sum(g["bytes"] for g in report["groups"]), totals["bytes"])
        for group in report["groups"]:
            self.assertEqual(group["direct"] + group["indirect"] + group["cycle"], group["count"], group)
            self.assertEqual(group["bytes"], group["size"] * group["count"], group)
            self.assertTrue(set(group["examples"]) <= set(self.leaked), f"examples are leaked blocks: {group}")

    def test_leaks_report_matches_the_ledger(self):
        totals = cached_heapscope_json("leaks", self.capture.core)["totals"]
        expected = self.capture.expected("leaked")
        self.assertEqual(totals["blocks"], len(expected))
        self.assertEqual(totals["bytes"], sum(self.capture.size_of(e.address) for e in expected))
        direct = [e for e in expected if VERDICT_OF_SHAPE[e.tag] == "direct"]
        self.assertEqual(totals["direct"]["blocks"], len(direct))
        self.assertEqual(totals["cycle"]["blocks"], len(self.capture.expected("leaked", "cycle")))

    def test_leaked_set_is_the_same_without_debug_files(self):
        self.assertEqual(set(leaked_blocks(self.capture, "--no-debug-files")), set(self.leaked))

    # ---- retention paths ----

    def test_every_reachable_block_has_a_path_from_its_kind_of_root(self):
        for e in self.capture.expected("reachable"):
            with self.subTest(anchor=e.tag, address=hex(e.address)):
                answer = retainers(self.capture, e.address)
                self.assertEqual(answer["target"]["address"], e.address)
                self.assertEqual(answer["verdict"], "reachable")
                paths = answer["paths"]
                for path in paths:
                    self.assert_path_is_well_formed(e.address, path)
                kinds = [p["root"]["kind"] for p in paths]
                self.assertIn(e.tag, kinds, "; ".join(map(describe_path, paths)) or "no path")

    def paths_from_own_root(self, tag):
        """The retention paths of the one block anchored by a root of kind `tag`, from that kind of root."""
        e = self.expected_one("reachable", tag)
        return [p for p in retainers(self.capture, e.address)["paths"] if p["root"]["kind"] == tag]

    def test_register_root_names_r15_of_the_main_thread(self):
        paths = self.paths_from_own_root("register")
        self.assertTrue(paths, "no path from a register")
        labels = [p["root"]["label"] for p in paths]
        self.assertTrue(any("r15" in label and f"tid {self.capture.ledger.pid}" in label for label in labels), labels)
        self.assertTrue(any(len(p["steps"]) == 1 for p in paths), "r15 points straight at the block")

    def test_worker_stack_root_names_the_worker_thread(self):
        self.assertEqual(len(self.capture.ledger.threads), 1, "the ledger names the worker's tid")
        worker_tid = self.capture.ledger.threads[0]
        stack_anchored = self.capture.expected("reachable", "stack")
        labels = [p["root"]["label"] for e in stack_anchored for p in retainers(self.capture, e.address)["paths"]
                  if p["root"]["kind"] == "stack"]
        self.assertTrue(any(f"tid {worker_tid}" in label for label in labels),
                        f"no stack path from the worker (tid {worker_tid}): {labels}")
        self.assertTrue(any(f"tid {self.capture.ledger.pid}" in label for label in labels),
                        f"no stack path from the main thread: {labels}")

    def test_library_global_root_names_the_global_and_the_library(self):
        labels = [p["root"]["label"] for e in self.capture.expected("reachable", "global")
                  for p in retainers(self.capture, e.address)["paths"] if p["root"]["kind"] == "global"]
        self.assertTrue(any("g_leak_anchor" in label and ANCHOR_LIBRARY in label for label in labels), labels)

    def test_global_roots_name_the_anchoring_globals(self):
        for e in self.capture.expected("reachable", "global"):
            with self.subTest(address=hex(e.address)):
                labels = [p["root"]["label"] for p in retainers(self.capture, e.address)["paths"]
                          if p["root"]["kind"] == "global"]
                self.assertTrue(any(name in label for label in labels for name in ANCHORING_GLOBALS), labels)

    def test_interior_pointer_root_names_its_global(self):
        e = next(e for e in self.capture.expected("reachable") if e.interior)
        labels = [p["root"]["label"] for p in retainers(self.capture, e.address)["paths"]]
        self.assertTrue(any("g_middle_of_block" in label for label in labels), labels)

    def test_tls_root_is_the_main_threads_static_tls(self):
        paths = self.paths_from_own_root("tls")
        self.assertTrue(paths, "no path from static TLS")
        labels = [p["root"]["label"] for p in paths]
        self.assertTrue(any(f"tid {self.capture.ledger.pid}" in label for label in labels), labels)
        self.assertTrue(any("t_anchor in leak_shapes" in label for label in labels), labels)

    def test_library_thread_local_is_a_dynamic_tls_root_of_the_main_thread(self):
        paths = self.paths_from_own_root("dynamic_tls")
        self.assertTrue(paths, "no path from dynamic TLS")
        self.assertEqual(len(paths[0]["steps"]), 1, "the TLS block itself is the root, the block its first step")
        labels = [p["root"]["label"] for p in paths]
        self.assertTrue(any(f"thread 1 (tid {self.capture.ledger.pid})" in label for label in labels), labels)

    def test_leaked_blocks_have_no_path(self):
        for e in self.capture.expected("leaked"):
            with self.subTest(shape=e.tag, address=hex(e.address)):
                answer = retainers(self.capture, e.address)
                self.assertEqual(answer["target"]["address"], e.address)
                self.assertEqual(answer["paths"], [])
                self.assertEqual(answer["verdict"], VERDICT_OF_SHAPE[e.tag])

    def test_retainers_accepts_any_address_inside_the_block(self):
        e = self.expected_one("reachable", "anonymous")
        size = self.capture.size_of(e.address)
        for address in (e.address + 8, e.address + size - 1):
            with self.subTest(address=hex(address)):
                answer = cached_heapscope_json("retainers", self.capture.core, str(address))
                self.assertEqual(answer["target"]["address"], e.address)
                self.assertEqual(answer["target"]["size"], size)
                self.assertIn("anonymous", [p["root"]["kind"] for p in answer["paths"]])

    # ---- referrers ----

    def test_each_ring_member_is_referred_to_by_the_previous_one_only(self):
        ring = [e.address for e in self.capture.expected("leaked", "cycle")]  # allocation order: first, second, third
        for index, member in enumerate(ring):
            with self.subTest(member=hex(member)):
                answer = cached_heapscope_json("refs", self.capture.core, hex(member))
                self.assertEqual(answer["target"]["address"], member)
                referrers = [(r["kind"], r.get("address"), r.get("offset")) for r in answer["referrers"]]
                self.assertEqual(referrers, [("block", ring[index - 1], 0)])

    def test_register_anchored_block_is_referred_to_by_a_register_only(self):
        e = self.expected_one("reachable", "register")
        answer = cached_heapscope_json("refs", self.capture.core, hex(e.address))
        kinds = [(r["kind"], r.get("root_kind")) for r in answer["referrers"]]
        self.assertEqual(kinds, [("root", "register")])


class AllReachableTests(LeakCheckBase):
    fixture = "all_reachable"

    def test_leaks_report_is_empty(self):
        report = cached_heapscope_json("leaks", self.capture.core)
        totals = report["totals"]
        self.assertEqual((totals["blocks"], totals["bytes"]), (0, 0), report["groups"][:5])
        for verdict in ("direct", "indirect", "cycle"):
            self.assertEqual((totals[verdict]["blocks"], totals[verdict]["bytes"]), (0, 0), verdict)
        self.assertEqual(report["groups"], [])

    def test_no_block_is_listed_as_leaked(self):
        listed = [f"{a:#x} ({b['usable_size']} bytes, {b['verdict']})" for a, b in sorted(self.leaked.items())]
        self.assertEqual(listed, [])

    def test_every_block_of_the_ledger_is_reachable(self):
        reachable = self.reachable_verdicts()
        missing = [f"{e.tag} block at {e.address:#x}" for e in self.capture.expectations
                   if e.address not in reachable or reachable[e.address]["verdict"] != "reachable"]
        self.assertEqual(missing, [])

    def test_no_block_of_the_ledger_is_only_possibly_reachable(self):
        # The fixture keeps a pointer to the start of every block it allocated.
        possibly = {b["address"] for b in blocks_in_state(self.capture, "possibly")}
        interior_only = [f"{e.tag} block at {e.address:#x}" for e in self.capture.expectations if e.address in possibly]
        self.assertEqual(interior_only, [])

    def test_blocks_of_both_arenas_are_judged(self):
        # The worker allocated in an arena of its own: "no leak" must cover that arena too.
        arena_of = {b["address"]: b["arena"] for b in blocks_in_state(self.capture, "all")}
        arenas = {arena_of.get(e.address) for e in self.capture.expectations}
        self.assertNotIn(None, arenas, "every block of the ledger is walked")
        self.assertEqual(len(arenas), 2, "fixture precondition: the main arena and the worker's")


if __name__ == "__main__":
    unittest.main()
