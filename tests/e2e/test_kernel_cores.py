"""Cores the kernel writes, as most crash cores are, against gdb's of the same stop: allocator_fixture under
glibc's malloc, jemalloc and tcmalloc (and leak_shapes under glibc) is cored by gcore once it is READY, then
killed with SIGABRT, and the kernel writes its core (RLIMIT_CORE raised for it). The kernel lays a core out
otherwise — notes first, file-backed read-only pages left out (coredump_filter), none of gdb's notes — yet
both give the same `leaks`.

A container's core: the fixture run chrooted into a directory laid out as an unpacked image (the program at
/app, libc at /opt/box-libs, the dynamic linker at its usual path), so that the kernel's core names files by
paths that exist only inside it. Without --sysroot its program and libc have no file; with --sysroot DIR
every module's file is found under DIR — `summary` says so for each, in JSON and in text — and `leaks` is
gdb's of the same process cored from outside (which names the files by their paths on this machine).

Where the kernel's core pattern pipes cores to a program (systemd-coredump, apport) or names a directory of
its own, there is no file to find: the tests are skipped, saying so."""

import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import unittest

from heapscope_e2e import fixture_path, heapscope_json, run_heapscope, work_dir
from lldb_session import GCORE_TIMEOUT_SECONDS, READY_TIMEOUT_SECONDS
from test_jemalloc import SHARED as JEMALLOC
from test_tcmalloc import TCMALLOC

CORE_PATTERN = "/proc/sys/kernel/core_pattern"


def kernel_core_pattern():
    """The core pattern, or SkipTest when the kernel does not write a core file into the process's directory."""
    with open(CORE_PATTERN) as f:
        pattern = f.read().strip()
    if pattern.startswith("|"):
        raise unittest.SkipTest(f"the kernel's core pattern pipes cores to {pattern[1:].split()[0]}: no kernel-written "
                                f"core file to read here (gcore's are tested everywhere else)")
    if "/" in pattern:
        raise unittest.SkipTest(f"the kernel's core pattern {pattern!r} writes cores to a directory of its own")
    return pattern


def without_warnings(report):
    """The report less its warnings, which say how each core was written (gdb's build-id notes, the kernel's
    left-out pages)."""
    return {key: value for key, value in report.items() if key != "warnings"}


def read_line(process, name):
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=READY_TIMEOUT_SECONDS):
            raise AssertionError(f"{name} printed nothing within {READY_TIMEOUT_SECONDS} s")
    return process.stdout.readline().decode().strip()


