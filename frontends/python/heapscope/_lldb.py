"""heapscope.current() inside LLDB: commands through the LLDB plugin's `heap` command (loaded here when it
is not yet), so on the session the plugin keeps for the process's current stop; columns from a session of
this module over the same target — the core file LLDB has mapped, or the stopped process's memory with
the registers LLDB shows for each thread.
"""

import os

import lldb  # pylint: disable=import-error

from . import Error, _heapscope
from ._debugger import DebuggerSession, command_line, frontend_candidates, interrupted

_current = None
_STOPPED = (lldb.eStateStopped, lldb.eStateCrashed, lldb.eStateSuspended)
_NO_PROCESS = "no process; load a core (target create --core) or run/attach first"


def _handle(debugger, line):
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(line, result)
    return result


def _ensure_plugin(debugger):
    if debugger.GetCommandInterpreter().CommandExists("heap"):
        return
    tried = []
    for path in frontend_candidates("HEAPSCOPE_LLDB_PLUGIN", ("lldb", "libheapscope_lldb.so"), "LLDB_PLUGIN"):
        path = os.path.normpath(path)
        tried.append(path)
        if os.path.isfile(path):
            result = _handle(debugger, f"plugin load {path}")
            if not result.Succeeded():
                raise Error(f"cannot load {path}: {result.GetError().strip()}")
            return
    raise Error(f"heapscope's LLDB plugin was not found (looked in: {', '.join(tried)}); set HEAPSCOPE_LLDB_PLUGIN "
                f"to libheapscope_lldb.so")


def _executor(debugger):
    def execute(words):
        result = _handle(debugger, "heap " + command_line(words))
        if result.Succeeded():
            return result.GetOutput()
        message = (result.GetError() or "heap: failed").strip()
        if message.startswith("error: "):
            message = message[len("error: "):]
        if interrupted(message):
            raise KeyboardInterrupt(message)
        raise Error(message[len("heap "):] if message.startswith("heap ") else message)
    return execute


def _mapped_core_file():
    """The core file LLDB has mapped into this process: the one mapped ELF file of type ET_CORE."""
    cores = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 6 or not fields[5].startswith("/"):
                continue
            path = fields[5].rstrip("\n")
            if path in cores:
                continue
            try:
                with open(path, "rb") as f:
                    header = f.read(18)
            except OSError:
                continue
            if header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == 4:  # ET_CORE
                cores.add(path)
    if len(cores) != 1:
        raise Error("cannot tell which core file LLDB has loaded" + (f" ({', '.join(sorted(cores))})" if cores else ""))
    return cores.pop()


def _register_values(frame):
    values = {}
    for register_set in frame.GetRegisters():
        for register in register_set:
            values.setdefault(register.GetName(), register)
    return values


def _vector_lanes(values):
    for prefix, lanes in (("ymm", 4), ("xmm", 2)):
        registers = [values.get(f"{prefix}{n}") for n in range(16)]
        if all(r is not None for r in registers):
            return lanes, [list(r.GetData().uint64)[:lanes] for r in registers]
    return 0, []


def _live_threads(process):
    names = ["rflags" if name == "eflags" else name for name in _heapscope.register_names()]
    threads = []
    for thread in process:
        values = _register_values(thread.GetFrameAtIndex(0))
        registers = [values[n].GetValueAsUnsigned(0) if n in values else 0 for n in names]
        lanes_read, lanes = _vector_lanes(values)
        threads.append((thread.GetThreadID(), registers, lanes_read, lanes))
    return threads


def _opener(target, process):
    executable = target.GetExecutable()
    exe = executable.fullpath if executable.IsValid() else None

    def open_engine():
        options = ["--exe", exe] if exe else []
        if process.GetPluginName() == "elf-core":
            return _heapscope.open_core(_mapped_core_file(), options, False)
        return _heapscope.open_stopped(process.GetProcessID(), _live_threads(process), options)

    return open_engine


def current_session(progress=None):
    """The session of LLDB's selected target's process at its current stop."""
    del progress
    global _current  # pylint: disable=global-statement
    debugger = lldb.debugger
    target = debugger.GetSelectedTarget()
    process = target.GetProcess() if target.IsValid() else lldb.SBProcess()
    if not process.IsValid():
        raise Error(_NO_PROCESS)
    if process.GetState() not in _STOPPED:
        raise Error("the process is running; stop it first (process interrupt)")
    _ensure_plugin(debugger)
    key = _key(process)
    if _current is not None and _current.key == key and not _current.closed:
        return _current
    if _current is not None:
        _current.close()
    _current = DebuggerSession(_executor(debugger), _opener(target, process), key,
                               lambda: _key(debugger.GetSelectedTarget().GetProcess()))
    return _current


def _key(process):
    """The process and its stop: stops after expressions that ran code count too (`expr free(p)`)."""
    return (process.GetUniqueID(), process.GetStopID(True)) if process.IsValid() else None
