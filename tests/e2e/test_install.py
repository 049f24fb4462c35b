"""End-to-end checks of the installed heapscope: `cmake --install` into a scratch prefix (what scripts/setup
does for /usr/local), then every example line of the README run against the installed files — the CLI
from <prefix>/bin on PATH, the GDB frontend sourced from <prefix>/share/heapscope, the LLDB plugin loaded
from <prefix>/lib/heapscope — with the README's placeholders (core.1234, addresses, PID 4242, node->next) — and the Python module
from <prefix>/lib/python3.11/dist-packages in Debian's python3 and in gdb —
replaced by a real core of leak_shapes, a block it holds, a parked process and an expression of its own.
The installed binaries are stripped, their DWARF installed where gdb finds it by build-id. The Debian
packages (cpack -G DEB, scripts/package-deb) must hold the same files at the same places under /usr/local,
and heapscope-dbg the DWARF under /usr/lib/debug/.build-id.
"""

import os
import re
import shutil
import subprocess
import unittest

from heapscope_e2e import DEBUGGER_ONLY_VARIABLES, build_dir, debugger_environment, work_dir
from lldb_session import parked_fixture, require_lldb_and_gdb
from test_leaks import capture_leak_fixture, leak_fixture_path

README_PREFIX = "/usr/local"
TIMEOUT_SECONDS = 300
# The files the README's lines name, relative to the prefix, and the GDB frontend's library.
BINARIES = ("bin/heapscope", "lib/heapscope/libheapscope_lldb.so", "lib/heapscope/libheapscope_capi.so")
# The recorder, preloaded into the programs `heapscope record` starts; small, so not among BINARIES' size checks.
RECORDER = "lib/heapscope/libheapscope_sites.so"
# The Python module for Debian's python3 (the README's `python3` and gdb's), and its engine.
PYTHON_PACKAGE = "lib/python3.11/dist-packages/heapscope"
PYTHON_MODULE = PYTHON_PACKAGE + "/_heapscope.cpython-311-x86_64-linux-gnu.so"
DEBIAN_PYTHON = "/usr/bin/python3"
INSTALLED = BINARIES + ("share/heapscope/heapscope_gdb.py", RECORDER, PYTHON_PACKAGE + "/__init__.py", PYTHON_MODULE)
# Stripped of their DWARF, the binaries are a few MB each; with it, about 150.
STRIPPED_BINARY_MAX_BYTES = 30 * 1024 * 1024
# Where each installed binary is built: the installed one is that file without its debug information.
BUILT = {"bin/heapscope": "frontends/cli/heapscope", "lib/heapscope/libheapscope_lldb.so": "frontends/lldb/libheapscope_lldb.so",
         "lib/heapscope/libheapscope_capi.so": "frontends/capi/libheapscope_capi.so"}


