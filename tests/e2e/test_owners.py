"""Retention by owner (the ownership tree of roots, docs/usage.md): which thread, frame, variable or exit-time
registration keeps what alive, and the same figures in `roots`, `threads`, `top` and `finalizers`.

Fixtures (tests/fixtures/owners): thread_owners — a worker whose local std::vector<char*> holds 1000 blocks
of 4000 bytes (its buffer also in a register) and whose thread_local pointer holds 300 more; and
exit_registrations — 200 __cxa_atexit(close_all, channel) handlers, 100 thread_local objects with
destructors and 40 pthread keys with destructors, each registration the only holder of its object."""

import os
import unittest

from heapscope_e2e import capture_fixture, cached_heapscope_json, run_heapscope

THREAD_OWNERS = os.path.join("owners", "thread_owners")
EXIT_REGISTRATIONS = os.path.join("owners", "exit_registrations")
FOUR_MB = 4_000_000


def owners_of(roots_report):
    return [r for r in roots_report["roots"] if r["depth"] == 0]


def thread_row(rows, tid):
    (row,) = [r for r in rows if r["kind"] == "thread" and r["depth"] == 0 and r["tid"] == tid]
    return row


class CrossCheck:
    """The figures of one core must agree between roots, threads, top and finalizers."""

    def check_consistency(self, core):
        roots = cached_heapscope_json("roots", core, "-n", "0")
        top = cached_heapscope_json("top", core, "--by", "root", "-n", "0")
        threads = cached_heapscope_json("threads", core)
        finalizers = cached_heapscope_json("finalizers", core, "--all")
        heap = roots["heap"]
        self.assertEqual(sum(k["retained_bytes"] for k in roots["kinds"]) + roots["shared"]["retained_bytes"],
                         heap["reachable_bytes"])
        for thread in threads["threads"]:
            in_roots = thread_row(roots["roots"], thread["tid"])["retained_bytes"]
            self.assertEqual(thread["retained_bytes"], in_roots)
            self.assertEqual(thread_row(top["rows"], thread["tid"])["retained_bytes"], in_roots)
            self.assertLessEqual(thread["stack_retained_bytes"] + thread["registers_retained_bytes"] +
                                 thread["tls_retained_bytes"], thread["retained_bytes"])
        by_label = {r["label"]: r["retained_bytes"] for r in roots["roots"]}
        for reg in finalizers["registrations"]:
            if reg["label"]:
                self.assertEqual(reg["retained_bytes"], by_label.get(reg["label"], 0), reg["label"])
        (kind,) = [k for k in roots["kinds"] if k["kind"] == "finalizer"] or [{"retained_bytes": 0}]
        of_threads = sum(r["retained_bytes"] for r in finalizers["registrations"] if r["tid"])
        self.assertEqual(finalizers["total"]["retained_bytes"], kind["retained_bytes"] + of_threads)
        for group in finalizers["functions"]:
            members = [r for r in finalizers["registrations"]
                       if r["function"] == group["function"] and r["module"] == group["module"]]
            self.assertEqual(group["registrations"], len(members))
            self.assertEqual(group["retained_bytes"], sum(r["retained_bytes"] for r in members))


