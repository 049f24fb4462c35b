"""Finalizer roots and `heapscope finalizers` on the exit_channels fixture (tests/fixtures/exit_channels.cpp):
eight per-client channels (a Channel and its 384 KiB feed) held only by their exit handlers — even ones by
__cxa_atexit(close_channel), odd ones by on_exit(close_channel_on_exit) — a plain atexit(flush_log), a
thread_local ClientCache whose destructor frees a 256 KiB buffer, and a pthread key whose destructor
free_scratch frees 128 KiB of key data. Ledger "how": channel, feed (channel i's feed follows it),
tls-cache, key-scratch.

- CLI on the core, with libc's debug symbols and without them (--no-debug-files: the exit handler list is
  found by signature scan, the thread_local destructor list by a scan of libc's static TLS): the same
  registrations, handler names, kinds and retained bytes, checked against the ledger.
- LLDB on the live process (LiveScenario): the three commands that diagnose the leak from the debugger
  prompt — `heap roots`, `heap finalizers`, `heap retainers <feed>` — equal the CLI's answers on the core
  of the same stop.
"""

import json
import re
import unittest

from heapscope_e2e import capture_fixture, fixture_path, heapscope_json, parse_ledger, run_heapscope
from lldb_session import LiveScenario, require_lldb_and_gdb, run_lldb

CHANNELS = 8
FEED_BYTES = 384 * 1024
# glibc rounds a chunk up to 16 bytes (and an mmapped one to a page): what a block may add to its request.
MAX_CHUNK_SLACK = 4096
IGNORED_FIELDS = frozenset({"warnings"})
SIGNATURE_SCAN_WARNING = "libc has no symbols: exit handler list found by signature scan"


def channels_and_feeds(ledger):
    channels = [a for a in ledger.live if a.how == "channel"]
    feeds = [a for a in ledger.live if a.how == "feed"]
    assert len(channels) == len(feeds) == CHANNELS, ledger.live
    return list(zip(channels, feeds))


def comparable(report):
    """The report minus warnings, with versioned library names cut at their soname: LLDB names a module by
    the path the process loaded (libstdc++.so.6), a core by the file it maps (libstdc++.so.6.0.30)."""
    text = json.dumps({key: value for key, value in report.items() if key not in IGNORED_FIELDS})
    return json.loads(re.sub(r"(\.so\.\d+)(\.\d+)+", r"\1", text))


def registration_facts(report):
    """What a registration is, whatever symbols name it: libc's and ld.so's own handlers have names only
    in their debug files."""
    return sorted((r["kind"], r["function_address"], r["object"], r["slot"], r["tid"], r["key"] or 0,
                   r["retained_bytes"], r["function"] if r["module"] == "exit_channels" else "")
                  for r in report["registrations"])


def finalizer_kind(roots_report):
    (kind,) = [k for k in roots_report["kinds"] if k["kind"] == "finalizer"]
    return kind


