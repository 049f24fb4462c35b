"""`heap chains` on an event pipeline that wraps its std::function callback on every event
(tests/fixtures/callback_chain.cpp): the 500 closures are one chain, named by the lambda's type, headed
by the closure the global points to — through the CLI on a core, and through LLDB on the live process,
where three commands are enough to find it."""

import os
import re
import subprocess
import unittest

from heapscope_e2e import capture_fixture, fixture_path, heapscope_json, parse_ledger, run_heapscope
from lldb_session import LiveScenario, require_lldb_and_gdb

FIXTURE = "callback_chain"
HISTORY_LENGTH = 200      # the std::list decoy
SPARE_EVENTS = 100        # the C list decoy, 48-byte nodes
ROUTE_NODE_SIZE = 32      # the tree decoy's nodes
LOST_TIMERS = 20          # the leaked C list, 64-byte nodes
IGNORED_FIELDS = frozenset({"warnings"})
# The diagnosis of docs/walkthroughs/callback-chain.md (there in text).
TOP_COMMAND = "heap top --by type -n 5 --json"


def usable_size(requested):
    """malloc_usable_size of a glibc chunk for a request of this many bytes (x86-64)."""
    chunk = max(32, (requested + 8 + 15) & ~15)
    return chunk - 8


def lambda_line():
    """The line of wrap_callback's lambda expression in the fixture's source."""
    source = os.path.join(os.environ["HEAPSCOPE_SOURCE_DIR"], "tests", "fixtures", "callback_chain.cpp")
    with open(source, encoding="utf-8") as f:
        return next(number for number, line in enumerate(f, 1) if "return [prev = std::move(pipeline)" in line)


def closure_type(executable):
    """The lambda's type as the fixture's own std::function manager symbol spells it (nm -C), followed by
    where DWARF says the lambda was written."""
    symbols = subprocess.run(["nm", "-C", executable], capture_output=True, text=True, check=True).stdout
    for line in symbols.splitlines():
        if "_M_manager" in line and "wrap_callback" in line:
            match = re.search(r"[<,] ?((?:\(anonymous namespace\)::)?wrap_callback\(.*?\)::\{lambda\(\)#1\})>::_M_manager",
                              line)
            if match:
                return f"{match.group(1)} (callback_chain.cpp:{lambda_line()})"
    raise AssertionError(f"no std::function manager of wrap_callback's lambda in {executable}")


def expected_chain(ledger):
    """The closures the fixture made, oldest first: the chain's tail to its head."""
    closures = ledger.live
    return {"length": len(closures), "bytes": sum(usable_size(c.size) for c in closures),
            "head": closures[-1].address, "tail": closures[0].address}


def comparable(report):
    return {key: value for key, value in report.items() if key not in IGNORED_FIELDS}


class ChainsOnClangCore(unittest.TestCase):
    """The same pipeline built by Clang, which names the closure type "…::$_0" and lays out its DWARF its own
    way: the chain, its length, bytes, head and the lambda's source line must come out the same."""

    def test_the_callback_chain_comes_first(self):
        capture = capture_fixture(FIXTURE + "_clang")
        expected = expected_chain(capture.ledger)
        chain = heapscope_json("chains", capture.core)["chains"][0]
        self.assertRegex(chain["type"], r"wrap_callback\(.*\)::\$_0 \(callback_chain\.cpp:(\d+)\)$")
        self.assertTrue(chain["type"].endswith(f"(callback_chain.cpp:{lambda_line()})"), chain["type"])
        for key in ("length", "bytes"):
            self.assertEqual(chain[key], expected[key], key)
        self.assertEqual(chain["head"]["address"], expected["head"])
        self.assertEqual(chain["depth"], 1)
        self.assertIn("g_pipeline", chain["path"]["root"]["label"])


