"""A block is named by the object at its start only when that object fills it (slab_objects fixture):

- 4 KiB arena slabs that start with an arena::MethodDecl (its vtable at offset 0) are "arena::MethodDecl
  (first of a larger block)" in the histogram, apart from the four MethodDecl objects allocated one by one,
  so the class's row counts only real objects and its bytes per object are one object's block;
- `describe` on a slab says which object starts it and how big the block is, and shows that object's
  fields, not an array of MethodDecls;
- a struct ending in a flexible array member, allocated with room for 14 elements, is one flexible_record
  in `describe`, not flexible_record[N].
"""

import unittest

from heapscope_e2e import capture_fixture, heapscope_json

CLASS = "arena::MethodDecl"


class SlabObjects(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("slab_objects")
        cls.by_tag = {}
        for allocation in cls.capture.ledger.live:
            cls.by_tag.setdefault(allocation.how, []).append(allocation)
        cls.histogram = {row["type"]: row for row in heapscope_json("histogram", cls.capture.core)["types"]}

    def describe(self, address):
        return heapscope_json("describe", self.capture.core, hex(address))

    def test_the_class_row_counts_only_whole_objects(self):
        objects = self.by_tag["object"]
        row = self.histogram[CLASS]
        self.assertEqual(row["count"], len(objects))
        one_object = self.describe(objects[0].address)["block"]["size"]
        self.assertEqual(row["bytes"], len(objects) * one_object)
        self.assertLess(one_object, 2 * objects[0].size)

    def test_slabs_have_a_row_of_their_own(self):
        slabs = self.by_tag["slab"]
        rows = [name for name in self.histogram if name.startswith(CLASS) and name != CLASS]
        self.assertEqual(len(rows), 1, sorted(self.histogram))
        self.assertIn("larger block", rows[0])
        self.assertEqual(self.histogram[rows[0]]["count"], len(slabs))

    def test_describe_names_the_first_object_and_the_block(self):
        slab = self.by_tag["slab"][0]
        report = self.describe(slab.address)
        size = report["block"]["size"]
        self.assertGreaterEqual(size, slab.size)
        self.assertEqual(report["fields_type"], f"{CLASS} (first of {size} bytes)")
        paths = [field["path"] for field in report["fields"]]
        self.assertIn("params", " ".join(paths))
        self.assertFalse(any(path.startswith("[") for path in paths), paths)

    def test_a_flexible_array_struct_is_one_object(self):
        (flexible,) = self.by_tag["flexible"]
        report = self.describe(flexible.address)
        self.assertEqual(report["fields_type"], "flexible_record")
        self.assertEqual(report["block"]["type"], "flexible_record")
        paths = [field["path"] for field in report["fields"]]
        self.assertIn("count", " ".join(paths))
        self.assertFalse(any(path.startswith("[") for path in paths), paths)


if __name__ == "__main__":
    unittest.main()
