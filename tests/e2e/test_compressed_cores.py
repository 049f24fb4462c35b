"""Compressed cores (docs/usage.md, "Compressed cores"): a core compressed with zstd (as systemd-coredump
keeps it), lz4, xz or gzip — by the tools of those names — is opened by its magic, whatever its name, and
gives the same `leaks` as the raw core; it is decompressed once into the core copy cache, and a second
command reads the copy (no unpack phase) where the first decompressed it; `heapscope unpack` prints the copy's
path, which LLDB loads as a core; a cut stream gives a partial core with a warning, corrupt data and a cache
too small for the core give clear errors (the latter naming the size needed); without a cache the core is
read from a temporary copy. LLDB's and GDB's `heap diff` read a compressed earlier core.

The suite runs with HEAPSCOPE_NO_CORE_CACHE=1 (tests/CMakeLists.txt); these tests turn the cache on in a
directory of their own."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from heapscope_e2e import environment, fixture_path, heapscope_json, heapscope_path, run_heapscope, work_dir
from lldb_session import require_lldb_and_gdb, run_lldb
from pty_driver import PtyProgram
from test_gdb import json_between_markers, marked, run_gdb
from test_leaks import capture_leak_fixture

# Each format: the tool that writes it, and its arguments to compress standard input to standard output.
COMPRESSORS = {
    "zst": ("zstd", ["-q", "-c", "-T0"]),
    "lz4": ("lz4", ["-q", "-c"]),
    "xz": ("xz", ["-c", "-T0"]),
    "gz": ("gzip", ["-c"]),
}


def compress(core, out, suffix):
    tool, arguments = COMPRESSORS[suffix]
    if shutil.which(tool) is None:
        raise unittest.SkipTest(f"{tool} is not installed (scripts/install-deps installs it)")
    with open(core, "rb") as source, open(out, "wb") as sink:
        subprocess.run([tool, *arguments], stdin=source, stdout=sink, check=True, timeout=300)
    return out


def without_warnings(report):
    """LLDB warns of what it cannot read of a core (the ymm registers), which the CLI reads."""
    return {key: value for key, value in report.items() if key != "warnings"}


def unpack_phases(stderr):
    return re.findall(r"^heapscope: phase unpack ", stderr, re.M)


class CompressedCores(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.scratch = tempfile.mkdtemp(prefix="compressed-cores-", dir=work_dir())
        cls.cache = os.path.join(cls.scratch, "cache")
        cls.env = {"HEAPSCOPE_CACHE_DIR": cls.cache, "HEAPSCOPE_NO_CORE_CACHE": "0"}
        # Names that say nothing of the format: the magic decides.
        cls.compressed = {suffix: compress(cls.capture.core, os.path.join(cls.scratch, f"core-{suffix}.bin"), suffix)
                          for suffix in COMPRESSORS}
        cls.raw_leaks = heapscope_json("leaks", cls.capture.core)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def copies(self):
        directory = os.path.join(self.cache, "cores")
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    def test_each_format_gives_the_raw_cores_leaks(self):
        self.assertGreater(self.raw_leaks["totals"]["blocks"], 0)
        for suffix, path in self.compressed.items():
            with self.subTest(format=suffix):
                self.assertEqual(heapscope_json("leaks", path, env=self.env), self.raw_leaks)

    def test_concatenated_frames_are_one_core(self):
        """zstd and lz4 frames, xz streams and gzip members one after the other (cat a.zst b.zst) are one core,
        as their tools decompress them."""
        with open(self.capture.core, "rb") as f:
            data = f.read()
        halves = [os.path.join(self.scratch, f"half-{i}") for i in (1, 2)]
        for path, part in zip(halves, (data[: len(data) // 2], data[len(data) // 2:])):
            with open(path, "wb") as f:
                f.write(part)
        for suffix in COMPRESSORS:
            with self.subTest(format=suffix):
                joined = os.path.join(self.scratch, f"joined-{suffix}")
                with open(joined, "wb") as out:
                    for half in halves:
                        with open(compress(half, half + "." + suffix, suffix), "rb") as f:
                            out.write(f.read())
                self.assertEqual(heapscope_json("leaks", joined, env=self.env), self.raw_leaks)

    def test_a_second_command_reads_the_copy_the_first_made(self):
        core = shutil.copy(self.compressed["zst"], os.path.join(self.scratch, "again.zst"))
        timing = dict(self.env, HEAPSCOPE_TIMING="1")
        first = run_heapscope("leaks", core, "--json", env=timing)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(len(unpack_phases(first.stderr)), 1, first.stderr)
        copies = self.copies()
        second = run_heapscope("summary", core, "--json", env=timing)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(unpack_phases(second.stderr), [], second.stderr)
        self.assertEqual(self.copies(), copies)
        self.assertEqual(json.loads(first.stdout), self.raw_leaks)

    def test_unpack_prints_a_copy_lldb_loads(self):
        result = run_heapscope("unpack", self.compressed["lz4"], env=self.env)
        self.assertEqual(result.returncode, 0, result.stderr)
        copy = result.stdout.strip()
        self.assertTrue(copy.startswith(os.path.join(self.cache, "cores") + "/"), copy)
        with open(copy, "rb") as a, open(self.capture.core, "rb") as b:
            self.assertTrue(a.read() == b.read(), "the copy is not the core byte for byte")
        raw = run_heapscope("unpack", self.capture.core, env=self.env)
        self.assertEqual(raw.stdout.strip(), self.capture.core)
        require_lldb_and_gdb()
        lldb = run_lldb(["heap leaks --json"], lldb_args=["-c", copy, self.capture.executable])
        self.assertEqual(without_warnings(lldb.json_of("heap leaks --json")), without_warnings(self.raw_leaks))

    def test_a_cut_stream_gives_a_partial_core_with_a_warning(self):
        cut = os.path.join(self.scratch, "cut.zst")
        with open(self.compressed["zst"], "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[: len(data) * 9 // 10])
        result = run_heapscope("summary", cut, env=self.env)
        self.assertIn("cut.zst's zstd stream ends early (the file was cut short)", result.stdout + result.stderr)
        self.assertIn("is truncated", result.stdout + result.stderr)

    def test_corrupt_data_is_a_clear_error(self):
        bad = os.path.join(self.scratch, "bad.gz")
        with open(self.compressed["gz"], "rb") as f:
            data = bytearray(f.read())
        middle = len(data) // 2
        data[middle:middle + 64] = bytes(64)
        with open(bad, "wb") as f:
            f.write(data)
        result = run_heapscope("leaks", bad, env=self.env)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"^heapscope: cannot decompress .*bad\.gz \(gzip\): its gzip data is corrupt")

    def test_a_cache_too_small_names_the_size_needed(self):
        core = shutil.copy(self.compressed["xz"], os.path.join(self.scratch, "big.xz"))
        size = os.path.getsize(self.capture.core)
        result = run_heapscope("leaks", core, env=dict(self.env, HEAPSCOPE_CORE_CACHE_SIZE="64K"))
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"it decompresses to {size} bytes", result.stderr)
        self.assertIn("has room for 64.0 KiB", result.stderr)
        self.assertFalse([c for c in self.copies() if c.startswith(self.key_of(core))])
        self.assertFalse([c for c in self.copies() if ".tmp." in c])

    def key_of(self, path):
        st = os.stat(path)
        return f"{st.st_dev:x}-{st.st_ino:x}-"

    def test_without_a_cache_a_temporary_copy_is_read(self):
        env = dict(self.env, HEAPSCOPE_NO_CORE_CACHE="1", HEAPSCOPE_CACHE_DIR=os.path.join(self.scratch, "unused"))
        self.assertEqual(heapscope_json("leaks", self.compressed["gz"], env=env), self.raw_leaks)
        self.assertFalse(os.path.exists(os.path.join(self.scratch, "unused", "cores")))
        result = run_heapscope("unpack", self.compressed["gz"], env=env)
        self.assertEqual(result.returncode, 1)
        self.assertIn("HEAPSCOPE_NO_CORE_CACHE=1", result.stderr)

    def test_something_compressed_that_is_no_core_is_said_so(self):
        text = os.path.join(self.scratch, "notes.txt")
        with open(text, "w") as f:
            f.write("not a core\n" * 100)
        packed = compress(text, os.path.join(self.scratch, "notes.zst"), "zst")
        result = run_heapscope("leaks", packed, env=self.env)
        self.assertEqual(result.returncode, 1)
        self.assertIn("notes.zst is zstd-compressed, but what it holds is no core", result.stderr)


class DecompressionAtATerminal(unittest.TestCase):
    """A long decompression shows its progress line on a terminal and stops at Ctrl-C, leaving nothing in
    the cache: a zstd file of 16 frames of 4 GiB of zeros each (64 GiB decompressed, more than a test can
    write) and a bound far below it, so that it runs for seconds without writing."""

    def test_progress_and_ctrl_c(self):
        if shutil.which("zstd") is None:
            raise unittest.SkipTest("zstd is not installed (scripts/install-deps installs it)")
        scratch = tempfile.mkdtemp(prefix="compressed-interrupt-", dir=work_dir())
        try:
            frame = subprocess.run("head -c 4G /dev/zero | zstd -q -1 -c", shell=True, capture_output=True,
                                   check=True, timeout=120).stdout
            zeros = os.path.join(scratch, "zeros.zst")
            with open(zeros, "wb") as f:
                f.write(frame * 16)
            env = dict(os.environ, HEAPSCOPE_CACHE_DIR=os.path.join(scratch, "cache"), HEAPSCOPE_NO_CORE_CACHE="0",
                       HEAPSCOPE_CORE_CACHE_SIZE="1M", HEAPSCOPE_PROGRESS_DELAY_MS="0")
            cli = PtyProgram([heapscope_path(), "leaks", zeros], env)
            cli.expect(r"heapscope: unpack \d{1,3}%", 60)
            interrupted_at = time.monotonic()
            cli.interrupt()
            status = cli.wait(10)
            self.assertEqual(status, 130, cli.output[-2000:])
            self.assertLess(time.monotonic() - interrupted_at, 1.0)
            self.assertEqual(cli.screen_lines()[-2:], ["heapscope: interrupted", ""])
            self.assertEqual(os.listdir(os.path.join(scratch, "cache", "cores")), [])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


class CompressedEarlierCores(unittest.TestCase):
    """`heap diff OLD` in LLDB and GDB, OLD compressed, says what the CLI says of the raw cores; so does LLDB's
    `heap evolution` of two compressed earlier cores."""

    @classmethod
    def setUpClass(cls):
        from test_snapshots import capture_stops  # its three cores of growing_cache, one per stop
        require_lldb_and_gdb()
        cls.cores, _ = capture_stops("growing_cache-compressed-stops")
        cls.scratch = tempfile.mkdtemp(prefix="compressed-earlier-", dir=work_dir())
        cls.env = {"HEAPSCOPE_CACHE_DIR": os.path.join(cls.scratch, "cache"), "HEAPSCOPE_NO_CORE_CACHE": "0"}
        cls.old = compress(cls.cores[0], os.path.join(cls.scratch, "stop-1.core.zst"), "zst")
        cls.older_xz = compress(cls.cores[1], os.path.join(cls.scratch, "stop-2.core.xz"), "xz")
        for core, packed in ((cls.cores[0], cls.old), (cls.cores[1], cls.older_xz)):
            shutil.copystat(core, packed)  # as the tools keep a compressed file's time: evolution orders by it
        cls.expected = heapscope_json("diff", cls.cores[0], cls.cores[1])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)
        for core in cls.cores:
            if os.path.exists(core):
                os.remove(core)

    def comparable(self, diff):
        """The diff less the names of its two states (a file name each frontend spells its own way) and the
        warnings (LLDB's of the ymm registers it cannot read)."""
        return {key: value for key, value in diff.items() if key not in ("before", "after", "warnings")}

    def test_cli_diff_reads_a_compressed_earlier_core(self):
        diff = heapscope_json("diff", self.old, self.cores[1], env=self.env)
        self.assertEqual(self.comparable(diff), self.comparable(self.expected))

    def test_lldb_diff_reads_a_compressed_earlier_core(self):
        with environment(**self.env):
            lldb = run_lldb([f"heap diff {self.old} --json"], lldb_args=["-c", self.cores[1], fixture_path("growing_cache")])
        diff = lldb.json_of(f"heap diff {self.old} --json")
        self.assertGreater(len(diff["types"]), 0)
        self.assertEqual(self.comparable(diff), self.comparable(self.expected))

    def test_lldb_evolution_reads_compressed_earlier_cores(self):
        expected = heapscope_json("evolution", *self.cores)
        command = f"heap evolution {self.old} {self.older_xz} --json"
        with environment(**self.env):
            lldb = run_lldb([command], lldb_args=["-c", self.cores[2], fixture_path("growing_cache")])
        evolution = lldb.json_of(command)
        self.assertEqual(len(evolution["points"]), 3)
        self.assertEqual(evolution["series"], expected["series"])
        self.assertEqual(evolution["type_count"], expected["type_count"])

    def test_gdb_diff_reads_a_compressed_earlier_core(self):
        with environment(**self.env):
            gdb = run_gdb(marked("diff", f"heap diff {self.old} --json"), fixture_path("growing_cache"), self.cores[1])
        diff = json_between_markers(gdb, "diff")
        self.assertEqual(self.comparable(diff), self.comparable(self.expected))


if __name__ == "__main__":
    unittest.main()
