"""End-to-end checks that heapscope names a process by its command line and the file it runs, not by the
kernel's 16-byte name (comm, NT_PRPSINFO's pr_fname): a program started through a symbolic link whose name
is longer than that, with arguments, as redis-server (a link to redis-check-rdb) is. Its core (gdb's gcore
writes the command line's first 80 bytes in NT_PRPSINFO) and the live process (heapscope attach, which
reads /proc/PID/cmdline) both show the whole command line and the executable's real path in `summary`; so
does the LLDB plugin attached to the process.
"""

import os
import subprocess
import unittest

from heapscope_e2e import heapscope_json, run_heapscope, work_dir
from lldb_session import require_lldb_and_gdb, run_lldb
from test_attach import ParkedProgram, take_core

# Parks once it has allocated a little, so that its heap can be walked; its arguments are not read.
PARKED_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>
static void* kept;
int main(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  kept = malloc(64);
  printf("READY\n");
  fflush(stdout);
  for (;;) pause();
}
"""

LINK_NAME = "identity-server-with-a-long-name"  # comm keeps its first 15 characters
ARGUMENTS = ("127.0.0.1:6379", "--save", "--port=7000")


class ProcessIdentity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        directory = work_dir()
        cls.executable = os.path.join(directory, "identity-target")
        source = cls.executable + ".c"
        with open(source, "w", encoding="ascii") as f:
            f.write(PARKED_PROGRAM)
        subprocess.run(["cc", "-O1", "-o", cls.executable, source], check=True, timeout=120)
        link = os.path.join(directory, LINK_NAME)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.basename(cls.executable), link)
        cls.command_line = " ".join(("./" + LINK_NAME,) + ARGUMENTS)
        cls.core = os.path.join(directory, "identity.core")
        with ParkedProgram("./" + LINK_NAME, *ARGUMENTS, cwd=directory) as program:
            cls.pid = program.pid
            cls.live = heapscope_json("attach", program.pid, "summary")
            cls.live_text = run_heapscope("attach", program.pid, "summary").stdout
            cls.lldb = cls.lldb_summary(program.pid)
            take_core(program.pid, cls.core)
        cls.from_core = heapscope_json("summary", cls.core)
        cls.core_text = run_heapscope("summary", cls.core).stdout

    @staticmethod
    def lldb_summary(pid):
        """`heap summary --json` in LLDB attached to the process; None without LLDB or the plugin."""
        try:
            require_lldb_and_gdb()
        except unittest.SkipTest:
            return None
        return run_lldb(["heap summary --json", "process detach"], lldb_args=["-p", str(pid)])

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.core):
            os.remove(cls.core)

    def assert_names_the_process(self, description):
        self.assertIn(self.command_line, description)
        self.assertIn(f"executable {os.path.realpath(self.executable)}", description)

    def test_a_core_names_the_command_line_and_the_executable(self):
        description = self.from_core["target"]["description"]
        self.assertTrue(description.startswith(f"core file {self.core} (pid {self.pid}, "), description)
        self.assert_names_the_process(description)
        self.assertIn(f"Target:   {description}\n", self.core_text)

    def test_a_live_process_names_the_command_line_and_the_executable(self):
        description = self.live["target"]["description"]
        self.assertTrue(description.startswith(f"live process {self.pid} ("), description)
        self.assert_names_the_process(description)
        self.assertIn(f"Target:   {description}\n", self.live_text)

    def test_lldb_names_the_command_line_and_the_executable(self):
        if self.lldb is None:
            self.skipTest("lldb-16 or the plugin is missing")
        description = self.lldb.json_of("heap summary --json")["target"]["description"]
        self.assertTrue(description.startswith(f"process {self.pid} in LLDB ("), description)
        self.assertIn(self.command_line, description)

    def test_the_json_target_has_the_command_line_and_the_real_file(self):
        for summary in (self.live, self.from_core):
            self.assertEqual(summary["target"]["command_line"], self.command_line)
            self.assertEqual(summary["target"]["executable"], os.path.realpath(self.executable))


if __name__ == "__main__":
    unittest.main()
