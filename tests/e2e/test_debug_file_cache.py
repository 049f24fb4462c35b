"""End-to-end checks of the debug file cache (docs/usage.md, "Debug file cache"): a compressed debug file
(libc6-dbg's libc) is read from an uncompressed copy the first command writes under the cache directory;
the copy says what the file in memory said; a copy damaged, cut short or of another file is never believed
but written again; a cache directory that cannot be written leaves the image in memory. The LLDB plugin
and the GDB frontend (through the C API) write and read the same copies, and say what the CLI says.

The suite runs with HEAPSCOPE_NO_DEBUG_CACHE=1 (tests/CMakeLists.txt); these tests turn the cache on in a
directory of their own, on leak_shapes' core."""

import glob
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest
import zlib

from heapscope_e2e import environment, run_heapscope
from lldb_session import require_lldb_and_gdb, run_lldb
from test_gdb import between_markers, marked, run_gdb
from test_leaks import capture_leak_fixture

# The copy's trailer (engine/dwarf/debug_file_cache.cpp): magic, the compressed file's device, inode, size
# and mtime in ns, the image's size, its CRC-32, a reserved word.
TRAILER = struct.Struct("<8sQQQQQII")
MAGIC = b"hsdbgcp1"
COMMANDS = (("top",), ("leaks",), ("threads",))


def trailer_of(path):
    with open(path, "rb") as f:
        data = f.read()
    return data, TRAILER.unpack_from(data, len(data) - TRAILER.size)


class DebugFileCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core = capture_leak_fixture("leak_shapes").core
        cls.temporary = tempfile.TemporaryDirectory(prefix="heapscope-debug-cache-")
        cls.cache_dir = os.path.join(cls.temporary.name, "cache")
        cls.copies_dir = os.path.join(cls.cache_dir, "debug")
        cls.expected = {args: cls.run_heapscope_checked(args, {}) for args in COMMANDS}

    @classmethod
    def tearDownClass(cls):
        cls.temporary.cleanup()

    @classmethod
    def run_heapscope_checked(cls, args, env):
        result = run_heapscope(*args, cls.core, env=env)
        if result.returncode != 0:
            raise AssertionError(f"heapscope {' '.join(args)}: {result.stderr}")
        return result.stdout

    def setUp(self):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def run_cached(self, cache_dir=None):
        """Every command with the debug file cache on; each must say what it says without it."""
        env = {"HEAPSCOPE_NO_DEBUG_CACHE": "", "HEAPSCOPE_CACHE_DIR": cache_dir or self.cache_dir}
        for args in COMMANDS:
            self.assertEqual(self.run_heapscope_checked(args, env), self.expected[args], f"heapscope {args[0]}")

    def copies(self):
        return sorted(glob.glob(os.path.join(self.copies_dir, "*.debug")))

    def libc_copy(self):
        """The copy of libc's compressed debug file (libc6-dbg's, by build-id): the one whose trailer
        names that file."""
        notes = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True,
                               text=True, check=True).stdout
        build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
        st = os.stat(f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug")
        for path in self.copies():
            _, (magic, device, inode, size, mtime_ns, _, _, _) = trailer_of(path)
            if (device, inode, size, mtime_ns) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
                return path
        self.fail(f"no copy of libc's debug file among {self.copies()}")

    def assert_whole(self, path):
        data, (magic, _, _, _, _, image_size, crc, _) = trailer_of(path)
        self.assertEqual(magic, MAGIC)
        self.assertEqual(image_size, len(data) - TRAILER.size)
        self.assertEqual(zlib.crc32(data[:image_size]), crc)

    def test_a_copy_is_written_once_then_read_and_says_the_same(self):
        self.run_cached()
        copy = self.libc_copy()
        self.assert_whole(copy)
        with open(copy, "rb") as f:
            self.assertEqual(f.read(4), b"\x7fELF")  # an ELF file libdw opens as any other
        inodes = {p: os.stat(p).st_ino for p in self.copies()}
        self.run_cached()
        self.assertEqual({p: os.stat(p).st_ino for p in self.copies()}, inodes, "copies written again")

    def damage_then_check(self, damage):
        self.run_cached()
        copy = self.libc_copy()
        inode = os.stat(copy).st_ino
        with open(copy, "r+b") as f:
            damage(f)
        self.run_cached()
        self.assertNotEqual(os.stat(copy).st_ino, inode, "a damaged copy was believed")
        self.assert_whole(copy)

    def test_a_damaged_copy_is_written_again(self):
        def flip_a_byte(f):
            f.seek(os.fstat(f.fileno()).st_size // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x40]))
        self.damage_then_check(flip_a_byte)

    def test_a_copy_cut_short_is_written_again(self):
        self.damage_then_check(lambda f: f.truncate(os.fstat(f.fileno()).st_size // 2))

    def test_a_copy_of_another_file_is_written_again(self):
        def another_mtime(f):  # a whole image, its CRC right, but the trailer names another file
            size = os.fstat(f.fileno()).st_size
            f.seek(size - TRAILER.size)
            fields = list(TRAILER.unpack(f.read(TRAILER.size)))
            fields[4] += 1  # mtime_ns
            f.seek(size - TRAILER.size)
            f.write(TRAILER.pack(*fields))
        self.damage_then_check(another_mtime)

    def test_an_unwritable_cache_directory_leaves_the_image_in_memory(self):
        not_a_directory = os.path.join(self.temporary.name, "a-file")
        with open(not_a_directory, "w") as f:
            f.write("not a directory\n")
        self.run_cached(cache_dir=os.path.join(not_a_directory, "cache"))

    def debugger_cache_on(self):
        """The cache on, in this test's directory, for a debugger the helpers start from os.environ."""
        return environment(HEAPSCOPE_NO_DEBUG_CACHE="", HEAPSCOPE_CACHE_DIR=self.cache_dir)

    # `top`: it types the blocks globals hold, libc's too, so it reads libc's DWARF (`leaks` need not: no
    # structure of the C library names a leaked block).
    def lldb_top(self):
        capture = capture_leak_fixture("leak_shapes")
        with self.debugger_cache_on():
            run = run_lldb([f"target create {capture.executable} --core {capture.core}", "heap top --json"])
        return run.json_of("heap top --json")

    def gdb_top(self):
        capture = capture_leak_fixture("leak_shapes")
        with self.debugger_cache_on():
            result = run_gdb(marked("top", "heap top --json"), capture.executable, capture.core)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(between_markers(result, "top"))

    def assert_debugger_uses_the_cache(self, top):
        """The debugger's first `heap top` writes libc's copy, a second session reads it (the file stays
        the one written), and both say what the CLI says with no cache (warnings aside: a debugger's
        differ)."""
        def report(data):
            return {key: value for key, value in data.items() if key != "warnings"}
        expected = report(json.loads(self.run_heapscope_checked(("top", "--json"), {})))
        self.assertEqual(report(top()), expected)
        copy = self.libc_copy()
        self.assert_whole(copy)
        inode = os.stat(copy).st_ino
        self.assertEqual(report(top()), expected)
        self.assertEqual(os.stat(copy).st_ino, inode, "the copy was written again")

    def test_lldb_writes_and_reads_the_copies(self):
        require_lldb_and_gdb()
        self.assert_debugger_uses_the_cache(self.lldb_top)

    def test_gdb_writes_and_reads_the_copies(self):
        require_lldb_and_gdb()
        self.assert_debugger_uses_the_cache(self.gdb_top)

    def test_no_debug_cache_writes_nothing(self):
        result = run_heapscope("top", self.core, env={"HEAPSCOPE_NO_DEBUG_CACHE": "1",
                                                       "HEAPSCOPE_CACHE_DIR": self.cache_dir})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.copies(), [])


if __name__ == "__main__":
    unittest.main()