class ChainsOnCore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture(FIXTURE)
        cls.expected = expected_chain(cls.capture.ledger)
        cls.report = heapscope_json("chains", cls.capture.core)

    def test_the_callback_chain_comes_first(self):
        chain = self.report["chains"][0]
        self.assertEqual(chain["type"], closure_type(self.capture.executable))
        self.assertEqual(chain["length"], self.expected["length"])
        self.assertEqual(chain["length"], 500)
        self.assertEqual(chain["bytes"], self.expected["bytes"])
        self.assertFalse(chain["ring"])
        self.assertFalse(chain["leaked"])

    def test_its_head_is_the_closure_the_global_holds(self):
        chain = self.report["chains"][0]
        self.assertEqual(chain["head"]["address"], self.expected["head"])
        self.assertEqual(chain["tail"]["address"], self.expected["tail"])
        self.assertEqual(chain["depth"], 1)
        self.assertGreaterEqual(chain["head_retained"], self.expected["bytes"])
        path = chain["path"]
        self.assertEqual(path["root"]["kind"], "global")
        self.assertIn("g_pipeline", path["root"]["label"])
        self.assertEqual([step["address"] for step in path["steps"]], [self.expected["head"]])

    def test_the_decoy_lists_are_chains_and_the_tree_is_not(self):
        chains = self.report["chains"]
        history = [c for c in chains if c["length"] == HISTORY_LENGTH]
        self.assertEqual(len(history), 1, "the std::list")
        self.assertEqual(history[0]["depth"], 1, "both ends of a std::list are held by its sentinel")
        # Typed from their globals by DWARF.
        spares = [c for c in chains if c["type"] == "SpareEvent"]
        self.assertEqual([c["length"] for c in spares], [SPARE_EVENTS], "the C list")
        self.assertEqual(spares[0]["depth"], 1)
        self.assertEqual([c for c in chains if c["type"] == "Route"], [], "the tree")
        self.assertEqual(self.report["chains"], sorted(chains, key=lambda c: -c["bytes"]))

    def test_a_lost_list_is_a_leaked_chain(self):
        # No root types the lost list; layout inference names its nodes by the fixture's StaleTimer.
        lost = [c for c in self.report["chains"] if c["type"] == "StaleTimer?"]
        self.assertEqual([c["length"] for c in lost], [LOST_TIMERS])
        self.assertTrue(lost[0]["leaked"])
        self.assertEqual((lost[0]["depth"], lost[0]["head_retained"], lost[0]["path"]), (None, None, None))
        direct = {b["address"] for b in heapscope_json("blocks", self.capture.core, "--state", "direct")["blocks"]}
        self.assertIn(lost[0]["head"]["address"], direct, "the head is where the lost list starts")
        self.assertNotIn(lost[0]["tail"]["address"], direct)

    def test_min_length_and_count(self):
        long_only = heapscope_json("chains", self.capture.core, "--min-length", SPARE_EVENTS + 1)
        self.assertEqual([c["length"] for c in long_only["chains"]], [500, HISTORY_LENGTH])
        self.assertEqual(long_only["chain_count"], 2)
        first = heapscope_json("chains", self.capture.core, "-n", "1")
        self.assertEqual(first["chains"], self.report["chains"][:1])
        self.assertEqual(first["chain_count"], self.report["chain_count"])

    def test_bad_options_are_clear_errors(self):
        result = run_heapscope("chains", self.capture.core, "--min-length", "1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--min-length", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_text_names_the_lambda_and_its_root(self):
        result = run_heapscope("chains", self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        first = result.stdout.split("\n  2. ")[0]
        self.assertIn(f"1. 500 blocks of {closure_type(self.capture.executable)}", first)
        self.assertIn(f"head {self.expected['head']:#x}: 1 edge from a root", first)
        self.assertIn("global g_pipeline", first)


class ChainsLiveInLldb(unittest.TestCase):
    """The fixture parked and attached with `lldb -p`: diagnosed in three commands, and `heap chains` the
    same as the CLI's on gdb's core of that very stop."""

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()

        def commands(ledger_file):
            cls.expected = expected_chain(parse_ledger(ledger_file))
            return [TOP_COMMAND, "heap chains --json", f"heap retainers {cls.expected['head']:#x} --json"]

        scenario = LiveScenario("callback-chain", fixture_path(FIXTURE), commands)
        cls.lldb, cls.core = scenario.lldb, scenario.core

    def test_live_chains_equal_the_clis_on_the_core_of_the_same_stop(self):
        live = self.lldb.json_of("heap chains --json")
        self.assertEqual(comparable(live), comparable(heapscope_json("chains", self.core)))

    def test_three_commands_find_the_chain_and_what_holds_it(self):
        # 1. heap top: one lambda type and one global are where the heap goes.
        top = self.lldb.json_of(TOP_COMMAND)
        self.assertEqual(top["rows"][0]["count"], self.expected["length"])
        self.assertIn("wrap_callback", top["rows"][0]["type"])
        suspect = top["suspects"][0]
        self.assertEqual(suspect["kind"], "big_retainer")
        self.assertIn("g_pipeline", suspect["holder"]["label"])
        self.assertGreaterEqual(suspect["retained_bytes"], self.expected["bytes"])
        # 2. heap chains: it is one 500-long chain of the wrapping lambda, and where it starts.
        chain = self.lldb.json_of("heap chains --json")["chains"][0]
        self.assertEqual((chain["length"], chain["bytes"]), (self.expected["length"], self.expected["bytes"]))
        self.assertIn("wrap_callback", chain["type"])
        self.assertEqual(chain["head"]["address"], self.expected["head"])
        # 3. heap retainers <head>: who holds the head.
        retainers = self.lldb.json_of(f"heap retainers {self.expected['head']:#x} --json")
        self.assertEqual(retainers["target"]["address"], self.expected["head"])
        self.assertEqual(retainers["paths"][0]["root"]["kind"], "global")
        self.assertIn("g_pipeline", retainers["paths"][0]["root"]["label"])


if __name__ == "__main__":
    unittest.main()
