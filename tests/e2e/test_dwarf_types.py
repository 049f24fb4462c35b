"""Types from DWARF: blocks typed from the program's typed globals through pointer members, arrays and nested
structs (typed_c), libstdc++ containers (typed_containers), field names along retainer paths, and a stripped
program whose debug information lives in a separate file (typed_c_stripped).

Each fixture ledgers its blocks with the type heapscope should give them as `how` (tests/fixtures/typed_c.c,
typed_containers.cpp); "unknown" marks a block nothing typed points to."""

import os
import re
import subprocess
import unittest

from heapscope_e2e import (BlockIndex, Capture, USED_STATES, cached_heapscope_json, capture_fixture,
                           capture_program, fixture_path, parse_ledger, run_heapscope)

# Mirrors of typed_containers.cpp's constants.
ACTIVE_CLIENTS = 24
RETIRED_CLIENTS = 8
SESSIONS = 30
EVENTS = 40
# The client of the vector the path tests follow (an element, not its first or last).
CLIENT_INDEX = 17
POINTER_SIZE = 8

NOT_TYPED_YET = "the engine does not give blocks DWARF types yet"


def fixture_source(name):
    return os.path.join(os.environ["HEAPSCOPE_SOURCE_DIR"], "tests", "fixtures", name)


def line_of(source, text):
    """The number of the first line of `source` containing `text`."""
    with open(source, encoding="utf-8") as f:
        return next(number for number, line in enumerate(f, 1) if text in line)


def block_type(test, block):
    if "type" not in block:
        test.fail(f"`blocks --json` gives block {block['address']:#x} no \"type\": {NOT_TYPED_YET}")
    return block["type"]


def typed_totals(test, summary):
    typed = summary.get("typed", summary.get("heap", {}).get("typed"))
    if typed is None:
        test.fail(f"`summary --json` has no \"typed\" totals: {NOT_TYPED_YET}")
    return typed


def field_of(test, node, what):
    if "field" not in node:
        test.fail(f"`retainers --json` gives {what} no \"field\": the engine does not name fields along paths yet")
    return node["field"]


def histogram_rows_by_source(test, core):
    """The rows of `histogram --by source --json`, whichever list holds them."""
    histogram = cached_heapscope_json("histogram", core, "--by", "source")
    for key in ("sources", "rows", "types"):
        rows = histogram.get(key)
        if isinstance(rows, list) and rows and all("source" in row for row in rows):
            return rows
    test.fail(f"`histogram --by source --json` lists no rows with a \"source\": {sorted(histogram)}")


def global_path(test, core, address, symbol):
    """The shortest retainer path to `address` that starts at the global `symbol` (a global may hold the
    block through several of its words: a std::map's root, leftmost and rightmost node each start a path)."""
    retainers = cached_heapscope_json("retainers", core, hex(address), "--paths", "20")
    paths = [p for p in retainers["paths"] if p["root"]["kind"] == "global" and symbol in p["root"]["label"]]
    test.assertTrue(paths, f"a path from the global {symbol} to {address:#x} among "
                           f"{[p['root']['label'] for p in retainers['paths']]}")
    return paths[0]


class LedgeredTypes:
    """Checks shared by the fixtures: every ledgered block is in use and has the type its ledger names."""

    capture: Capture

    @classmethod
    def load(cls, capture):
        cls.capture = capture
        cls.blocks = BlockIndex(cached_heapscope_json("blocks", capture.core)["blocks"])

    def ledgered(self, how):
        return [a for a in self.capture.ledger.live if a.how == how]

    def test_every_ledgered_block_is_in_use(self):
        for allocation in self.capture.ledger.live:
            block = self.blocks.at(allocation.address)
            self.assertIsNotNone(block, f"no used block at {allocation.address:#x} ({allocation.how})")
            self.assertIn(block["state"], USED_STATES)
            self.assertGreaterEqual(block["usable_size"], allocation.size)

    def test_every_ledgered_block_has_its_type(self):
        expected = [a for a in self.capture.ledger.live if a.how != "unknown"]
        self.assertTrue(expected)
        wrong = []
        for allocation in expected:
            actual = block_type(self, self.blocks.at(allocation.address))
            if actual != allocation.how:
                wrong.append(f"{allocation.address:#x} ({allocation.size} bytes): {actual!r}, not {allocation.how!r}")
        self.assertFalse(wrong, f"{len(wrong)} of {len(expected)} ledgered blocks are typed otherwise, e.g. "
                                f"{wrong[:8]}")


