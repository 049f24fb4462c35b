"""End-to-end checks of the dominator tree and retained sizes (`top`, `roots`) on the retention fixture
(tests/fixtures/retention/retention_tree.c), whose ledger says exactly what each structure holds:

  retention <name> <address> <blocks> <usable bytes of all its blocks>

for the ~10 MB tree held by the global g_tree, the table held by g_table (an array and its entries), the
block both g_shared_a and g_shared_b hold, the list on main's stack, the block in register r15 and one
leaked block. No stray pointer copies exist (the fixture scrubs its dead stack and registers), so every
retained size below is exact.
"""

import os
import unittest

from heapscope_e2e import cached_heapscope_json, capture_program, fixture_path, heapscope_json, run_heapscope

FIXTURE = os.path.join("retention", "retention_tree")
MODULE = "retention_tree"


def parse_retention_lines(ledger_file):
    """{name: (address, blocks, bytes)} from the ledger's `retention` lines."""
    found = {}
    with open(ledger_file, encoding="ascii") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == "retention":
                if len(fields) != 5:
                    raise ValueError(f"{ledger_file}: bad retention line {line.strip()!r}")
                found[fields[1]] = tuple(int(x) for x in fields[2:])
    wanted = {"tree", "table", "shared", "stack-list", "register", "leaked"}
    if set(found) != wanted:
        raise ValueError(f"{ledger_file}: retention lines for {sorted(found)}, expected {sorted(wanted)}")
    return found


