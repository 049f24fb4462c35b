"""End-to-end checks of `heapscope attach PID <command>`: on a running, parked fixture it reports what the
CLI reports on a core of the same process taken right after (with scripts/capture-core's gdb gcore), and
the process runs on afterwards exactly as before: not stopped, not traced. Also its errors, and an
interrupt (SIGINT) while the process is stopped.
"""

import os
import select
import shutil
import signal
import subprocess
import time
import unittest

from heapscope_e2e import heapscope_json, heapscope_path, run_heapscope, work_dir
from test_leaks import leak_fixture_path

READY_TIMEOUT_SECONDS = 30
GDB_TIMEOUT_SECONDS = 120

# A program with a heap big enough (two million blocks) that an analysis takes a moment, to interrupt.
BIG_HEAP_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>
struct node { struct node* next; long payload[3]; };
static struct node* head;
int main(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  for (long i = 0; i < 2000000; ++i) {
    struct node* n = malloc(sizeof *n);
    if (!n) return 1;
    n->next = head;
    head = n;
  }
  printf("READY\n");
  fflush(stdout);
  for (;;) pause();
}
"""


class ParkedProgram:
    """A program started here and left running once it has printed READY; killed on exit."""

    def __init__(self, *command, cwd=None):
        self.command = command
        self.cwd = cwd
        self.process = None

    def __enter__(self):
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=self.cwd)
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.process.stdout], [], [], remaining)[0]:
                self.__exit__()
                raise AssertionError(f"{self.command[0]} did not print READY within {READY_TIMEOUT_SECONDS} s")
            line = self.process.stdout.readline()
            if not line:
                self.__exit__()
                raise AssertionError(f"{self.command[0]} exited before printing READY")
            if line.strip() == b"READY":
                return self

    def __exit__(self, *_):
        if self.process and self.process.poll() is None:
            self.process.kill()
        if self.process:
            self.process.wait()
            self.process.stdout.close()

    @property
    def pid(self):
        return self.process.pid


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return fields


def settled_status(pid, wanted_state="S", timeout=2.0):
    """/proc/PID/status once the state is `wanted_state` (a thread leaves a tracing stop in a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        status = proc_status(pid)
        if status["State"].startswith(wanted_state) or time.monotonic() > deadline:
            return status
        time.sleep(0.01)


def take_core(pid, core):
    """The core of a running process, written the way scripts/capture-core writes it."""
    result = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-ex", f"gcore {core}"],
                            capture_output=True, text=True, timeout=GDB_TIMEOUT_SECONDS)
    if result.returncode != 0 or not os.path.isfile(core):
        raise AssertionError(f"gdb could not write the core of {pid}:\n{result.stdout}\n{result.stderr}")


class AttachMatchesCore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fixture = ParkedProgram(leak_fixture_path("leak_shapes")).__enter__()
        pid = cls.fixture.pid
        cls.live = {command: heapscope_json("attach", pid, command) for command in ("summary", "leaks")}
        cls.status_after_attach = settled_status(pid)
        cls.core = os.path.join(work_dir(), "attach-leak_shapes.core")
        take_core(pid, cls.core)
        cls.from_core = {command: heapscope_json(command, cls.core) for command in ("summary", "leaks")}

    @classmethod
    def tearDownClass(cls):
        cls.fixture.__exit__()
        if os.path.exists(cls.core):
            os.remove(cls.core)

    def test_leaks_match_the_core(self):
        self.assertGreater(self.live["leaks"]["totals"]["blocks"], 0)
        self.assertEqual(self.live["leaks"], self.from_core["leaks"])

    def test_summary_matches_the_core(self):
        live, core = self.live["summary"], self.from_core["summary"]
        self.assertEqual(live["heap"], core["heap"])
        self.assertEqual(live["modules"], core["modules"])
        self.assertEqual([t["tid"] for t in live["threads"]], [t["tid"] for t in core["threads"]])
        self.assertEqual(live["target"]["pid"], self.fixture.pid)
        self.assertEqual(live["target"]["executable"], core["target"]["executable"])
        self.assertTrue(live["target"]["description"].startswith(f"live process {self.fixture.pid} "))
        self.assertEqual(live["warnings"], [])

    def test_the_process_runs_on_untraced(self):
        status = self.status_after_attach
        self.assertEqual(status["TracerPid"], "0")
        self.assertTrue(status["State"].startswith("S"), status["State"])  # parked in pause(), not stopped
        self.assertIsNone(self.fixture.process.poll())


class AttachErrors(unittest.TestCase):
    def test_no_such_process(self):
        child = subprocess.Popen(["true"])
        child.wait()  # its pid is free now
        result = run_heapscope("attach", child.pid, "summary")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr.strip(), f"heapscope: there is no process with pid {child.pid}")

    def test_a_process_a_debugger_traces(self):
        with ParkedProgram(leak_fixture_path("leak_shapes")) as fixture:
            inside_gdb = subprocess.run(
                ["gdb", "-batch", "-nx", "-p", str(fixture.pid),
                 "-ex", f"shell {heapscope_path()} attach {fixture.pid} summary; echo exit status $?"],
                capture_output=True, text=True, timeout=GDB_TIMEOUT_SECONDS)
            output = inside_gdb.stdout + inside_gdb.stderr
            self.assertIn(f"process {fixture.pid} is already traced by process ", output)
            self.assertIn("(gdb)", output)
            self.assertIn("exit status 1", output)
            status = settled_status(fixture.pid)
            self.assertEqual(status["TracerPid"], "0")

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to drop to nobody")
    def test_permission_denied_says_why(self):
        with ParkedProgram(leak_fixture_path("leak_shapes")) as fixture:
            result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", heapscope_path(),
                                     "attach", str(fixture.pid), "summary"],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 1)
            self.assertIn(f"heapscope: permission denied attaching to process {fixture.pid} (leak_shapes): ",
                          result.stderr)
            self.assertRegex(result.stderr, "run heapscope as root|ptrace_scope")

    def test_a_command_is_required(self):
        result = run_heapscope("attach", os.getpid())
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("subcommand", result.stderr.lower())


class AttachInterrupted(unittest.TestCase):
    def test_sigint_detaches_and_exits(self):
        program = os.path.join(work_dir(), "attach-big-heap")
        source = program + ".c"
        with open(source, "w", encoding="ascii") as f:
            f.write(BIG_HEAP_PROGRAM)
        subprocess.run(["cc", "-O1", "-o", program, source], check=True, timeout=120)
        with ParkedProgram(program) as target:
            attach = subprocess.Popen([heapscope_path(), "attach", str(target.pid), "leaks"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Interrupt while heapscope is the tracer: the process is stopped and being analysed.
            deadline = time.monotonic() + 30
            while proc_status(target.pid)["TracerPid"] != str(attach.pid):
                if attach.poll() is not None or time.monotonic() > deadline:
                    attach.kill()
                    self.fail("heapscope finished or failed before it could be interrupted: "
                              f"{attach.communicate()}")
                time.sleep(0.002)
            attach.send_signal(signal.SIGINT)
            stdout, stderr = attach.communicate(timeout=60)
            self.assertEqual(attach.returncode, 128 + signal.SIGINT, stderr)
            self.assertEqual(stdout, "")
            self.assertIn(f"process {target.pid} was detached and runs on", stderr)
            status = settled_status(target.pid)
            self.assertEqual(status["TracerPid"], "0")
            self.assertTrue(status["State"].startswith("S"), status["State"])
            # And it can be attached to again.
            self.assertEqual(heapscope_json("attach", target.pid, "leaks")["totals"]["blocks"], 0)


if __name__ == "__main__":
    unittest.main()
