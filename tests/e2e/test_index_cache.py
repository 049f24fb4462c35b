"""End-to-end checks of the index cache (docs/usage.md, "Index cache"): a command on a core saves the
heap, pointer graph and leak verdicts; the next command in a new process loads them instead of walking
and scanning, with output identical to a run without the cache; a core written again, or an index file
damaged or cut short, is never believed: the products are computed again and the index rewritten.

The suite runs with HEAPSCOPE_NO_CACHE=1 (tests/CMakeLists.txt); these tests turn the cache on, in a
directory of their own, on a copy of leak_shapes' core (its mtime is changed here)."""

import glob
import os
import re
import shutil
import struct
import tempfile
import unittest

from heapscope_e2e import capture_program, heapscope_json, run_heapscope
from test_leaks import capture_leak_fixture
from test_python_objects import COUNT as PYTHON_OBJECTS, PYTHON, SCRIPT as PYTHON_SCRIPT


def phases(stderr):
    """The phase names HEAPSCOPE_TIMING=1 printed, in order."""
    prefix = "heapscope: phase "
    return [line[len(prefix):].rsplit(" ", 2)[0] for line in stderr.splitlines() if line.startswith(prefix)]


def without_warning_headings(lines):
    """The lines but the "Warnings (N):" heading (N counts the note), trailing blank lines dropped."""
    kept = [line for line in lines if not re.fullmatch(r"Warnings \(\d+\):", line)]
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


# The index file's layout (engine/session/index_file.h): a header (magic, format version, section count,
# file size, checksum of the body) and a table of (kind, reserved, offset, size).
HEADER = struct.Struct("<8sIIQQ")
SECTION = struct.Struct("<IIQQ")
BLOCKS_SECTION, ROOT_EDGES_SECTION, DOMINATORS_SECTION, NAMES_IDS_SECTION, OBJECT_STARTS_SECTION = 3, 7, 16, 21, 23
BLOCK_PAGES_SECTION = 29
BLOCK = struct.Struct("<QIBBH")  # chunk, size_units, state, layout, arena
MMAPPED = 1
M64 = (1 << 64) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
KEYS = (0xBE4BA423396CFEB8, 0x1CAD21F72C81017C, 0xDB979083E96DD4DE, 0x1F67B3B7A4A44072,
        0x78E5C0CC4EE679CB, 0x2172FFCC7DD05A82, 0x8E2443F7744608B8, 0x4C263A81E69035E0)