class TypedC(LedgeredTypes, unittest.TestCase):
    """typed_c: C structs in globals; ≥ 90% of the in-use bytes are reached through typed pointers."""

    @classmethod
    def setUpClass(cls):
        cls.load(capture_fixture("typed_c"))
        cls.source = fixture_source("typed_c.c")

    def test_nine_tenths_of_the_in_use_bytes_are_typed(self):
        typed = typed_totals(self, cached_heapscope_json("summary", self.capture.core, "--names"))
        self.assertGreaterEqual(typed["bytes_percent"], 90)
        self.assertLessEqual(typed["bytes_percent"], 100)
        # At least the ledgered blocks of arena chunks (every state counts them in use) are among them.
        ledgered = [self.blocks.at(a.address) for a in self.capture.ledger.live if a.how != "unknown"]
        in_arena = [b for b in ledgered if b["state"] == "in_use"]
        self.assertGreaterEqual(typed["blocks"], len(in_arena))
        self.assertGreaterEqual(typed["bytes"], sum(b["usable_size"] for b in in_arena))

    def test_the_block_only_a_void_pointer_holds_stays_unknown(self):
        (opaque,) = self.ledgered("unknown")
        block = self.blocks.at(opaque.address)
        self.assertEqual(block_type(self, block), f"unknown ({block['usable_size']} bytes)")

    def test_histogram_by_type_gives_the_declaration(self):
        histogram = cached_heapscope_json("histogram", self.capture.core, "--by", "type")
        rows = {row["type"]: row for row in histogram["types"]}
        self.assertIn("node", rows, f"no row for struct node among {sorted(rows)[:20]}: {NOT_TYPED_YET}")
        self.assertEqual(rows["node"]["count"], len(self.ledgered("node")))
        self.assertEqual(rows["node"].get("source"), f"typed_c.c:{line_of(self.source, 'struct node {')}")
        self.assertEqual(rows["tree_node"].get("source"), f"typed_c.c:{line_of(self.source, 'struct tree_node {')}")

    def test_histogram_by_source_has_the_node_declaration(self):
        source = f"typed_c.c:{line_of(self.source, 'struct node {')}"
        rows = [row for row in histogram_rows_by_source(self, self.capture.core) if row["source"] == source]
        self.assertEqual(len(rows), 1, f"one row for {source}")
        self.assertIn("node", rows[0]["types"])
        self.assertEqual(rows[0]["count"], len(self.ledgered("node")))

    def test_a_path_along_the_list_names_head_and_next(self):
        nodes = self.ledgered("node")  # in list order
        path = global_path(self, self.capture.core, nodes[2].address, "g_list")
        self.assertEqual([step["address"] for step in path["steps"]], [n.address for n in nodes[:3]])
        self.assertEqual(field_of(self, path["root"], "the root"), ".head")
        self.assertEqual([field_of(self, step, "a step") for step in path["steps"]], [".next", ".next", ""])
        self.assertEqual([step["type"] for step in path["steps"]], ["node"] * 3)

    def test_a_path_through_the_bucket_array_names_the_bucket(self):
        # typed_c.c's build_table: entry i has key i * 2654435761 and is pushed at the head of bucket
        # (key >> 7) % BUCKET_COUNT, so the last entry heads its chain.
        (buckets,) = self.ledgered("entry*[]")
        entries = self.ledgered("entry")
        last = len(entries) - 1
        bucket = ((last * 2654435761) >> 7) % (buckets.size // POINTER_SIZE)
        path = global_path(self, self.capture.core, entries[last].address, "g_table")
        self.assertEqual([step["address"] for step in path["steps"]], [buckets.address, entries[last].address])
        self.assertEqual([step["type"] for step in path["steps"]], ["entry*[]", "entry"])
        self.assertEqual(field_of(self, path["root"], "the root"), ".buckets")
        self.assertEqual([field_of(self, step, "a step") for step in path["steps"]], [f"[{bucket}]", ""])

    def test_the_record_array_is_held_by_the_registry_records_member(self):
        (records,) = self.ledgered("record[]")
        path = global_path(self, self.capture.core, records.address, "g_registry")
        self.assertEqual([step["address"] for step in path["steps"]], [records.address])
        self.assertEqual(field_of(self, path["root"], "the root"), ".records")
        self.assertEqual(path["steps"][0]["type"], "record[]")


class TypedContainers(LedgeredTypes, unittest.TestCase):
    """typed_containers: a global Registry of libstdc++ containers and smart pointers."""

    @classmethod
    def setUpClass(cls):
        cls.load(capture_fixture("typed_containers"))
        cls.histogram = cached_heapscope_json("histogram", cls.capture.core)["types"]

    def count_of(self, pattern):
        """Blocks of every type matching `pattern`, and those types."""
        rows = [row for row in self.histogram if re.search(pattern, row["type"])]
        return sum(row["count"] for row in rows), [row["type"] for row in rows]

    def assert_count(self, pattern, count):
        found, types = self.count_of(pattern)
        self.assertEqual(found, count, f"{pattern!r} matches {types}; the types are "
                                       f"{sorted(row['type'] for row in self.histogram)[:30]}")

    def vector_elements(self):
        """The clients vector's buffer and its elements, in order, read from the buffer itself."""
        (buffer,) = self.ledgered("app::Client*[]")
        described = cached_heapscope_json("describe", self.capture.core, hex(buffer.address))
        slots = {p["offset"]: p["value"] for p in described["pointers"]}
        elements = [slots.get(i * POINTER_SIZE) for i in range(ACTIVE_CLIENTS)]
        self.assertNotIn(None, elements, "the vector's buffer holds a pointer in each of its first elements")
        return buffer.address, elements

    def test_the_ledger_has_every_client_and_the_vector_holds_the_active_ones(self):
        clients = [a.address for a in self.ledgered("app::Client")]
        self.assertEqual(len(clients), ACTIVE_CLIENTS + RETIRED_CLIENTS)
        self.assertEqual(self.vector_elements()[1], clients[:ACTIVE_CLIENTS])

    def test_clients_and_channels(self):
        self.assert_count(r"^app::Client$", ACTIVE_CLIENTS + RETIRED_CLIENTS)
        self.assert_count(r"^app::Channel$", ACTIVE_CLIENTS + RETIRED_CLIENTS)
        self.assert_count(r"^app::Client\*\[\]$", 1)

    def test_map_nodes(self):
        self.assert_count(r"_Rb_tree_node<.*\bint\b.*\bapp::Client\s*\*", RETIRED_CLIENTS)

    def test_unordered_map_nodes_and_bucket_array(self):
        self.assert_count(r"_Hash_node<.*basic_string<char.*\bSession\b", SESSIONS)
        self.assert_count(r"_Hash_node_base\s*\*\[\]$", 1)

    def test_list_nodes(self):
        self.assert_count(r"_List_node<\s*Event\s*>", EVENTS)

    def test_shared_ptr_control_blocks_keep_their_vtable_names(self):
        self.assert_count(r"_Sp_counted_ptr_inplace<\s*Config\b", 1)
        self.assert_count(r"_Sp_counted_ptr<\s*Config\s*\*", 1)

    def test_config_from_new_and_the_unique_ptr_target(self):
        self.assert_count(r"^Config$", 1)
        self.assert_count(r"^Buffer$", 1)

    def test_a_path_through_the_vector_names_the_member_and_the_index(self):
        buffer, elements = self.vector_elements()
        client = elements[CLIENT_INDEX]
        path = global_path(self, self.capture.core, client, "g_registry")
        self.assertEqual([step["address"] for step in path["steps"]], [buffer, client])
        self.assertEqual([step["type"] for step in path["steps"]], ["app::Client*[]", "app::Client"])
        self.assertTrue(field_of(self, path["root"], "the root").startswith(".clients"), path["root"])
        self.assertEqual(field_of(self, path["steps"][0], "the vector's buffer"), f"[{CLIENT_INDEX}]")

    def test_a_path_to_a_channel_ends_with_the_channel_member(self):
        buffer, elements = self.vector_elements()
        client = elements[CLIENT_INDEX]
        described = cached_heapscope_json("describe", self.capture.core, hex(client))
        channels = set(a.address for a in self.ledgered("app::Channel"))
        (channel,) = [p["value"] for p in described["pointers"] if p["value"] in channels]
        path = global_path(self, self.capture.core, channel, "g_registry")
        self.assertEqual([step["address"] for step in path["steps"]], [buffer, client, channel])
        self.assertEqual([field_of(self, step, "a step") for step in path["steps"]],
                         [f"[{CLIENT_INDEX}]", ".channel", ""])
        self.assertEqual(path["steps"][-1]["type"], "app::Channel")

    def test_a_path_through_the_map_names_its_nodes(self):
        active = set(self.vector_elements()[1])
        retired = [a.address for a in self.ledgered("app::Client") if a.address not in active]
        self.assertEqual(len(retired), RETIRED_CLIENTS)
        path = global_path(self, self.capture.core, retired[0], "g_registry")
        *nodes, target = path["steps"]
        self.assertEqual(target["address"], retired[0])
        self.assertTrue(nodes, "the map's nodes lie between the registry and the client")
        for node in nodes:
            self.assertRegex(node["type"], r"_Rb_tree_node<.*\bint\b.*\bapp::Client\s*\*")
        self.assertEqual(target["type"], "app::Client")
        self.assertTrue(field_of(self, path["root"], "the root").startswith(".by_id"), path["root"])


class StrippedWithDebugFile(unittest.TestCase):
    """typed_c stripped, its DWARF in typed_c-debug/.build-id/…: types need --debug-dir."""

    @classmethod
    def setUpClass(cls):
        executable = fixture_path("typed_c_stripped")
        core, ledger_file = capture_program("typed_c_stripped", executable)
        cls.capture = Capture("typed_c_stripped", executable, core, parse_ledger(ledger_file))
        cls.debug_dir = fixture_path("typed_c-debug")
        cls.with_debug_dir = ("--debug-dir", cls.debug_dir, "--debug-dir", "/usr/lib/debug")

    def program_module(self, summary):
        (module,) = [m for m in summary["modules"] if os.path.basename(m["path"]) == "typed_c_stripped"]
        return module

    def test_the_program_has_no_debug_information_of_its_own(self):
        result = subprocess.run(["readelf", "-S", self.capture.executable], capture_output=True, text=True,
                                check=True).stdout
        self.assertIn(".gnu_debuglink", result)
        self.assertNotIn(".debug_info", result)
        self.assertFalse(os.path.exists(fixture_path("typed_c.debug")), "no debug file beside the program")

    def test_the_debug_file_is_found_by_build_id_under_the_debug_dir(self):
        summary = cached_heapscope_json("summary", self.capture.core, *self.with_debug_dir)
        symbols = self.program_module(summary)["symbols"]
        self.assertTrue(symbols.startswith(f"debug file {self.debug_dir}/.build-id/"), symbols)
        without = cached_heapscope_json("summary", self.capture.core)
        self.assertFalse(self.program_module(without)["symbols"].startswith("debug file"))

    def test_nine_tenths_of_the_in_use_bytes_are_typed_through_the_debug_file(self):
        typed = typed_totals(self, cached_heapscope_json("summary", self.capture.core, "--names", *self.with_debug_dir))
        self.assertGreaterEqual(typed["bytes_percent"], 90)

    def test_without_the_debug_file_the_globals_give_no_types(self):
        typed = typed_totals(self, cached_heapscope_json("summary", self.capture.core, "--names"))
        self.assertLess(typed["bytes_percent"], 10)


def described_fields(test, core, address, *options):
    """`describe --json` of the block at `address` and its fields by path."""
    described = cached_heapscope_json("describe", core, hex(address), *options)
    if "fields" not in described:
        test.fail("`describe --json` has no \"fields\": the engine does not show typed blocks field by field yet")
    rows = {row["path"]: row for row in described["fields"]}
    test.assertEqual(len(rows), len(described["fields"]), "each path once")
    return described, rows


def dumped_word(test, described, offset, size=8):
    """The little-endian integer of `size` bytes at `offset` of `describe`'s hex dump."""
    data = bytes(described["bytes"])
    test.assertLessEqual(offset + size, len(data), "the dump covers the field")
    return int.from_bytes(data[offset:offset + size], "little")


def pointer_value(test, row):
    test.assertRegex(row["value"], r"^0x[0-9a-f]+$", row)
    return int(row["value"], 16)


class DescribeFields(unittest.TestCase):
    """`describe` of a DWARF-typed block: its fields with their values, like gdb's `print *p`."""

    # The list node the tests look at: not the first, and its index a multiple of 3 so that its name has
    # typed_c.c's longer suffix.
    NODE_INDEX = 6

    @classmethod
    def setUpClass(cls):
        cls.typed_c = capture_fixture("typed_c")
        cls.containers = capture_fixture("typed_containers")

    @staticmethod
    def following(capture, allocation, count):
        """The `count` ledger records written right after `allocation`'s (the blocks made with it)."""
        live = capture.ledger.live
        at = live.index(allocation)
        return live[at + 1:at + 1 + count]

    def node(self):
        nodes = [a for a in self.typed_c.ledger.live if a.how == "node"]  # in list order
        i = self.NODE_INDEX
        # typed_c.c's build_list ledgers each node, then its name, payload and samples.
        name, payload, samples = self.following(self.typed_c, nodes[i], 3)
        self.assertEqual([name.how, payload.how, samples.how], ["char[]", "payload", "double[]"])
        return nodes[i], nodes[i + 1], name, payload, samples

    def test_a_node_shows_next_name_and_payload_with_their_targets(self):
        node, next_node, name, payload, _ = self.node()
        described, rows = described_fields(self, self.typed_c.core, node.address)
        self.assertEqual(described["fields_type"], "node")
        self.assertEqual(list(rows), [".next", ".name", ".payload"])
        self.assertEqual([rows[p]["type"] for p in rows], ["node*", "char*", "payload*"])
        for path, target, how in ((".next", next_node, "node"), (".name", name, "char[]"),
                                  (".payload", payload, "payload")):
            row = rows[path]
            self.assertEqual(pointer_value(self, row), target.address, row)
            self.assertEqual(pointer_value(self, row), dumped_word(self, described, row["offset"]), row)
            self.assertTrue(row["points_to"].startswith(f"block {target.address:#x} ({how}, "), row)
        self.assertFalse(described["fields_truncated"])
        # The existing describe output is still there.
        self.assertEqual({p["offset"]: p["value"] for p in described["pointers"]},
                         {rows[p]["offset"]: pointer_value(self, rows[p]) for p in rows})

    def test_the_name_block_is_a_string(self):
        _, _, name, _, _ = self.node()
        described, rows = described_fields(self, self.typed_c.core, name.address)
        self.assertTrue(described["fields_type"].startswith("char["), described["fields_type"])
        (row,) = described["fields"]
        self.assertEqual(row["value"], f'"list-node-{self.NODE_INDEX}-with-a-longer-name"')

    def test_the_payload_shows_the_nested_series(self):
        _, _, _, payload, samples = self.node()
        described, rows = described_fields(self, self.typed_c.core, payload.address)
        self.assertEqual(described["fields_type"], "payload")
        self.assertEqual(list(rows), [".kind", ".flags", ".series", ".series.samples", ".series.count", ".label"])
        # typed_c.c's build_list: kind i % 7, no flags, 24 samples, label "sensor".
        self.assertEqual(rows[".kind"]["value"], str(self.NODE_INDEX % 7))
        self.assertEqual(rows[".kind"]["type"], "int")
        self.assertEqual(int(rows[".kind"]["value"]), dumped_word(self, described, rows[".kind"]["offset"], 4))
        self.assertEqual(rows[".flags"]["value"], "0")
        self.assertEqual(rows[".series"]["type"], "series")
        self.assertEqual(rows[".series"]["value"], "")
        self.assertEqual(rows[".series.samples"]["offset"], rows[".series"]["offset"])
        self.assertEqual(pointer_value(self, rows[".series.samples"]), samples.address)
        self.assertEqual(pointer_value(self, rows[".series.samples"]),
                         dumped_word(self, described, rows[".series.samples"]["offset"]))
        self.assertTrue(rows[".series.samples"]["points_to"].startswith(f"block {samples.address:#x} (double[], "))
        self.assertEqual(rows[".series.count"]["value"], "24")
        self.assertEqual(rows[".series.count"]["value"],
                         str(dumped_word(self, described, rows[".series.count"]["offset"])))
        self.assertEqual(rows[".label"]["type"], "char[8]")
        self.assertEqual(rows[".label"]["value"], '"sensor"')

    def test_a_block_of_doubles_shows_its_elements(self):
        _, _, _, _, samples = self.node()
        described, rows = described_fields(self, self.typed_c.core, samples.address)
        self.assertTrue(described["fields_type"].startswith("double["), described["fields_type"])
        # typed_c.c: sample s of node i is i + s / 100.
        for s in range(4):
            self.assertAlmostEqual(float(rows[f"[{s}]"]["value"]), self.NODE_INDEX + s / 100.0)
            self.assertEqual(rows[f"[{s}]"]["offset"], 8 * s)

    def test_fields_limits_the_rows(self):
        _, _, _, payload, _ = self.node()
        described, rows = described_fields(self, self.typed_c.core, payload.address, "--fields", "2")
        self.assertEqual(list(rows), [".kind", ".flags"])
        self.assertTrue(described["fields_truncated"])
        (records,) = [a for a in self.typed_c.ledger.live if a.how == "record[]"]
        described, rows = described_fields(self, self.typed_c.core, records.address)
        self.assertEqual(len(described["fields"]), 32)
        self.assertTrue(described["fields_truncated"])
        # typed_c.c's build_registry: record i has id i, weight i / 2 and tag "record".
        self.assertEqual(rows["[1].id"]["value"], "1")
        self.assertEqual(float(rows["[1].weight"]["value"]), 0.5)
        self.assertEqual(rows["[1].tag"]["value"], '"record"')

    def test_an_untyped_block_has_no_fields(self):
        (opaque,) = [a for a in self.typed_c.ledger.live if a.how == "unknown"]
        described, _ = described_fields(self, self.typed_c.core, opaque.address)
        self.assertEqual(described["fields"], [])
        self.assertEqual(described["fields_type"], "")
        self.assertTrue(described["bytes"], "the hex dump is still there")

    def test_text_output_lists_the_fields(self):
        node, next_node, _, _, _ = self.node()
        result = run_heapscope("describe", self.typed_c.core, hex(node.address))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Fields of node:", result.stdout)
        self.assertRegex(result.stdout, rf"\.next \(node\*\) = {next_node.address:#x} → block {next_node.address:#x} ")

    def test_a_client_shows_its_id_channel_and_score(self):
        clients = [a for a in self.containers.ledger.live if a.how == "app::Client"]  # vector order first
        client = clients[CLIENT_INDEX]
        # typed_containers.cpp's ledger_client: the client, its channel, its name's buffer.
        channel, name = self.following(self.containers, client, 2)
        self.assertEqual([channel.how, name.how], ["app::Channel", "char[]"])
        described, rows = described_fields(self, self.containers.core, client.address)
        self.assertEqual(described["fields_type"], "app::Client")
        # make_client(i): id i, score i * 0.25.
        self.assertEqual(rows[".id"]["value"], str(CLIENT_INDEX))
        self.assertEqual(rows[".id"]["value"], str(dumped_word(self, described, rows[".id"]["offset"], 4)))
        self.assertEqual(rows[".channel"]["type"], "app::Channel*")
        self.assertEqual(pointer_value(self, rows[".channel"]), channel.address)
        self.assertTrue(rows[".channel"]["points_to"].startswith(f"block {channel.address:#x} (app::Channel, "))
        self.assertEqual(float(rows[".score"]["value"]), CLIENT_INDEX * 0.25)
        self.assertEqual(rows[".score"]["type"], "double")
        string_pointers = [row for path, row in rows.items() if path.startswith(".name.") and row["points_to"]]
        self.assertEqual([pointer_value(self, row) for row in string_pointers], [name.address])

        described, rows = described_fields(self, self.containers.core, channel.address)
        self.assertEqual(described["fields_type"], "app::Channel")
        self.assertEqual(rows[".fd"]["value"], str(100 + CLIENT_INDEX))
        self.assertEqual(rows[".label"]["value"], '"tcp"')


if __name__ == "__main__":
    unittest.main()