class ThreadOwners(unittest.TestCase, CrossCheck):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture(THREAD_OWNERS)
        (cls.worker,) = cls.capture.ledger.threads
        cls.roots = cached_heapscope_json("roots", cls.capture.core, "-n", "0")

    def test_roots_charge_the_worker_thread(self):
        self.assertGreaterEqual(thread_row(self.roots["roots"], self.worker)["retained_bytes"], FOUR_MB + 300 * 4000)
        (threads,) = [k for k in self.roots["kinds"] if k["kind"] == "thread"]
        self.assertGreaterEqual(threads["retained_bytes"], FOUR_MB)

    def test_several_kinds_is_a_small_share(self):
        self.assertLess(self.roots["shared"]["retained_bytes"], 0.05 * self.roots["heap"]["in_use_bytes"])

    def test_the_frame_and_variable_are_named(self):
        rows = [r for r in self.roots["roots"] if "stack_holder()" in r["label"] and "variable batch" in r["label"]]
        self.assertEqual(len(rows), 1, [r["label"] for r in self.roots["roots"]])
        self.assertGreaterEqual(rows[0]["retained_bytes"], 0.97 * FOUR_MB)
        self.assertEqual(rows[0]["owner"], thread_row(self.roots["roots"], self.worker)["label"])
        self.assertGreaterEqual(rows[0]["depth"], 2)

    def test_threads_and_top_charge_the_worker(self):
        threads = {t["tid"]: t for t in cached_heapscope_json("threads", self.capture.core)["threads"]}
        worker = threads[self.worker]
        self.assertGreaterEqual(worker["retained_bytes"], FOUR_MB + 300 * 4000)
        self.assertTrue(any(f["variable"] == "batch" and f["retained_bytes"] >= 0.97 * FOUR_MB for f in worker["frames"]))
        top = cached_heapscope_json("top", self.capture.core, "--by", "root", "-n", "0")
        self.assertGreaterEqual(thread_row(top["rows"], self.worker)["retained_bytes"], FOUR_MB)
        self.assertEqual(top["rows"][0]["tid"], self.worker, "the worker is the largest owner")

    def test_text_indents_parts_under_their_owner(self):
        result = run_heapscope("roots", self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, rf"\n[^\n]*  thread 2 \(tid {self.worker}\)\n[^\n]*    stack of thread 2")

    def test_figures_agree(self):
        self.check_consistency(self.capture.core)


class ExitRegistrations(unittest.TestCase, CrossCheck):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture(EXIT_REGISTRATIONS)
        cls.report = cached_heapscope_json("finalizers", cls.capture.core, "--all")
        cls.by_object = {r["object"]: r for r in cls.report["registrations"]}
        cls.live = cls.capture.ledger.live

    def owned_bytes(self, how):
        return [a for a in self.live if a.how == how]

    def test_every_channel_is_retained_by_its_own_handler(self):
        channels = self.owned_bytes("channel")
        buffers = self.owned_bytes("channel-buffer")
        self.assertEqual(len(channels), 200)
        for channel, buffer in zip(channels, buffers):
            reg = self.by_object[channel.address]
            self.assertEqual(reg["function"], "close_all(void*)")
            self.assertGreaterEqual(reg["retained_bytes"], channel.size + buffer.size)
            self.assertEqual(reg["retained_blocks"], 2)

    def test_the_handlers_group_shows_the_total(self):
        (group,) = [g for g in self.report["functions"] if g["function"] == "close_all(void*)"]
        self.assertEqual(group["registrations"], 200)
        self.assertGreaterEqual(group["retained_bytes"], 200 * (9000 + 16))
        self.assertEqual(self.report["functions"][0]["function"], "close_all(void*)")

    def test_thread_local_destructors_each_retain_their_object(self):
        tls = [r for r in self.report["registrations"] if r["kind"] == "tls_dtor"]
        self.assertEqual(len(tls), 100)
        for reg in tls:
            self.assertGreaterEqual(reg["retained_bytes"], 2000, reg["label"])
        (group,) = [g for g in self.report["functions"] if g["function"] == "SessionState::~SessionState()"]
        self.assertEqual(group["registrations"], 100)
        self.assertGreaterEqual(group["retained_bytes"], 100 * 2000)

    def test_pthread_keys_each_retain_their_data(self):
        keys = [r for r in self.report["registrations"] if r["kind"] == "pthread_key" and r["tid"]]
        data = {a.address for a in self.owned_bytes("key-data")}
        self.assertEqual({r["object"] for r in keys}, data)
        for reg in keys:
            self.assertGreaterEqual(reg["retained_bytes"], 3000, reg["label"])
        self.assertTrue(any(r["key"] >= 32 for r in keys), "some keys live in glibc's second-level array")

    def test_text_groups_by_function_and_lists_twenty(self):
        result = run_heapscope("finalizers", self.capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"close_all\(void\*\) in exit_registrations × 200 retains 1\.\d MiB")
        self.assertIn("Registrations (20 of ", result.stdout)

    def test_figures_agree(self):
        self.check_consistency(self.capture.core)


class OtherFixtures(unittest.TestCase, CrossCheck):
    """The same agreement on fixtures built for other tests."""

    def test_figures_agree(self):
        for name in ("exit_channels", "thread_handles", "worker_vector"):
            with self.subTest(fixture=name):
                self.check_consistency(capture_fixture(name).core)


if __name__ == "__main__":
    unittest.main()