def index_checksum(body):
    """IndexChecksum (engine/session/index_file.cpp), for a test to forge a file that passes it."""
    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & M64

    def mix(acc, word):
        return (rotl((acc + word * P2) & M64, 31) * P1) & M64

    lanes = [0] * 8
    whole = len(body) // 64 * 64
    words = struct.unpack_from(f"<{whole // 8}Q", body)
    for stripe in range(whole // 64):
        position = (stripe * P1) & M64
        w = words[stripe * 8:stripe * 8 + 8]
        for i in range(8):
            keyed = w[i] ^ ((KEYS[i] + position) & M64)
            lanes[i] = (lanes[i] + (keyed & 0xFFFFFFFF) * (keyed >> 32) + w[i ^ 1]) & M64
    h = (len(body) * P3) & M64
    for lane in lanes:
        h = mix(h, lane)
    for i, byte in enumerate(body[whole:]):
        h = mix(h, byte + i)
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    return h ^ (h >> 32)


def forge_section(path, kind, change):
    """Rewrites section `kind` of the index at `path` with change(bytearray), and its checksum to match:
    a file only the checks against the core can tell from a true one."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    magic, version, count, size, _ = HEADER.unpack_from(data)
    for i in range(count):
        k, _, offset, length = SECTION.unpack_from(data, HEADER.size + i * SECTION.size)
        if k == kind:
            section = bytearray(data[offset:offset + length])
            change(section)
            data[offset:offset + length] = section
    HEADER.pack_into(data, 0, magic, version, count, size, index_checksum(bytes(data[HEADER.size:])))
    with open(path, "wb") as f:
        f.write(data)


def grow_first_block(blocks):
    chunk, units, state, layout, arena = BLOCK.unpack_from(blocks)
    assert state != MMAPPED, "the heap's first block has a chunk header to compare"
    BLOCK.pack_into(blocks, 0, chunk, units + 1, state, layout, arena)


def retarget_first_root_edge(edges):
    (edge,) = struct.unpack_from("<I", edges)
    struct.pack_into("<I", edges, 0, edge ^ 1)  # another block, same interior bit


def unknown_type_ids(ids):
    """Every block's type id past the end of the type table: names that no longer fit their heap."""
    ids[:] = b"\xfe" * len(ids)


def no_links_before_objects(starts):
    """Every object's start without its list links: headers that no longer agree with the core."""
    starts[:] = bytes(b & 0x7F for b in starts)


def pages_past_the_blocks(table):
    """Every page of the block index's table on a block past the heap's last: what a damaged file could
    make a lookup read."""
    table[:] = b"\xff" * len(table)


def no_dominators(idom):
    """Every node outside the tree: what a file damaged there would say of the reachable blocks."""
    idom[:] = b"\xff" * len(idom)


class IndexCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        capture = capture_leak_fixture("leak_shapes")
        cls.temporary = tempfile.TemporaryDirectory(prefix="heapscope-index-cache-")
        cls.core = os.path.join(cls.temporary.name, "leak_shapes.core")
        shutil.copyfile(capture.core, cls.core)
        cls.cache_dir = os.path.join(cls.temporary.name, "cache")
        leaked = heapscope_json("blocks", cls.core, "--state", "leaked", "--no-cache")["blocks"]
        reachable = heapscope_json("blocks", cls.core, "--state", "in_use", "--no-cache")["blocks"]
        cls.leaked_address = hex(leaked[0]["address"])
        reachable_ones = [b["address"] for b in reachable if b["address"] not in {x["address"] for x in leaked}]
        cls.reachable_address = hex(reachable_ones[len(reachable_ones) // 2])

    @classmethod
    def tearDownClass(cls):
        cls.temporary.cleanup()

    def setUp(self):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def run_cached(self, *args):
        """Runs heapscope with the cache on; returns (stdout, phases). Fails on a non-zero exit."""
        # An empty HEAPSCOPE_NO_CACHE leaves the cache on (run_heapscope adds to the suite's environment).
        result = run_heapscope(*args, env={"HEAPSCOPE_NO_CACHE": "", "HEAPSCOPE_CACHE_DIR": self.cache_dir,
                                           "HEAPSCOPE_TIMING": "1"})
        self.assertEqual(result.returncode, 0, f"heapscope {' '.join(args)}: {result.stderr}")
        return result.stdout, phases(result.stderr)

    def without_cache(self, *args):
        result = run_heapscope(*args, "--no-cache")
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def index_files(self):
        return glob.glob(os.path.join(self.cache_dir, "*.hsindex"))

    def assert_computed_and_written(self, steps):
        self.assertIn("scan", steps)
        self.assertIn("cache: write", steps)
        self.assertNotIn("cache: verdicts", steps)  # a graph refused by its check may appear as "cache: graph"

    def assert_loaded(self, steps):
        self.assertIn("cache: load", steps)
        self.assertIn("cache: check", steps)
        self.assertIn("cache: graph", steps)
        self.assertNotIn("scan", steps)
        self.assertNotIn("walk: chunks", steps)
        self.assertNotIn("reachability", steps)
        self.assertNotIn("cache: write", steps)

    def assert_part_refused_alone(self, section, change, command, computed, why, loaded):
        """A saved part of the index (`section`) forged with change() is refused with one warning that says
        `why`: the rest of the index is used, the part computed (phase `computed`) with the output it would
        have without the cache, and the index rewritten, so that the next run loads the part (`loaded`)."""
        self.run_cached("leaks", self.core)
        [index] = self.index_files()
        forge_section(index, section, change)
        out, steps = self.run_cached(*command)
        self.assertIn("cache: graph", steps)
        self.assertIn(computed, steps)
        self.assertIn("cache: write", steps)
        notes = [line for line in out.splitlines() if "index cache" in line]
        self.assertEqual(len(notes), 1, out)
        self.assertIn(why, notes[0])
        expected = self.without_cache(*command)
        self.assertEqual(without_warning_headings(line for line in out.splitlines() if line not in notes),
                         without_warning_headings(expected.splitlines()))
        out, steps = self.run_cached(*command)
        self.assertIn("cache: graph", steps)
        self.assertIn(loaded, steps)
        self.assertNotIn(computed, steps)
        self.assertEqual(out, expected)

    def commands(self):
        return [("leaks", self.core), ("retainers", self.core, self.leaked_address),
                ("retainers", self.core, self.reachable_address, "--paths", "3"),
                ("blocks", self.core, "--state", "leaked")]

    def test_second_commands_load_the_index_and_say_the_same(self):
        _, steps = self.run_cached("leaks", self.core)
        self.assert_computed_and_written(steps)
        self.assertEqual(len(self.index_files()), 1)
        for command in self.commands():
            with self.subTest(command=command):
                out, steps = self.run_cached(*command)
                self.assert_loaded(steps)
                self.assertEqual(out, self.without_cache(*command))
        self.assertEqual(len(self.index_files()), 1)

    def test_the_dominator_tree_is_saved_beside_the_graph(self):
        # `leaks` needs no dominator tree; the index it leaves has one, for the retained sizes of `retainers`
        # and for `top`.
        self.run_cached("leaks", self.core)
        for command in (("retainers", self.core, self.reachable_address, "--paths", "3"), ("top", self.core)):
            with self.subTest(command=command):
                out, steps = self.run_cached(*command)
                self.assert_loaded(steps)
                self.assertIn("cache: dominators", steps)
                self.assertNotIn("dominators: semi-NCA", steps)
                self.assertEqual(out, self.without_cache(*command))

    def test_a_damaged_dominator_tree_is_not_believed(self):
        self.assert_part_refused_alone(DOMINATORS_SECTION, no_dominators,
                                       ("retainers", self.core, self.reachable_address, "--paths", "3"),
                                       "dominators: semi-NCA", "dominator is wrong", "cache: dominators")

    def test_the_names_are_saved_beside_the_graph(self):
        # `leaks` names the leaks alone; the index it leaves has every block's name, so that a command about
        # one block names it and its ancestors without DWARF typing over most of the heap.
        self.run_cached("leaks", self.core)
        for command in (("describe", self.core, self.reachable_address), ("refs", self.core, self.reachable_address),
                        ("retainers", self.core, self.reachable_address, "--paths", "3"), ("histogram", self.core),
                        ("leaks", self.core)):
            with self.subTest(command=command):
                out, steps = self.run_cached(*command)
                self.assert_loaded(steps)
                self.assertIn("cache: names", steps)
                self.assertNotIn("dwarf types", steps)
                self.assertEqual(out, self.without_cache(*command))

    def test_damaged_names_are_not_believed(self):
        self.assert_part_refused_alone(NAMES_IDS_SECTION, unknown_type_ids, ("describe", self.core, self.reachable_address),
                                       "dwarf types", "a block's type is not in the names", "cache: names")

    def test_a_damaged_block_index_is_not_believed(self):
        self.assert_part_refused_alone(BLOCK_PAGES_SECTION, pages_past_the_blocks,
                                       ("retainers", self.core, self.reachable_address, "--paths", "3"),
                                       "block index", "leads past its blocks", "cache: block index")

    def test_no_cache_neither_reads_nor_writes(self):
        result = run_heapscope("leaks", self.core, "--no-cache",
                               env={"HEAPSCOPE_CACHE_DIR": self.cache_dir, "HEAPSCOPE_NO_CACHE": ""})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.index_files(), [])

    def test_a_core_written_again_is_analysed_again(self):
        self.run_cached("leaks", self.core)
        [before] = self.index_files()
        stat = os.stat(self.core)
        os.utime(self.core, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
        out, steps = self.run_cached("leaks", self.core)
        self.assert_computed_and_written(steps)
        self.assertEqual(out, self.without_cache("leaks", self.core))
        self.assertEqual(len(self.index_files()), 2)  # the new key's, beside the stale one (evicted in time)
        _, steps = self.run_cached("leaks", self.core)
        self.assert_loaded(steps)
        self.assertIn(before, self.index_files())

    def damage_then_check(self, damage, why=""):
        self.run_cached("leaks", self.core)
        [index] = self.index_files()
        damage(index)
        command = ("retainers", self.core, self.reachable_address, "--paths", "3")
        out, steps = self.run_cached(*command)
        self.assert_computed_and_written(steps)
        expected = self.without_cache(*command)
        # The one difference: a note that the index was refused and why.
        notes = [line for line in out.splitlines() if "index cache" in line]
        self.assertEqual(len(notes), 1, out)
        self.assertIn("not used", notes[0])
        self.assertIn(why, notes[0])
        self.assertEqual(without_warning_headings(line for line in out.splitlines() if line not in notes),
                         without_warning_headings(expected.splitlines()))
        out, steps = self.run_cached(*command)  # rewritten whole
        self.assert_loaded(steps)
        self.assertEqual(out, expected)

    def test_a_damaged_index_is_not_believed(self):
        def flip_middle(path):
            with open(path, "r+b") as f:
                size = os.path.getsize(path)
                f.seek(size // 2)
                data = bytearray(f.read(64))
                f.seek(size // 2)
                f.write(bytes(b ^ 0x5A for b in data))
        self.damage_then_check(flip_middle, "checksum mismatch")

    def test_a_damaged_index_with_its_times_set_back_is_not_believed(self):
        # Its writer marked it checked; the damage changes its change time, which no one can set back, so
        # the mark no longer fits and the checksum is computed again.
        def flip_and_set_back(path):
            before = os.stat(path)
            with open(path, "r+b") as f:
                f.seek(before.st_size // 2)
                data = bytearray(f.read(64))
                f.seek(before.st_size // 2)
                f.write(bytes(b ^ 0x5A for b in data))
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        self.damage_then_check(flip_and_set_back, "checksum mismatch")

    def test_a_checked_index_is_not_hashed_again(self):
        # The writer marks the file it wrote as checked (this boot, the file as it is): a command after it
        # reads the pages it needs, not the whole file. Without the mark the checksum is computed, and the
        # mark written again.
        self.run_cached("leaks", self.core)
        [index] = self.index_files()
        mark = index + ".checked"
        self.assertTrue(os.path.exists(mark))
        command = ("describe", self.core, self.reachable_address)
        expected = self.without_cache(*command)
        out, steps = self.run_cached(*command)
        self.assert_loaded(steps)
        self.assertNotIn("cache: checksum", steps)
        self.assertEqual(out, expected)
        os.remove(mark)
        out, steps = self.run_cached(*command)
        self.assert_loaded(steps)
        self.assertIn("cache: checksum", steps)
        self.assertEqual(out, expected)
        self.assertTrue(os.path.exists(mark))
        _, steps = self.run_cached(*command)
        self.assertNotIn("cache: checksum", steps)
        # A mark of another boot, or of the file before it changed, is not believed.
        with open(mark) as f:
            record = f.read()
        with open(mark, "w") as f:
            f.write(record.replace("boot ", "boot 0", 1))
        _, steps = self.run_cached(*command)
        self.assertIn("cache: checksum", steps)

    def test_a_cut_index_is_not_believed(self):
        self.damage_then_check(lambda path: os.truncate(path, os.path.getsize(path) // 3), "truncated")

    def test_an_index_whose_heap_is_not_the_cores_is_not_believed(self):
        self.damage_then_check(lambda path: forge_section(path, BLOCKS_SECTION, grow_first_block),
                               "block 0's chunk header differs")

    def test_an_index_whose_graph_is_not_the_cores_is_not_believed(self):
        self.damage_then_check(lambda path: forge_section(path, ROOT_EDGES_SECTION, retarget_first_root_edge),
                               "edges differ")


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(os.access(PYTHON, os.X_OK), "Debian's python3 is not installed")
class IndexCacheOfCPythonTest(unittest.TestCase):
    """The object headers of a CPython heap (a pass over every block's first words, most of a one-block
    command's time there) are saved too, and checked against a sample of the core's blocks."""

    @classmethod
    def setUpClass(cls):
        core, _ = capture_program("python-dict-of-lists", PYTHON, extra_sources=(PYTHON_SCRIPT,),
                                  env={"PYTHONMALLOC": "malloc"}, args=(PYTHON_SCRIPT, str(PYTHON_OBJECTS)))
        cls.temporary = tempfile.TemporaryDirectory(prefix="heapscope-index-cache-python-")
        cls.core = os.path.join(cls.temporary.name, "python.core")
        shutil.copyfile(core, cls.core)
        cls.cache_dir = os.path.join(cls.temporary.name, "cache")
        blocks = heapscope_json("blocks", cls.core, "--state", "reachable", "--limit", "1000", "--no-cache")["blocks"]
        cls.address = hex(blocks[-1]["address"])

    @classmethod
    def tearDownClass(cls):
        cls.temporary.cleanup()

    def setUp(self):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    run_cached = IndexCacheTest.run_cached
    without_cache = IndexCacheTest.without_cache
    index_files = IndexCacheTest.index_files
    assert_part_refused_alone = IndexCacheTest.assert_part_refused_alone

    def test_object_headers_are_saved_beside_the_graph(self):
        self.run_cached("leaks", self.core)
        for command in (("describe", self.core, self.address), ("leaks", self.core)):
            with self.subTest(command=command):
                out, steps = self.run_cached(*command)
                self.assertIn("cache: graph", steps)
                self.assertIn("cache: object headers", steps)
                self.assertNotIn("object headers: search", steps)
                self.assertEqual(out, self.without_cache(*command))

    def test_object_headers_that_disagree_with_the_core_are_not_believed(self):
        self.assert_part_refused_alone(OBJECT_STARTS_SECTION, no_links_before_objects,
                                       ("describe", self.core, self.address), "object headers: search",
                                       "object header differs", "cache: object headers")