class FinalizerAssertions:
    """Checks of a finalizers report against the fixture's ledger, shared by the CLI and LLDB tests."""

    def assert_channels_registered(self, report, ledger):
        for index, (channel, feed) in enumerate(channels_and_feeds(ledger)):
            with self.subTest(channel=index):
                (reg,) = [r for r in report["registrations"] if r["object"] == channel.address]
                if index % 2 == 0:
                    self.assertEqual((reg["kind"], reg["function"]), ("cxa_atexit", "close_channel(void*)"))
                else:
                    self.assertEqual((reg["kind"], reg["function"]), ("on_exit", "close_channel_on_exit(int, void*)"))
                self.assertEqual(reg["module"], "exit_channels")
                self.assertIn(f"exit handler {reg['function']} ({reg['kind']}) argument", reg["label"])
                requested = channel.size + feed.size
                self.assertEqual(reg["retained_blocks"], 2, "the channel and its feed")
                self.assertGreaterEqual(reg["retained_bytes"], requested)
                self.assertLessEqual(reg["retained_bytes"], requested + 2 * MAX_CHUNK_SLACK)

    def assert_thread_state_registered(self, report, ledger):
        (cache,) = [a for a in ledger.live if a.how == "tls-cache"]
        (scratch,) = [a for a in ledger.live if a.how == "key-scratch"]
        (tls,) = [r for r in report["registrations"] if r["kind"] == "tls_dtor" and "t_client_cache" in r["variable"]]
        self.assertIn("ClientCache::~ClientCache()", tls["function"])
        self.assertNotEqual(tls["tid"], 0)
        self.assertEqual(tls["retained_blocks"], 1)
        self.assertGreaterEqual(tls["retained_bytes"], cache.size)
        (key,) = [r for r in report["registrations"] if r["kind"] == "pthread_key"]
        self.assertEqual((key["function"], key["object"], key["tid"]), ("free_scratch(void*)", scratch.address, tls["tid"]))
        self.assertIsNotNone(key["key"])
        self.assertGreaterEqual(key["retained_bytes"], scratch.size)
        self.assertIn(f"pthread key {key['key']} destructor free_scratch(void*) data (thread 1 ", key["label"])

    def assert_plain_atexit_holds_nothing(self, report):
        (flush,) = [r for r in report["registrations"] if r["function"] == "flush_log()"]
        self.assertEqual((flush["kind"], flush["object"], flush["retained_bytes"], flush["label"]), ("atexit", 0, 0, ""))

    def assert_finalizers_hold_the_heap(self, roots_report):
        # The eight channels (3.1 of 3.5 MB) belong to process-wide exit handlers; the thread_local cache and
        # the key's scratch buffer to registrations of the main thread, which are parts of that thread.
        heap = roots_report["heap"]["in_use_bytes"]
        kind = finalizer_kind(roots_report)
        self.assertGreaterEqual(kind["retained_bytes"], 0.85 * heap)
        (threads,) = [k for k in roots_report["kinds"] if k["kind"] == "thread"]
        self.assertGreaterEqual(kind["retained_bytes"] + threads["retained_bytes"], 0.95 * heap)

    def assert_feed_retained_by_its_handler(self, retainers_report, channel, feed):
        path = retainers_report["paths"][0]
        self.assertEqual(path["root"]["kind"], "finalizer")
        self.assertRegex(path["root"]["label"], r"^exit handler close_channel(_on_exit)?\(")
        self.assertEqual([s["address"] for s in path["steps"]], [channel.address, feed.address])