def sanitizer_build():
    """A sanitizer build's code is instrumented, three times the size: only relative sizes hold there."""
    return bool(os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"))


def source_dir():
    return os.environ["HEAPSCOPE_SOURCE_DIR"]


def section_names(path):
    headers = subprocess.run(["readelf", "--section-headers", "--wide", path], capture_output=True, text=True,
                             check=True).stdout
    return set(re.findall(r"\]\s+(\.\S+)", headers))


def build_id_path(path):
    """Where debuggers look up `path`'s debug file under a debug directory: .build-id/xx/yyyy.debug."""
    notes = subprocess.run(["readelf", "--notes", path], capture_output=True, text=True, check=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    return os.path.join(".build-id", build_id[:2], build_id[2:] + ".debug")


def readme_examples():
    """The lines of the README's code blocks that are commands: `$ heapscope …`, `(gdb) …`, `(lldb) …`."""
    with open(os.path.join(source_dir(), "README.md"), encoding="utf-8") as f:
        text = f.read()
    lines = []
    for block in re.findall(r"^```\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            if line.startswith(("$ heapscope ", "$ python3 ", "(gdb) ", "(lldb) ")):
                lines.append(line.split("  #")[0].rstrip())
    return lines


class InstalledFromTheReadme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_lldb_and_gdb()
        cls.prefix = os.path.join(work_dir(), "install-prefix")
        shutil.rmtree(cls.prefix, ignore_errors=True)
        installed = subprocess.run(["cmake", "--install", build_dir(), "--prefix", cls.prefix],
                                   capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
        if installed.returncode != 0:
            raise AssertionError(f"cmake --install failed: {installed.stderr}")
        cls.examples = readme_examples()
        cls.capture = capture_leak_fixture("leak_shapes")
        cls.held = next(e.address for e in cls.capture.expected("reachable", "global") if not e.interior)

    def installed_path(self, readme_path):
        return self.prefix + readme_path[len(README_PREFIX):]

    def environment(self):
        env = debugger_environment()
        env["PATH"] = os.path.join(self.prefix, "bin") + os.pathsep + env.get("PATH", "")
        env.pop("HEAPSCOPE_CAPI", None)  # the GDB frontend must find its library by itself
        # What /usr/local/lib/python3.11/dist-packages is to Debian's python3, the scratch prefix's is here.
        env["PYTHONPATH"] = os.path.dirname(os.path.join(self.prefix, PYTHON_PACKAGE))
        for variable in ("HEAPSCOPE_GDB_SCRIPT", "HEAPSCOPE_LLDB_PLUGIN"):  # the module finds them by itself
            env.pop(variable, None)
        return env

    def substituted(self, line, pid=None):
        line = line.replace("core.1234", self.capture.core)
        for readme_address in ("0x5581e2a4c2b0", "0x7fa4fc000ff0"):  # blocks of the README's own cores
            line = line.replace(readme_address, hex(self.held))
        line = line.replace("node->next", "g_kept_list->next")
        if pid is not None:
            line = line.replace("attach 4242", f"attach {pid}")
        if line.startswith("python3 "):  # a fresh Debian's python3, not one found earlier on this PATH
            line = DEBIAN_PYTHON + line[len("python3"):]
        return line.replace(README_PREFIX + "/", self.prefix + "/")

    def test_the_readme_has_examples_of_every_frontend(self):
        self.assertTrue(any(line.startswith("$ heapscope ") for line in self.examples), self.examples)
        self.assertTrue(any(line.startswith("(gdb) source ") for line in self.examples), self.examples)
        self.assertTrue(any(line.startswith("(lldb) plugin load ") for line in self.examples), self.examples)
        self.assertTrue(any(line.startswith("$ python3 -c 'import heapscope") for line in self.examples), self.examples)

    def test_every_path_the_readme_names_is_installed(self):
        with open(os.path.join(source_dir(), "README.md"), encoding="utf-8") as f:
            paths = set(re.findall(r"/usr/local/[\w./-]+\w", f.read()))
        self.assertTrue(paths)
        for path in paths:
            self.assertTrue(os.path.exists(self.installed_path(path)), f"{path} is not installed")
        for relative in INSTALLED:
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, relative)), relative)

    def test_the_binaries_are_stripped_and_gdb_finds_their_dwarf_by_build_id(self):
        # Under a prefix other than /usr and /usr/local the debug files go to PREFIX/lib/debug (under those
        # two, to /usr/lib/debug: the Debian package's test checks that place).
        debug_dir = os.path.join(self.prefix, "lib", "debug")
        for relative in BINARIES:
            installed = os.path.join(self.prefix, relative)
            with self.subTest(binary=relative):
                self.assertNotIn(".debug_info", section_names(installed))
                # Most of a built binary is its DWARF.
                self.assertLess(os.path.getsize(installed), os.path.getsize(os.path.join(build_dir(), BUILT[relative])) / 3)
                if not sanitizer_build():
                    self.assertLess(os.path.getsize(installed), STRIPPED_BINARY_MAX_BYTES)
                self.assertIn(".symtab", section_names(installed), "symbols stay, for backtraces and perf")
                debug_file = os.path.join(debug_dir, build_id_path(installed))
                self.assertTrue(os.path.isfile(debug_file), f"no {debug_file}")
                self.assertIn(".debug_info", section_names(debug_file))
        # gdb only reads the files here, loading none of heapscope's code: it runs without a sanitizer
        # build's preload (with the ASan runtime preloaded gdb 13 hangs at startup, as test_gdb says).
        plain = {k: v for k, v in os.environ.items() if k not in DEBUGGER_ONLY_VARIABLES}
        found = subprocess.run(["gdb", "-batch", "-nx", "-iex", f"set debug-file-directory {debug_dir}",
                                "-ex", "info line main", os.path.join(self.prefix, "bin", "heapscope")],
                               capture_output=True, text=True, env=plain, timeout=TIMEOUT_SECONDS)
        self.assertRegex(found.stdout, r'Line \d+ of "[^"]*frontends/cli/main\.cpp"', found.stderr[-2000:])

    def test_the_cli_examples_run_from_path(self):
        cli = [line[2:] for line in self.examples if line.startswith(("$ heapscope ", "$ python3 "))]
        self.assertGreater(len(cli), 3)
        with parked_fixture(leak_fixture_path("leak_shapes"), os.path.join(work_dir(), "install-attach.ledger"),
                            "leak_shapes") as process:
            for line in cli:
                command = self.substituted(line, process.pid)
                with self.subTest(command=command):
                    result = subprocess.run(command, shell=True, capture_output=True, text=True,
                                            env=self.environment(), timeout=TIMEOUT_SECONDS)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertTrue(result.stdout.strip(), command)

    def test_record_preloads_the_installed_recorder(self):
        installed = os.path.join(self.prefix, "bin", "heapscope")
        shown = subprocess.run([installed, "record", "--", "env"], capture_output=True, text=True,
                               env=self.environment(), timeout=TIMEOUT_SECONDS)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        # Last of the preloads (a sanitizer build's environment has the ASan runtime first).
        self.assertRegex(shown.stdout, rf"(?m)^LD_PRELOAD=(.*:)?{re.escape(os.path.join(self.prefix, RECORDER))}$")
        self.assertNotIn(".debug_info", section_names(os.path.join(self.prefix, RECORDER)))

    def test_the_gdb_examples_with_the_installed_script(self):
        if os.environ.get("HEAPSCOPE_DEBUGGER_PRELOAD"):  # as test_gdb.run_gdb: gdb 13 hangs with ASan preloaded
            self.skipTest("gdb cannot start with the ASan runtime preloaded (sanitizer build)")
        lines = [self.substituted(line[len("(gdb) "):]) for line in self.examples if line.startswith("(gdb) ")]
        arguments = ["gdb", "-batch", "-nx"]
        for variable in DEBUGGER_ONLY_VARIABLES:
            arguments += ["-ex", f"unset environment {variable}"]
        for line in lines:
            arguments += ["-ex", line]
        result = subprocess.run(arguments + [self.capture.executable, self.capture.core], capture_output=True,
                                text=True, env=self.environment(), timeout=TIMEOUT_SECONDS)
        self.assertIn("Path 1", result.stdout, result.stderr[-2000:])
        self.assertNotIn("Traceback", result.stdout + result.stderr)
        leaked = len([e for e in self.capture.expectations if e.verdict == "leaked"])
        self.assertIn(f"\n{leaked}\n", "\n" + result.stdout, "the Python line's count of leaked blocks")

    def test_the_lldb_examples_with_the_installed_plugin(self):
        lines = [self.substituted(line[len("(lldb) "):]) for line in self.examples if line.startswith("(lldb) ")]
        load = [line for line in lines if line.startswith("plugin load ")]
        rest = [line for line in lines if not line.startswith("plugin load ")]
        arguments = ["lldb-16", "--batch", "--no-lldbinit"]
        for line in load + [f"target create {self.capture.executable} --core {self.capture.core}"] + rest:
            arguments += ["-o", line]
        result = subprocess.run(arguments, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                env=self.environment(), timeout=TIMEOUT_SECONDS)
        self.assertIn("Leaked:", result.stdout, result.stderr[-2000:])
        self.assertNotIn("error:", result.stderr)


    def test_the_python_module_in_lldb_finds_the_installed_plugin(self):
        # No `plugin load`: heapscope.current() loads the plugin from where cmake --install put it.
        arguments = ["lldb-16", "--batch", "--no-lldbinit", "-o",
                     f"target create {self.capture.executable} --core {self.capture.core}",
                     "-o", "script import heapscope",
                     "-o", "script print('PY-LEAKED', len(heapscope.current().blocks(state='leaked')))",
                     "-o", "script print('PY-TOTALS', heapscope.current().run('leaks')['totals']['blocks'])"]
        # LLDB's Python takes its prefix from the first python3 on PATH: Debian's, on a fresh machine (a
        # pyenv on PATH, as this test may run under, would give it that interpreter's library, without numpy).
        env = self.environment()
        env["PATH"] = os.pathsep.join([os.path.join(self.prefix, "bin"), os.path.dirname(DEBIAN_PYTHON), env["PATH"]])
        result = subprocess.run(arguments, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                env=env, timeout=TIMEOUT_SECONDS)
        leaked = len([e for e in self.capture.expectations if e.verdict == "leaked"])
        self.assertIn(f"PY-LEAKED {leaked}", result.stdout, result.stderr[-2000:])
        self.assertIn(f"PY-TOTALS {leaked}", result.stdout, result.stderr[-2000:])


class DebianPackage(unittest.TestCase):
    def test_the_packages_have_the_installed_layout_and_the_debug_files_apart(self):
        out = os.path.join(work_dir(), "package")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        packed = subprocess.run(["cpack", "-G", "DEB", "-B", out, "--config",
                                 os.path.join(build_dir(), "CPackConfig.cmake")],
                                capture_output=True, text=True, cwd=build_dir(), timeout=TIMEOUT_SECONDS)
        self.assertEqual(packed.returncode, 0, packed.stdout[-2000:] + packed.stderr[-2000:])
        packages = {name.split("_")[0]: os.path.join(out, name) for name in os.listdir(out) if name.endswith(".deb")}
        self.assertEqual(set(packages), {"heapscope", "heapscope-dbg"})
        contents = self.contents(packages["heapscope"])
        for relative in INSTALLED:
            self.assertRegex(contents, rf"\./usr/local/{re.escape(relative)}\n")
        self.assertNotIn("/usr/lib/debug", contents)
        self.assertLess(os.path.getsize(packages["heapscope"]), os.path.getsize(packages["heapscope-dbg"]) / 2)
        if not sanitizer_build():
            self.assertLess(os.path.getsize(packages["heapscope"]), STRIPPED_BINARY_MAX_BYTES)
        fields = self.fields(packages["heapscope"], "Package", "Depends")
        self.assertIn("Package: heapscope", fields)
        self.assertIn("libdw1", fields)
        self.assertIn("libdebuginfod1", fields)  # loaded at run time, so named by hand
        self.assertIn("python3-numpy", fields)  # imported by the Python module
        for decompressor in ("libzstd1", "liblz4-1", "liblzma5", "zlib1g"):  # compressed cores
            self.assertIn(decompressor, fields)
        # The debug files where gdb and lldb look by default, named by the built binaries' build-ids (which
        # stripping keeps).
        debug_contents = self.contents(packages["heapscope-dbg"])
        for target in ("frontends/cli/heapscope", "frontends/lldb/libheapscope_lldb.so",
                       "frontends/capi/libheapscope_capi.so", "frontends/python/heapscope/" + os.path.basename(PYTHON_MODULE)):
            self.assertIn("./usr/lib/debug/" + build_id_path(os.path.join(build_dir(), target)), debug_contents)
        self.assertIn("Depends: heapscope (= ", self.fields(packages["heapscope-dbg"], "Package", "Depends"))

    @staticmethod
    def contents(package):
        return subprocess.run(["dpkg-deb", "--contents", package], capture_output=True, text=True, check=True).stdout

    @staticmethod
    def fields(package, *names):
        return subprocess.run(["dpkg-deb", "--field", package, *names], capture_output=True, text=True,
                              check=True).stdout


if __name__ == "__main__":
    unittest.main()
