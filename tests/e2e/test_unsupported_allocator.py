"""A process whose malloc is an allocator heapscope does not walk must never read as "no leaks": every
command, in the CLI, LLDB and GDB, says which module serves malloc and that heapscope does not walk that
allocator (runtime/allocator.h). The allocator is the fixtures' libbump_allocator.so
(tests/fixtures/bump_allocator.c), preloaded. The same fixture without a preload is walked as usual, so the
message comes from the process, not from the fixture. tcmalloc (gperftools) and jemalloc are walked
(test_tcmalloc.py, test_jemalloc.py); here they only must not get the message.
"""

import os
import re
import unittest

from heapscope_e2e import capture_program, fixture_path, run_heapscope
from lldb_session import require_lldb_and_gdb, run_lldb
from test_gdb import between_markers, marked, run_gdb

LIBRARIES = {
    "bump": fixture_path("libbump_allocator.so"),
}
WALKED_LIBRARIES = {
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
}

# Every command of the table, with the arguments it needs to reach the heap.
COMMANDS = [["blocks"], ["leaks"], ["retainers", "0x1000"], ["refs", "0x1000"], ["describe", "0x1000"],
            ["histogram"], ["top"], ["roots"], ["threads"], ["coroutines"], ["chains"], ["finalizers"],
            ["verify"], ["fragmentation"], ["snapshot", "save", "one"], ["evolution"]]


def preloaded_capture(allocator):
    executable = fixture_path("walk_fixture_c")
    library = {**LIBRARIES, **WALKED_LIBRARIES}[allocator]
    core, _ = capture_program("walk_fixture_c-" + allocator, executable, env={"LD_PRELOAD": library})
    return executable, core


class UnsupportedAllocatorTest(unittest.TestCase):
    def expected(self, allocator):
        """The message, naming the library file the process mapped (a versioned name, libfoo.so.4.5.10, as
        the process maps it)."""
        name = re.escape(os.path.basename(LIBRARIES[allocator]))
        return re.compile(rf"unsupported allocator: {name}[0-9.]* serves malloc")

    def test_every_cli_command_names_the_allocator(self):
        for allocator in LIBRARIES:
            if not os.path.exists(LIBRARIES[allocator]):
                self.skipTest(f"{LIBRARIES[allocator]} is not installed (scripts/install-deps)")
            _, core = preloaded_capture(allocator)
            for command in COMMANDS:
                with self.subTest(allocator=allocator, command=command[0]):
                    result = run_heapscope(command[0], core, *command[1:])
                    self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
                    self.assertRegex(result.stderr, self.expected(allocator))
                    self.assertNotIn("Leaked: 0", result.stdout)
            with self.subTest(allocator=allocator, command="summary"):
                result = run_heapscope("summary", core)
                self.assertRegex(result.stdout, self.expected(allocator))
            with self.subTest(allocator=allocator, command="report"):
                result = run_heapscope("report", core)
                self.assertRegex(result.stdout + result.stderr, self.expected(allocator))

    def test_a_walked_allocator_gets_no_message(self):
        for allocator, library in WALKED_LIBRARIES.items():
            if not os.path.exists(library):
                self.skipTest(f"{library} is not installed (scripts/install-deps)")
            _, core = preloaded_capture(allocator)
            with self.subTest(allocator=allocator):
                result = run_heapscope("leaks", core)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertNotIn("unsupported allocator", result.stdout + result.stderr)
                summary = run_heapscope("summary", core)
                self.assertIn(f"Heap:     {allocator}", summary.stdout)

    def test_the_same_program_without_a_preload_is_walked(self):
        executable = fixture_path("walk_fixture_c")
        core, _ = capture_program("walk_fixture_c", executable)
        result = run_heapscope("leaks", core)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("unsupported allocator", result.stdout + result.stderr)

    def test_lldb_and_gdb_say_the_same(self):
        require_lldb_and_gdb()
        executable, core = preloaded_capture("bump")
        lldb = run_lldb([f"target create {executable} --core {core}", "heap leaks"])
        self.assertRegex(lldb.output_of("heap leaks") + lldb.stderr, self.expected("bump"))
        gdb = run_gdb(marked("leaks", "heap leaks"), executable, core)
        self.assertRegex(between_markers(gdb, "leaks") + gdb.stderr, self.expected("bump"))


if __name__ == "__main__":
    unittest.main()