class FinalizersOnCore(unittest.TestCase, FinalizerAssertions):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("exit_channels")
        cls.ledger = cls.capture.ledger
        core = cls.capture.core
        cls.finalizers = {debug: heapscope_json("finalizers", core, "--all", *([] if debug else ["--no-debug-files"]))
                          for debug in (True, False)}
        cls.roots = {debug: heapscope_json("roots", core, *([] if debug else ["--no-debug-files"]))
                     for debug in (True, False)}

    def test_the_finalizer_kind_holds_the_heap(self):
        for debug in (True, False):
            with self.subTest(debug_files=debug):
                self.assert_finalizers_hold_the_heap(self.roots[debug])

    def test_each_channel_is_held_by_its_exit_handler(self):
        for debug in (True, False):
            with self.subTest(debug_files=debug):
                self.assert_channels_registered(self.finalizers[debug], self.ledger)

    def test_thread_local_and_pthread_key_destructors(self):
        for debug in (True, False):
            with self.subTest(debug_files=debug):
                self.assert_thread_state_registered(self.finalizers[debug], self.ledger)

    def test_plain_atexit_is_listed_holding_nothing(self):
        for debug in (True, False):
            with self.subTest(debug_files=debug):
                self.assert_plain_atexit_holds_nothing(self.finalizers[debug])

    def test_same_registrations_without_libc_symbols(self):
        self.assertEqual(registration_facts(self.finalizers[False]), registration_facts(self.finalizers[True]))
        self.assertEqual(self.finalizers[False]["total"], self.finalizers[True]["total"])
        self.assertIn(SIGNATURE_SCAN_WARNING, self.finalizers[False]["warnings"])
        self.assertNotIn(SIGNATURE_SCAN_WARNING, self.finalizers[True]["warnings"])

    def test_totals_add_up(self):
        report = self.finalizers[True]
        for kind in report["kinds"]:
            rows = [r for r in report["registrations"] if r["kind"] == kind["kind"]]
            self.assertEqual(kind["registrations"], len(rows))
            self.assertEqual(kind["retained_bytes"], sum(r["retained_bytes"] for r in rows))
        of_threads = sum(r["retained_bytes"] for r in report["registrations"] if r["tid"])
        self.assertEqual(report["total"]["retained_bytes"], finalizer_kind(self.roots[True])["retained_bytes"] + of_threads)
        retained = [r["retained_bytes"] for r in report["registrations"]]
        self.assertEqual(retained, sorted(retained, reverse=True))

    def test_retainers_of_a_feed_end_at_its_exit_handler(self):
        channel, feed = channels_and_feeds(self.ledger)[3]
        report = heapscope_json("retainers", self.capture.core, hex(feed.address))
        self.assert_feed_retained_by_its_handler(report, channel, feed)

    def test_text_names_handlers_and_modules(self):
        result = run_heapscope("finalizers", self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"Finalizer roots keep alive: 3\.\d MiB \(9\d\.\d% of the heap in use\)")
        self.assertIn("cxa_atexit  -                ", result.stdout)
        self.assertIn("close_channel(void*) in exit_channels", result.stdout)
        self.assertIn("free_scratch(void*) in exit_channels", result.stdout)


class FinalizersThroughLldb(unittest.TestCase, FinalizerAssertions):
    """exit_channels parked and attached with `lldb -p`: the leak diagnosed in three commands, each equal
    to the CLI's answer on the core gdb writes at the same stop."""

    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()

        def commands(ledger_file):
            cls.ledger = parse_ledger(ledger_file)
            cls.channel, cls.feed = channels_and_feeds(cls.ledger)[5]
            cls.retainers = f"heap retainers {cls.feed.address:#x} --json"
            return ["heap roots --json", "heap finalizers --json", cls.retainers]

        scenario = LiveScenario("finalizers", fixture_path("exit_channels"), commands)
        cls.lldb, cls.core = scenario.lldb, scenario.core

    def test_live_answers_equal_the_clis_on_the_core_of_the_same_stop(self):
        for command, cli in (("heap roots --json", ["roots"]), ("heap finalizers --json", ["finalizers"]),
                             (self.retainers, ["retainers", hex(self.feed.address)])):
            with self.subTest(command=command):
                self.assertEqual(comparable(self.lldb.json_of(command)), comparable(heapscope_json(cli[0], self.core, *cli[1:])))

    def test_three_commands_diagnose_the_leak(self):
        self.assert_finalizers_hold_the_heap(self.lldb.json_of("heap roots --json"))
        finalizers = self.lldb.json_of("heap finalizers --json")
        self.assert_channels_registered(finalizers, self.ledger)
        self.assert_thread_state_registered(finalizers, self.ledger)
        self.assert_feed_retained_by_its_handler(self.lldb.json_of(self.retainers), self.channel, self.feed)


class FinalizersThroughLldbOnCore(unittest.TestCase):
    """LLDB on the fixture's core (`target create --core`): LLDB lists a core's omitted text differently from
    the CLI's image, and the exit handlers must still be recognised as code."""

    def test_lldb_on_the_core_equals_the_cli(self):
        require_lldb_and_gdb()
        capture = capture_fixture("exit_channels")
        run = run_lldb([f"target create {capture.executable} --core {capture.core}", "heap finalizers --json"])
        lldb = run.json_of("heap finalizers --json")
        self.assertEqual(comparable(lldb), comparable(heapscope_json("finalizers", capture.core)))
        self.assertEqual([w for w in lldb["warnings"] if "damaged" in w], [])


if __name__ == "__main__":
    unittest.main()