def unlimited_cores():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def cores_of_one_stop(executable, env, directory, chroot=False):
    """Runs `executable` in `directory` until READY; gdb's core of it, then the kernel's at SIGABRT. Returns
    (gcore path, kernel core path). chroot: `directory` is the process's root, `executable` a path in it."""
    gcore = os.path.join(directory, "gdb.core")

    def enter():
        unlimited_cores()
        if chroot:
            os.chroot(directory)
            os.chdir("/")

    ledger = "/ledger" if chroot else os.path.join(directory, "ledger")
    process = subprocess.Popen([executable], cwd=directory, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, preexec_fn=enter,
                               env=dict({} if chroot else os.environ, HEAPSCOPE_LEDGER=ledger, **env))
    try:
        line = read_line(process, executable)
        if line != "READY":
            raise AssertionError(f"{executable} printed {line!r} instead of READY")
        subprocess.run(["gdb", "-batch", "-nx", "-p", str(process.pid), "-ex", f"gcore {gcore}"],
                       capture_output=True, timeout=GCORE_TIMEOUT_SECONDS)
        if not os.path.isfile(gcore):
            raise AssertionError("gdb wrote no core")
        os.kill(process.pid, signal.SIGABRT)
        process.wait(timeout=GCORE_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    written = [name for name in os.listdir(directory) if name.startswith(kernel_core_pattern().split("%")[0])
               and name != "gdb.core" and name != "ledger"]
    if not written:
        raise AssertionError(f"the kernel wrote no core into {directory} (core pattern "
                             f"{kernel_core_pattern()!r}; RLIMIT_CORE was unlimited)")
    return gcore, os.path.join(directory, written[0])


class KernelCores(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        kernel_core_pattern()
        cls.scratch = tempfile.mkdtemp(prefix="kernel-cores-", dir=work_dir())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def check_same_leaks(self, name, fixture, env):
        directory = os.path.join(self.scratch, name)
        os.makedirs(directory)
        gcore, kernel = cores_of_one_stop(fixture_path(fixture), env, directory)
        by_gdb = heapscope_json("leaks", gcore)
        by_kernel = heapscope_json("leaks", kernel)
        self.assertGreater(by_gdb["totals"]["blocks"], 0)
        self.assertEqual(without_warnings(by_kernel), without_warnings(by_gdb))
        # The kernel's core is its own: it leaves out file-backed pages, which heapscope reads from the files.
        self.assertLess(os.path.getsize(kernel), os.path.getsize(gcore) * 4)
        summary = heapscope_json("summary", kernel)
        self.assertTrue(any(m["path"].endswith("libc.so.6") and m["file"]["origin"] == "path"
                            for m in summary["modules"]), summary["modules"])
        shutil.rmtree(directory, ignore_errors=True)

    def test_glibc(self):
        self.check_same_leaks("glibc", "allocator_fixture", {})

    def test_glibc_leak_shapes(self):
        self.check_same_leaks("leak_shapes", "leaks/leak_shapes", {})

    def test_jemalloc(self):
        JEMALLOC.require()
        self.check_same_leaks("jemalloc", JEMALLOC.fixture, JEMALLOC.environment())

    def test_tcmalloc(self):
        TCMALLOC.require()
        self.check_same_leaks("tcmalloc", TCMALLOC.fixture, TCMALLOC.environment())


class ContainerCore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        kernel_core_pattern()
        cls.root = tempfile.mkdtemp(prefix="container-root-", dir=work_dir())
        for source, inside in ((fixture_path("allocator_fixture"), "app/allocator_fixture"),
                               ("/lib/x86_64-linux-gnu/libc.so.6", "opt/box-libs/libc.so.6"),
                               ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2")):
            os.makedirs(os.path.join(cls.root, os.path.dirname(inside)), exist_ok=True)
            shutil.copy(source, os.path.join(cls.root, inside))
        cls.gcore, cls.core = cores_of_one_stop("/app/allocator_fixture", {"LD_LIBRARY_PATH": "/opt/box-libs"},
                                                cls.root, chroot=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def modules(self, *options):
        return {m["path"]: m for m in heapscope_json("summary", self.core, *options)["modules"] if m["path"] != "[vdso]"}

    def test_the_core_names_the_containers_paths(self):
        modules = self.modules()
        self.assertEqual(set(modules), {"/app/allocator_fixture", "/opt/box-libs/libc.so.6",
                                        "/lib64/ld-linux-x86-64.so.2"})
        for path in ("/app/allocator_fixture", "/opt/box-libs/libc.so.6"):
            self.assertEqual(modules[path]["file"]["origin"], "none")

    def test_every_module_is_found_under_the_sysroot(self):
        modules = self.modules("--sysroot", os.path.relpath(self.root) + "/")
        for path, module in modules.items():
            with self.subTest(module=path):
                self.assertEqual(module["file"], {"path": self.root + path, "origin": "sysroot"})
        text = run_heapscope("summary", self.core, "--sysroot", self.root)
        self.assertIn(f"file (sysroot): {self.root}/app/allocator_fixture", text.stdout)
        self.assertIn(f"file (sysroot): {self.root}/opt/box-libs/libc.so.6", text.stdout)

    def test_leaks_under_the_sysroot_are_gdbs_from_outside(self):
        by_gdb = heapscope_json("leaks", self.gcore)
        self.assertGreater(by_gdb["totals"]["blocks"], 0)
        self.assertEqual(without_warnings(heapscope_json("leaks", self.core, "--sysroot", self.root)),
                         without_warnings(by_gdb))


if __name__ == "__main__":
    unittest.main()
