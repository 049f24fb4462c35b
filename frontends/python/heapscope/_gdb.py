"""heapscope.current() inside GDB: the GDB frontend (frontends/gdb/heapscope_gdb.py) is loaded as a module,
which also gives GDB the `heap` command, and its code says what the target is — core file and program,
or the stopped process with every thread's registers as GDB shows them — and when it changes.
"""

import importlib.util
import os
import shlex
import sys

import gdb  # pylint: disable=import-error

from . import Error, _heapscope
from ._debugger import DebuggerSession, command_line, frontend_candidates, interrupted

_current = None


def _frontend():
    module = sys.modules.get("heapscope_gdb")
    if module is not None:
        return module
    tried = []
    for path in frontend_candidates("HEAPSCOPE_GDB_SCRIPT", ("capi", "heapscope_gdb.py"), "GDB_SCRIPT"):
        path = os.path.normpath(path)
        tried.append(path)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("heapscope_gdb", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if module._lib is None:  # pylint: disable=protected-access
                raise Error(module._load_error)  # pylint: disable=protected-access
            sys.modules["heapscope_gdb"] = module  # loaded once: its `heap` command and its sessions stay
            module.connect_invalidating_events(_invalidate)
            return module
    raise Error(f"heapscope's GDB frontend was not found (looked in: {', '.join(tried)}); set HEAPSCOPE_GDB_SCRIPT "
                f"to heapscope_gdb.py")


def _invalidate(*_event):
    global _current  # pylint: disable=global-statement
    if _current is not None:
        _current.close()
    _current = None


def _execute(words):
    try:
        return gdb.execute("heap " + command_line(words), to_string=True)
    except gdb.error as e:
        message = str(e)
        if interrupted(message):
            raise KeyboardInterrupt(message) from None
        raise Error(message[len("heap "):] if message.startswith("heap ") else message) from None


def _opener(frontend, kind, key, inferior):
    options = shlex.split(key[3])

    def open_engine():
        if kind == "core":
            core, program = key[1], key[2]
            return _heapscope.open_core(core, (["--exe", program] if program else []) + options, False)
        threads, vectors = frontend._live_threads(inferior)  # pylint: disable=protected-access
        described = [(t.tid, list(t.registers), v.lanes_read, [list(v.lanes[r]) for r in range(16)])
                     for t, v in zip(threads, vectors)]
        return _heapscope.open_stopped(inferior.pid, described, options)

    return open_engine


def current_session(progress=None):
    """The session of GDB's selected inferior (core or stopped live process)."""
    del progress
    global _current  # pylint: disable=global-statement
    frontend = _frontend()
    if tuple(frontend.REGISTER_NAMES) != tuple(_heapscope.register_names()):
        raise Error("the GDB frontend's library and this module are different heapscope builds")
    inferior = gdb.selected_inferior()
    try:
        kind, key = frontend.target_key(inferior)
    except gdb.GdbError as e:
        raise Error(str(e)) from None
    if _current is not None and _current.key == key and not _current.closed:
        return _current
    _invalidate()
    _current = DebuggerSession(_execute, _opener(frontend, kind, key, inferior), key, lambda: _key(frontend))
    return _current


def _key(frontend):
    try:
        return frontend.target_key(gdb.selected_inferior())[1]
    except gdb.GdbError as e:
        raise Error(str(e)) from None