class RetentionTree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.core, ledger_file = capture_program("retention-tree", fixture_path(FIXTURE))
        cls.expected = parse_retention_lines(ledger_file)
        cls.top = cached_heapscope_json("top", cls.core)
        cls.roots = cached_heapscope_json("roots", cls.core, "-n", "0")

    def structure(self, name):
        address, blocks, size = self.expected[name]
        return address, blocks, size

    def root_row(self, symbol):
        rows = [r for r in self.roots["roots"] if r["kind"] == "global" and r["symbol"] == symbol]
        self.assertEqual(len(rows), 1, f"one root for the global {symbol}")
        return rows[0]

    def owners(self, report):
        return [r for r in report["roots"] if r["depth"] == 0]

    # ---- top: suspects ----

    def test_the_fixture_holds_a_ten_megabyte_tree(self):
        _, blocks, size = self.structure("tree")
        self.assertEqual(blocks, 2 ** 18 - 1)
        self.assertGreaterEqual(size, 10 * 1000 * 1000)

    def test_the_top_suspect_is_the_global_holding_the_tree_and_retains_exactly_the_tree(self):
        _, blocks, size = self.structure("tree")
        suspect = self.top["suspects"][0]
        self.assertEqual(suspect["kind"], "big_retainer")
        holder = suspect["holder"]
        self.assertEqual((holder["kind"], holder["root_kind"], holder["symbol"], holder["module"]),
                         ("root", "global", "g_tree", MODULE))
        self.assertEqual(holder["label"], f"global g_tree in {MODULE}")
        self.assertEqual(suspect["retained_bytes"], size)
        self.assertEqual(suspect["retained_blocks"], blocks)
        self.assertAlmostEqual(suspect["retained_percent"], 100.0 * size / self.top["heap"]["in_use_bytes"], places=2)
        self.assertEqual(suspect["retained_types"][0], {"type": "tree_node", "count": blocks, "bytes": size})

    def test_the_suspect_accumulates_in_the_tree_root_reached_through_g_tree(self):
        address, blocks, size = self.structure("tree")
        suspect = self.top["suspects"][0]
        point = suspect["accumulation_point"]
        self.assertEqual((point["kind"], point["address"]), ("block", address))
        self.assertEqual((point["retained_bytes"], point["retained_blocks"]), (size, blocks))
        path = suspect["path"]
        self.assertEqual(path["root"]["kind"], "global")
        self.assertIn("g_tree", path["root"]["label"])
        self.assertEqual([s["address"] for s in path["steps"]], [address])

    def test_no_other_root_or_block_retains_ten_percent(self):
        big = [s for s in self.top["suspects"] if s["kind"] == "big_retainer"]
        self.assertEqual(len(big), 1, [s["holder"].get("label", s["holder"].get("address")) for s in big])

    def test_the_tree_nodes_accumulate_under_g_tree(self):
        _, blocks, size = self.structure("tree")
        piles = [s for s in self.top["suspects"] if s["kind"] == "accumulation"
                 and s["holder"]["kind"] == "root" and s["holder"]["symbol"] == "g_tree"]
        self.assertEqual(len(piles), 1)
        self.assertEqual((piles[0]["type"], piles[0]["instances"], piles[0]["instance_bytes"]),
                         ("tree_node", blocks, size))
        self.assertIsNone(piles[0]["path"], "a root needs no path")

    def test_the_table_entries_accumulate_under_the_table_block_with_a_path_from_g_table(self):
        table, blocks, size = self.structure("table")
        piles = [s for s in self.top["suspects"] if s["kind"] == "accumulation"
                 and s["holder"]["kind"] == "block" and s["holder"]["address"] == table]
        self.assertEqual(len(piles), 1, "one accumulation under the table block")
        pile = piles[0]
        self.assertEqual((pile["type"], pile["instances"]), ("unknown (56 bytes)", blocks - 1))
        self.assertEqual((pile["retained_bytes"], pile["retained_blocks"]), (size, blocks))
        self.assertIn("g_table", pile["path"]["root"]["label"])
        self.assertEqual([s["address"] for s in pile["path"]["steps"]], [table])

    # ---- top: rows ----

    def test_the_largest_retainer_by_block_is_the_tree_root(self):
        address, blocks, size = self.structure("tree")
        first = self.top["rows"][0]
        self.assertEqual(self.top["by"], "block")
        self.assertEqual((first["address"], first["retained_bytes"], first["retained_blocks"]), (address, size, blocks))
        self.assertEqual(len(self.top["rows"]), 10)
        retained = [r["retained_bytes"] for r in self.top["rows"]]
        self.assertEqual(retained, sorted(retained, reverse=True))

    def test_top_by_root_and_by_type(self):
        _, blocks, size = self.structure("tree")
        by_root = cached_heapscope_json("top", self.core, "--by", "root", "-n", "3")
        self.assertEqual(len(self.owners({"roots": by_root["rows"]})), 3)
        # The module's globals first, and the largest of its variables right under them.
        first, second = by_root["rows"][:2]
        self.assertEqual((first["kind"], first["label"]), ("global", f"globals of {MODULE}"))
        self.assertEqual((second["symbol"], second["retained_bytes"], second["owner"]), ("g_tree", size, first["label"]))
        by_type = cached_heapscope_json("top", self.core, "--by", "type")
        rows = {r["type"]: r for r in by_type["rows"]}
        nodes = rows["tree_node"]
        self.assertGreaterEqual(nodes["count"], blocks)
        self.assertGreaterEqual(nodes["retained_bytes"], size)
        _, table_blocks, table_size = self.structure("table")
        self.assertEqual(rows["unknown (56 bytes)"]["count"], table_blocks - 1)
        # Retained sizes of types never count a block twice: together they fit in the reachable heap.
        self.assertLessEqual(max(r["retained_bytes"] for r in by_type["rows"]), by_type["heap"]["reachable_bytes"])

    # ---- roots ----

    def test_roots_attribute_the_tree_to_the_global_kind_and_name_the_global(self):
        _, blocks, size = self.structure("tree")
        owner, first = self.roots["roots"][:2]
        self.assertEqual((owner["depth"], owner["module"]), (0, MODULE))
        self.assertEqual((first["kind"], first["symbol"], first["module"], first["depth"]), ("global", "g_tree", MODULE, 1))
        self.assertEqual((first["retained_bytes"], first["retained_blocks"]), (size, blocks))
        self.assertEqual(self.roots["kinds"][0]["kind"], "global")
        self.assertGreaterEqual(self.roots["kinds"][0]["retained_bytes"], size)

    def test_g_table_retains_the_array_and_its_entries(self):
        _, blocks, size = self.structure("table")
        row = self.root_row("g_table")
        self.assertEqual((row["retained_bytes"], row["retained_blocks"]), (size, blocks))

    def test_a_block_two_globals_hold_belongs_to_their_module_not_to_either_global(self):
        _, _, shared = self.structure("shared")
        for symbol in ("g_shared_a", "g_shared_b"):  # listed only when they retain anything
            rows = [r for r in self.roots["roots"] if r["symbol"] == symbol]
            self.assertEqual([r["retained_bytes"] for r in rows if r["retained_bytes"]], [], symbol)
        (module,) = [r for r in self.owners(self.roots) if r["label"] == f"globals of {MODULE}"]
        by_variables = sum(r["retained_bytes"] for r in self.roots["roots"] if r["owner"] == module["label"])
        self.assertGreaterEqual(module["retained_bytes"] - by_variables, shared)

    def test_the_stack_and_the_register_retain_their_blocks(self):
        _, list_blocks, list_size = self.structure("stack-list")
        _, _, register_size = self.structure("register")
        stacks = [r for r in self.roots["roots"] if r["kind"] == "stack" and r["depth"] == 1]  # the thread's stack
        registers = [r for r in self.roots["roots"] if r["kind"] == "register"]
        self.assertEqual(len(stacks), 1)
        self.assertEqual(len(registers), 1)
        self.assertEqual((stacks[0]["retained_bytes"], stacks[0]["retained_blocks"]), (list_size, list_blocks))
        self.assertEqual(registers[0]["retained_bytes"], register_size)
        self.assertTrue(stacks[0]["label"].startswith("stack of thread 1 (tid "), stacks[0]["label"])
        self.assertNotEqual(stacks[0]["tid"], 0)

    def test_retainer_paths_show_what_each_step_retains(self):
        address, blocks, size = self.structure("tree")
        leaves = [b for b in cached_heapscope_json("blocks", self.core, "--state", "reachable")["blocks"]
                  if b["usable_size"] == 40]
        steps = heapscope_json("retainers", self.core, hex(leaves[len(leaves) // 2]["address"]))["paths"][0]["steps"]
        retained = [step["retained"] for step in steps]
        self.assertEqual(retained[0], size, "the tree's root block retains the whole tree")
        self.assertEqual(retained, sorted(retained, reverse=True), "each step retains no more than the one before")

    def test_the_leaked_block_is_in_no_root_and_shares_add_up(self):
        _, _, leaked = self.structure("leaked")
        heap = self.roots["heap"]
        self.assertEqual(heap["in_use_bytes"] - heap["reachable_bytes"], leaked)
        self.assertEqual(heap["in_use_blocks"] - heap["reachable_blocks"], 1)
        by_kinds = sum(k["retained_bytes"] for k in self.roots["kinds"])
        self.assertEqual(by_kinds + self.roots["shared"]["retained_bytes"], heap["reachable_bytes"])
        self.assertEqual(self.roots["root_count"], len(self.owners(self.roots)))

    def test_roots_lists_the_largest_first_and_honours_count(self):
        retained = [r["retained_bytes"] for r in self.owners(self.roots)]
        self.assertEqual(retained, sorted(retained, reverse=True))
        few = cached_heapscope_json("roots", self.core, "-n", "2")
        self.assertEqual([r["label"] for r in self.owners(few)], [r["label"] for r in self.owners(self.roots)[:2]])
        for row in few["roots"]:  # each part follows its owner
            self.assertIn(row["owner"], ["", *[r["label"] for r in self.owners(few)]])
        self.assertEqual(few["root_count"], self.roots["root_count"])

    # ---- text ----

    def test_text_output_names_the_suspect_and_the_roots(self):
        top = run_heapscope("top", self.core)
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertIn(f"1. global g_tree in {MODULE} retains 10.0 MiB", top.stdout)
        roots = run_heapscope("roots", self.core)
        self.assertEqual(roots.returncode, 0, roots.stderr)
        self.assertIn(f"global g_tree in {MODULE}", roots.stdout)
        self.assertIn("Retained per owner kind", roots.stdout)

    def test_bad_options_are_refused(self):
        for args in (("top", self.core, "--by", "thread"), ("top", self.core, "-n", "-1")):  # -n 0 lists all
            result = run_heapscope(*args)
            self.assertNotEqual(result.returncode, 0, args)
            self.assertTrue(result.stderr.strip(), args)


if __name__ == "__main__":
    unittest.main()
