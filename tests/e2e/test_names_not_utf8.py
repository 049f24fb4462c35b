"""Names that are not UTF-8: symbols come from the target, and a linker takes any bytes. names_not_utf8
(tests/fixtures/names_not_utf8.c) holds one block by a global named "g_\\xff\\xfe_holder" and one by a
thread-local "t_\\xc3_holder", and leaks a third. Every command that names them prints valid JSON with
U+FFFD where the bytes were — before, nlohmann::json threw while writing and the process (a debugger, in
LLDB or GDB) aborted — and text output keeps the bytes as they are, as nm prints them."""

import json
import subprocess
import unittest

from heapscope_e2e import capture_fixture, heapscope_path, run_heapscope

GLOBAL_NAME = "g_\ufffd\ufffd_holder"
THREAD_LOCAL_NAME = "t_\ufffd_holder"


def block_held_as(capture, how):
    (block,) = [a.address for a in capture.ledger.live if a.how == how]
    return block


class NamesNotUtf8(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.capture = capture_fixture("names_not_utf8")
        cls.held_by_global = block_held_as(cls.capture, "global")
        cls.held_by_thread_local = block_held_as(cls.capture, "thread_local")

    def json_of(self, command, *args):
        result = run_heapscope(command, self.capture.core, *args, "--json")
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return json.loads(result.stdout)

    def test_retainers_name_the_global_and_the_thread_local(self):
        for block, name in ((self.held_by_global, GLOBAL_NAME), (self.held_by_thread_local, THREAD_LOCAL_NAME)):
            with self.subTest(name=name):
                paths = self.json_of("retainers", hex(block))["paths"]
                self.assertIn(name, paths[0]["root"]["label"])

    def test_roots_list_the_global(self):
        symbols = [root["symbol"] for root in self.json_of("roots")["roots"]]
        self.assertIn(GLOBAL_NAME, symbols)

    def test_every_command_that_names_roots_writes_json(self):
        for command in (("top",), ("refs", hex(self.held_by_global)), ("describe", hex(self.held_by_global)),
                        ("leaks",), ("threads",), ("report",)):
            with self.subTest(command=command[0]):
                self.json_of(*command)

    def test_text_keeps_the_bytes(self):
        result = subprocess.run([heapscope_path(), "retainers", self.capture.core, hex(self.held_by_global)],
                                capture_output=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertIn(b"g_\xff\xfe_holder", result.stdout)

    def test_lldb_and_gdb_print_it(self):
        from lldb_session import require_lldb_and_gdb, run_lldb
        from test_gdb import json_between_markers, marked, run_gdb
        require_lldb_and_gdb()
        command = f"heap retainers {hex(self.held_by_global)} --json"
        lldb = run_lldb([f"target create {self.capture.executable} --core {self.capture.core}", command])
        self.assertIn(GLOBAL_NAME, lldb.json_of(command)["paths"][0]["root"]["label"])
        gdb = run_gdb(marked("retainers", command), self.capture.executable, self.capture.core)
        self.assertIn(GLOBAL_NAME, json_between_markers(gdb, "retainers")["paths"][0]["root"]["label"])


if __name__ == "__main__":
    unittest.main()
