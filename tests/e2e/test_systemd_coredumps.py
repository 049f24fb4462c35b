"""Cores systemd-coredump keeps (docs/usage.md, "Cores systemd-coredump keeps"): `heapscope coredumps` lists
the journal's cores as coredumpctl gives them, each with its file in the store, and `--coredump MATCH` (a pid
or a program, newest first) picks one for any command.

systemd-coredump cannot run here: the package's installation points the kernel's core pattern — one for the
whole machine, shared with everything else running on it — at itself, and without systemd as PID 1 there is
no journald to record the cores. So the store is laid out as systemd-coredump writes it
(core.COMM.UID.BOOTID.PID.TIME.zst, zstd-compressed: the fixture's core compressed by the zstd tool), and the
journal's list is given as `coredumpctl --json=short list` prints it (--coredump-list FILE: the same words
serve a store copied from another machine). The JSON's shape is what coredumpctl 252 (Debian 12) printed for
an entry in a journal written by systemd-journald: a one-line array of objects with time (the journal's
record, in µs, a little after the crash time in the file's name), pid, uid, gid, sig, corefile, exe, size.
Where coredumpctl is installed, `heapscope coredumps` with no list runs it."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from heapscope_e2e import heapscope_json, run_heapscope, work_dir
from test_leaks import capture_leak_fixture

BOOT_ID = "3d1219c7c4c5404aaa1f6d2a48adfda4"
# Crash times (µs; the kernel's %t, whole seconds) and the journal's record of each, a moment later.
OLDER, NEWER, OTHER = 1764391234000000, 1764391300000000, 1764391250000000
JOURNAL_DELAY_US = 11231


class SystemdCoredumps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("zstd") is None:
            raise unittest.SkipTest("zstd is not installed (scripts/install-deps installs it)")
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.scratch = tempfile.mkdtemp(prefix="coredump-store-", dir=work_dir())
        cls.store = os.path.join(cls.scratch, "coredump")
        os.makedirs(cls.store)
        exe = cls.capture.executable

        def stored(comm, pid, crash_us):
            path = os.path.join(cls.store, f"core.{comm}.0.{BOOT_ID}.{pid}.{crash_us}.zst")
            with open(cls.capture.core, "rb") as source, open(path, "wb") as sink:
                subprocess.run(["zstd", "-q", "-c"], stdin=source, stdout=sink, check=True, timeout=120)
            return path

        cls.newer = stored("leak_shapes", 5002, NEWER)
        cls.other = stored("other.prog", 5003, OTHER)  # a name with a dot, as COMM may have
        # The older crash's file was removed (systemd-tmpfiles ages them out): the journal says "missing".
        entries = [(OLDER, 5001, exe, "missing", None), (OTHER, 5003, "/usr/bin/other.prog", "present", cls.other),
                   (NEWER, 5002, exe, "present", cls.newer)]
        cls.list_file = os.path.join(cls.scratch, "list.json")
        # A field the journal lacks is null (the missing core's size; coredumpctl's table says n/a).
        with open(cls.list_file, "w") as f:
            f.write(json.dumps([{"time": crash + JOURNAL_DELAY_US, "pid": pid, "uid": 0, "gid": 0, "sig": 6,
                                 "corefile": state, "exe": program, "size": os.path.getsize(path) if path else None}
                                for crash, pid, program, state, path in entries], separators=(",", ":")) + "\n")
        cls.source = ["--coredump-list", cls.list_file, "--coredump-store", cls.store]
        cls.raw_leaks = heapscope_json("leaks", cls.capture.core)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_coredumps_lists_newest_first_with_their_files(self):
        listed = heapscope_json("coredumps", *self.source)
        self.assertEqual([(c["pid"], c["corefile"], c["file"]) for c in listed],
                         [(5002, "present", self.newer), (5003, "present", self.other), (5001, "missing", None)])
        self.assertEqual(listed[1]["comm"], "other.prog")
        self.assertEqual(listed[0]["time_us"], NEWER + JOURNAL_DELAY_US)
        text = run_heapscope("coredumps", *self.source)
        self.assertEqual(text.returncode, 0, text.stderr)
        lines = text.stdout.splitlines()
        self.assertRegex(lines[0], r"^TIME\s+PID\s+SIG\s+COREFILE\s+PROGRAM\s+FILE$")
        self.assertIn(self.newer, lines[1])
        self.assertRegex(lines[3], r"\b5001\b.*missing\s+leak_shapes\s+\(not in .*coredump\)$")

    def test_a_program_picks_its_newest_core(self):
        self.assertEqual(heapscope_json("leaks", "--coredump", "leak_shapes", *self.source), self.raw_leaks)
        self.assertEqual(heapscope_json("leaks", "--coredump", self.capture.executable, *self.source), self.raw_leaks)

    def test_a_pid_picks_its_core(self):
        self.assertEqual(heapscope_json("leaks", "--coredump", "5002", *self.source), self.raw_leaks)
        result = run_heapscope("summary", "--coredump", "5001", *self.source)
        self.assertEqual(result.returncode, 1)
        self.assertIn("the newest core of 5001 (pid 5001,", result.stderr)
        self.assertIn("coredumpctl says its file is missing", result.stderr)

    def test_the_list_may_come_on_standard_input(self):
        with open(self.list_file) as f:
            result = subprocess.run([os.environ["HEAPSCOPE"], "unpack", "--coredump", "other.prog",
                                     "--coredump-list", "-", "--coredump-store", self.store],
                                    stdin=f, capture_output=True, text=True, timeout=120,
                                    env=dict(os.environ, HEAPSCOPE_NO_CORE_CACHE="0",
                                             HEAPSCOPE_CACHE_DIR=os.path.join(self.scratch, "cache")))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith(os.path.join(self.scratch, "cache", "cores") + "/"), result.stdout)

    def test_unknown_matches_and_bad_lists_are_clear_errors(self):
        result = run_heapscope("leaks", "--coredump", "no-such-program", *self.source)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no core of program no-such-program in the journal (3 cores;", result.stderr)
        both = run_heapscope("leaks", self.capture.core, "--coredump", "5002", *self.source)
        self.assertIn("give a CORE or --coredump MATCH, not both", both.stderr)
        neither = run_heapscope("leaks")
        self.assertIn("a CORE file is required (or --coredump MATCH", neither.stderr)
        bad = os.path.join(self.scratch, "bad.json")
        with open(bad, "w") as f:
            f.write("TIME PID UID GID SIG COREFILE EXE\n")
        result = run_heapscope("coredumps", "--coredump-list", bad)
        self.assertIn("is not coredumpctl's JSON", result.stderr)
        with open(bad, "w") as f:
            f.write('[{"time":1795931343990686,"pid":null,"exe":"/usr/bin/x"}]')
        result = run_heapscope("coredumps", "--coredump-list", bad)
        self.assertIn("holds an entry without a pid and a time", result.stderr)

    def test_without_coredumpctl_it_says_what_to_do(self):
        if shutil.which("coredumpctl"):
            result = run_heapscope("coredumps", "--json")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIsInstance(json.loads(result.stdout), list)
            return
        result = run_heapscope("coredumps")
        self.assertEqual(result.returncode, 1)
        self.assertIn("coredumpctl is not installed", result.stderr)
        self.assertIn("--coredump-list FILE", result.stderr)


if __name__ == "__main__":
    unittest.main()
