"""heapscope's GDB frontend: `heap <command>` inside GDB, on a core file or on a stopped live process.

    (gdb) source /usr/local/share/heapscope/heapscope_gdb.py
    (gdb) heap leaks
    (gdb) heap retainers node->next

Every command is the engine's (engine/commands): this file only adapts GDB to it. It loads
libheapscope_capi.so (frontends/capi/heapscope_capi.h) through ctypes and gives the engine
  - for a core file: the core's path, which the engine opens itself, and the program GDB loaded;
  - for a live process: its pid and every thread's registers as GDB sees them, the vector registers
    (ymm0-15, or xmm0-15 without AVX) included, since they are roots too (the process stays stopped by
    GDB; the engine reads its memory through /proc/PID/mem and never writes it);
  - address arguments, which GDB evaluates as expressions in the selected frame.
The session (heap walk, pointer graph...) is kept until the process runs again or its memory or
registers are changed from GDB.

A command runs on a thread of the library's own while GDB's thread serves it (hs_run_with_callbacks):
evaluating addresses, watching for Ctrl-C every 50 ms, and, for a command typed at a terminal that runs
longer than a second, showing its phase and percentage as one line on GDB's terminal (never for JSON).
Ctrl-C reaches Python as a KeyboardInterrupt (GDB turns its SIGINT into one while Python runs), raised
when the next callback starts running Python: that callback cannot catch it (it is raised on entry), so
ctypes reports it as "unraisable", and a hook on those notes it instead. The interrupt callback then says
stop: the command ends within a second with "interrupted", and what it had finished is kept for the next
command on the same stop.

The library is $HEAPSCOPE_CAPI (the file, or its directory) when that is set; otherwise it is looked up
next to this script (the build tree keeps a copy of the script beside it), in ../../lib/heapscope
relative to it (an installed tree: share/heapscope and lib/heapscope), then in the source tree's build
directory.
"""

import ctypes
import os
import re
import shlex
import sys

import gdb

LIBRARY_NAME = "libheapscope_capi.so"
WORD_MASK = (1 << 64) - 1
NO_TARGET_MESSAGE = ("heap: no process and no core file: start or attach to a program (run, attach PID), "
                     "or load a core file (gdb PROGRAM CORE, or core-file CORE)")


# int (*)(void* ctx, const char* expression, uint64_t* address, char** error). The error is passed as a
# void** so that this side can point it at a buffer it keeps alive until hs_run returns.
_EVALUATE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64),
                                ctypes.POINTER(ctypes.c_void_p))
# int (*)(void* ctx): non-zero stops the command.
_INTERRUPTED_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
# void (*)(void* ctx, const char* line, int done)
_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int)
# hs_run_with_callbacks's return value for a command Ctrl-C stopped.
HS_INTERRUPTED = 130


class _Callbacks(ctypes.Structure):
    _fields_ = [("evaluate", _EVALUATE_FN), ("interrupted", _INTERRUPTED_FN), ("progress", _PROGRESS_FN),
                ("ctx", ctypes.c_void_p)]


# ---- the library ----

def _library_candidates():
    configured = os.environ.get("HEAPSCOPE_CAPI")
    if configured:  # said explicitly: nothing else is tried
        yield os.path.join(configured, LIBRARY_NAME) if os.path.isdir(configured) else configured
        return
    here = os.path.dirname(os.path.realpath(__file__))
    yield os.path.join(here, LIBRARY_NAME)
    yield os.path.join(here, "..", "..", "lib", "heapscope", LIBRARY_NAME)
    yield os.path.join(here, "..", "..", "build", "frontends", "capi", LIBRARY_NAME)  # frontends/gdb in the sources


def _load_library():
    tried = []
    for path in _library_candidates():
        path = os.path.normpath(path)
        tried.append(path)
        if os.path.isfile(path):
            try:
                return ctypes.CDLL(path), None
            except OSError as e:
                return None, f"heap: cannot load {path}: {e}"
    return None, (f"heap: {LIBRARY_NAME} was not found (looked in: {', '.join(tried)}); build heapscope, or set "
                  f"HEAPSCOPE_CAPI to the library's path")


def _thread_type(lib):
    """hs_thread, its registers named and ordered as the library says (hs_register_names)."""
    lib.hs_free.argtypes = [ctypes.c_void_p]
    lib.hs_free.restype = None
    lib.hs_register_names.argtypes = []
    lib.hs_register_names.restype = ctypes.c_void_p
    names = tuple(_take_string(lib.hs_register_names(), lib).split())
    fields = [("tid", ctypes.c_uint32), ("registers", ctypes.c_uint64 * len(names))]
    return names, type("_Thread", (ctypes.Structure,), {"_fields_": fields})


class _VectorRegisters(ctypes.Structure):
    """hs_vector_registers: ymm0-15 as four 8-byte lanes each (xmm first), and how many lanes are filled."""
    _fields_ = [("lanes_read", ctypes.c_uint32), ("lanes", (ctypes.c_uint64 * 4) * 16)]


def _declare(lib, thread_type):
    text = ctypes.c_void_p  # char* results are freed with hs_free, so they stay raw pointers
    lib.hs_open_core.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(text)]
    lib.hs_open_core.restype = ctypes.c_void_p
    lib.hs_open_live.argtypes = [ctypes.c_int, ctypes.POINTER(thread_type), ctypes.c_size_t, ctypes.POINTER(text)]
    lib.hs_open_live.restype = ctypes.c_void_p
    lib.hs_open_live_with_options.argtypes = [ctypes.c_int, ctypes.POINTER(thread_type), ctypes.c_size_t,
                                              ctypes.c_char_p, ctypes.POINTER(text)]
    lib.hs_open_live_with_options.restype = ctypes.c_void_p
    lib.hs_open_live_with_vector_registers.argtypes = [ctypes.c_int, ctypes.POINTER(thread_type),
                                                       ctypes.POINTER(_VectorRegisters), ctypes.c_size_t,
                                                       ctypes.c_char_p, ctypes.POINTER(text)]
    lib.hs_open_live_with_vector_registers.restype = ctypes.c_void_p
    lib.hs_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _EVALUATE_FN, ctypes.c_void_p, ctypes.POINTER(text),
                           ctypes.POINTER(text)]
    lib.hs_run.restype = ctypes.c_int
    lib.hs_run_with_callbacks.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(_Callbacks),
                                          ctypes.POINTER(text), ctypes.POINTER(text)]
    lib.hs_run_with_callbacks.restype = ctypes.c_int
    lib.hs_help.argtypes = [ctypes.c_char_p]
    lib.hs_help.restype = text
    lib.hs_commands.argtypes = []
    lib.hs_commands.restype = text
    lib.hs_close.argtypes = [ctypes.c_void_p]
    lib.hs_close.restype = None


def _take_string(pointer, lib=None):
    """The text of a char* heapscope returned, which is freed here."""
    if not pointer:
        return ""
    try:
        return ctypes.string_at(pointer).decode("utf-8", errors="replace")
    finally:
        (lib or _lib).hs_free(pointer)


_lib, _load_error = _load_library()
REGISTER_NAMES, _Thread = _thread_type(_lib) if _lib else ((), None)
if _lib:
    _declare(_lib, _Thread)


def _require_library():
    if _lib is None:
        raise gdb.GdbError(_load_error)


# ---- what GDB is debugging ----

def _target_kind(inferior):
    """'core', 'native' (a live local process), another connection type, or None without a target."""
    if inferior.pid == 0:
        return None
    connection = getattr(inferior, "connection", None)
    if connection is not None and connection.type:
        return connection.type
    return "core" if _core_path() else "native"


def _core_path():
    info = gdb.execute("info target", to_string=True)
    match = re.search(r"Local core dump file:\s*\n\s*`(.*)', file type", info)
    return match.group(1) if match else None


def _register(frame, name):
    try:
        return int(frame.read_register(name)) & WORD_MASK
    except (gdb.error, ValueError, TypeError):
        return 0  # not available for this thread: the engine treats it as holding no pointer


def _vector_lanes(frame, name, field, count):
    """The 8-byte lanes of vector register `name` (its `field` view, e.g. v4_int64), or None when GDB
    does not show it (no AVX: no ymm)."""
    try:
        value = frame.read_register(name)[field]
        return [int(value[i]) & WORD_MASK for i in range(count)]
    except (gdb.error, ValueError, TypeError):
        return None


def _vector_registers(frame):
    """xmm0-15 of the frame's thread, as ymm0-15 when GDB shows them: vector registers are roots too."""
    record = _VectorRegisters()
    for register, field, count in (("ymm", "v4_int64", 4), ("xmm", "v2_int64", 2)):
        lanes = [_vector_lanes(frame, f"{register}{n}", field, count) for n in range(16)]
        if all(lane is not None for lane in lanes):
            for n, values in enumerate(lanes):
                for lane, value in enumerate(values):
                    record.lanes[n][lane] = value
            record.lanes_read = count
            break
    return record


def _live_threads(inferior):
    """Every thread of the stopped inferior with the registers of its newest frame, and its vector
    registers (a list of hs_thread and one of hs_vector_registers, in the same order)."""
    selected_thread = gdb.selected_thread()
    try:
        selected_frame = gdb.selected_frame()
    except gdb.error:
        selected_frame = None
    threads, vectors = [], []
    try:
        for thread in sorted(inferior.threads(), key=lambda t: t.num):  # the main thread first, like a core
            if not thread.is_valid() or thread.is_exited():
                continue
            if thread.is_running():
                raise gdb.GdbError("heap: the process is running; stop it first (interrupt, or a breakpoint)")
            thread.switch()
            frame = gdb.newest_frame()
            record = _Thread()
            pid, lwp, _ = thread.ptid
            record.tid = lwp or pid
            for index, name in enumerate(REGISTER_NAMES):
                record.registers[index] = _register(frame, name)
            threads.append(record)
            vectors.append(_vector_registers(frame))
    finally:
        if selected_thread is not None and selected_thread.is_valid():
            selected_thread.switch()
            if selected_frame is not None and selected_frame.is_valid():
                selected_frame.select()
    return threads, vectors


# ---- address arguments ----

def _address_of(value):
    """The address an expression's value stands for: a pointer or integer itself, an array or function
    where it lives."""
    kind = value.type.strip_typedefs().code
    if kind in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_INT, gdb.TYPE_CODE_ENUM, gdb.TYPE_CODE_CHAR, gdb.TYPE_CODE_BOOL):
        return int(value) & WORD_MASK
    if kind in (gdb.TYPE_CODE_REF, gdb.TYPE_CODE_RVALUE_REF):
        return _address_of(value.referenced_value())
    if kind in (gdb.TYPE_CODE_ARRAY, gdb.TYPE_CODE_FUNC) and value.address is not None:
        return int(value.address) & WORD_MASK
    raise gdb.error(f"it is a {value.type}, not an address (take its address with &)")


class _Evaluator:
    """The evaluator given to hs_run: GDB expressions in the selected frame."""

    def __init__(self):
        self._messages = []  # error buffers heapscope may still read until hs_run returns
        self.callback = _EVALUATE_FN(self._evaluate)

    def _evaluate(self, _ctx, expression, address, error):
        text = expression.decode("utf-8", errors="replace")
        try:
            address[0] = _address_of(gdb.parse_and_eval(text))
            return 0
        except Exception as e:  # anything raised here must not unwind into C
            message = ctypes.create_string_buffer(f"cannot evaluate '{text}': {e}".encode("utf-8", "replace"))
            self._messages.append(message)
            error[0] = ctypes.addressof(message)
            return 1


# ---- Ctrl-C and progress ----

def _let_signals_in():
    """Nothing; calling it runs Python's check for pending signals, where Ctrl-C becomes KeyboardInterrupt."""


class _Watch:
    """The interrupt and progress callbacks of one command, called on GDB's thread while it runs; as a
    context manager, it also notes a KeyboardInterrupt that reached any callback of the command (see the
    module's doc)."""

    def __init__(self, show_progress):
        self.interrupted = False
        self.interrupted_callback = _INTERRUPTED_FN(self._interrupted)
        self.progress_callback = _PROGRESS_FN(self._progress if show_progress else self._no_progress)
        self._previous_hook = None

    def __enter__(self):
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *_exc):
        sys.unraisablehook = self._previous_hook

    def _unraisable(self, unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            self.interrupted = True
            return
        self._previous_hook(unraisable)

    def _interrupted(self, _ctx):
        try:
            _let_signals_in()
        except KeyboardInterrupt:  # GDB's Ctrl-C, raised in Python while it runs
            self.interrupted = True
        return 1 if self.interrupted else 0

    def _progress(self, _ctx, line, done):
        try:
            text = "" if done else line.decode("utf-8", errors="replace")
            gdb.write("\r\033[K" + text, gdb.STDERR)
            gdb.flush(gdb.STDERR)
        except KeyboardInterrupt:
            self.interrupted = True
        except Exception:  # pylint: disable=broad-except
            pass  # a line that cannot be shown is not worth failing the command for

    @staticmethod
    def _no_progress(_ctx, _line, _done):
        pass


def _on_terminal(from_tty):
    """A command typed at a terminal whose output goes to one: progress may be shown."""
    try:
        return bool(from_tty) and os.isatty(1) and os.isatty(2)
    except (OSError, ValueError):
        return False


# ---- gdb's settings as heapscope's target options ----

def _parameter(name):
    try:
        return gdb.parameter(name)
    except (gdb.error, RuntimeError):
        return None  # a gdb built without that setting


def _target_options():
    """heapscope's target options from gdb's own settings, so that heapscope finds files where gdb does:
    `set debuginfod enabled off` is --no-debuginfod (on and ask both let heapscope ask the servers of
    DEBUGINFOD_URLS: the user who types a heap command has asked for the analysis), each directory of
    `set debug-file-directory` a --debug-dir, and a `set sysroot` directory (not gdb's "target:") the
    --sysroot."""
    words = []
    if _parameter("debuginfod enabled") == "off":
        words.append("--no-debuginfod")
    for directory in (_parameter("debug-file-directory") or "").split(os.pathsep):
        if directory:
            words += ["--debug-dir", shlex.quote(directory)]
    sysroot = _parameter("sysroot") or ""
    if sysroot and not sysroot.startswith("target:") and sysroot != "/":
        words += ["--sysroot", shlex.quote(sysroot)]
    return " ".join(words)


# ---- sessions ----

def target_key(inferior):
    """('core', (…, core path, program, options)) or ('native', (…, inferior, pid, options)) for what GDB
    debugs: a session opened for one key serves every command while the key stays the same. The Python
    module (frontends/python/heapscope/_gdb.py) keys its sessions the same way."""
    kind = _target_kind(inferior)
    if kind is None:
        raise gdb.GdbError(NO_TARGET_MESSAGE)
    if kind == "core":
        return kind, ("core", _core_path(), gdb.current_progspace().filename, _target_options())
    if kind == "native":
        return kind, ("live", inferior.num, inferior.pid, _target_options())
    raise gdb.GdbError(f"heap: GDB's target is a {kind} connection; heapscope reads a local live process "
                       f"or a core file (for a remote program, take a core with gcore and load it)")


class _Sessions:
    """One engine session for the current target, dropped when the process runs or is changed."""

    def __init__(self):
        self._handle = None
        self._key = None
        self._running_command = False
        self._stale = False

    def invalidate(self, *_event):
        if self._running_command:  # an expression called a function in the process: drop it afterwards
            self._stale = True
            return
        self._close()

    def _close(self):
        if self._handle:
            _lib.hs_close(self._handle)
        self._handle, self._key, self._stale = None, None, False

    def run(self, command_line, from_tty=False):
        session = self._current()
        evaluator = _Evaluator()
        watch = _Watch(_on_terminal(from_tty))
        callbacks = _Callbacks(evaluator.callback, watch.interrupted_callback, watch.progress_callback, None)
        output, error = ctypes.c_void_p(), ctypes.c_void_p()
        self._running_command = True
        try:
            with watch:
                status = _lib.hs_run_with_callbacks(session, command_line.encode("utf-8"),
                                                    ctypes.byref(callbacks), ctypes.byref(output),
                                                    ctypes.byref(error))
        finally:
            self._running_command = False
            if self._stale:
                self._close()
        text, message = _take_string(output.value), _take_string(error.value)
        if status == HS_INTERRUPTED:
            raise gdb.GdbError(f"heap {command_line.split()[0]}: interrupted (what was finished is kept for the "
                               f"next command)")
        if status != 0:
            raise gdb.GdbError("heap " + (message or "failed"))
        return text

    def _current(self):
        inferior = gdb.selected_inferior()
        kind, key = target_key(inferior)
        if self._handle and key == self._key:
            return self._handle
        self._close()
        self._handle = self._open(kind, key, inferior)
        self._key = key
        return self._handle

    @staticmethod
    def _open(kind, key, inferior):
        error = ctypes.c_void_p()
        if kind == "core":
            core, program = key[1], key[2]
            if not core:
                raise gdb.GdbError("heap: GDB did not say which core file it has loaded (info target)")
            handle = _lib.hs_open_core(core.encode(), program.encode() if program else None, key[3].encode(),
                                       ctypes.byref(error))
        else:
            threads, vectors = _live_threads(inferior)
            array = (_Thread * len(threads))(*threads)
            vector_array = (_VectorRegisters * len(vectors))(*vectors)
            handle = _lib.hs_open_live_with_vector_registers(inferior.pid, array, vector_array, len(threads),
                                                             key[3].encode(), ctypes.byref(error))
        if not handle:
            raise gdb.GdbError("heap: " + (_take_string(error.value) or "cannot open the target"))
        return handle


_sessions = _Sessions()


# ---- the commands ----

def _asks_for_help(argument):
    return any(word in ("--help", "-h") for word in gdb.string_to_argv(argument))


class HeapCommand(gdb.Command):
    """Find memory leaks and explain heap retention with heapscope.

Usage: heap <command> [options]. Works on a core file and on a stopped live process.
'help heap <command>' or 'heap <command> --help' shows a command's options."""

    def __init__(self):
        super().__init__("heap", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, argument, from_tty):
        _require_library()
        if argument.strip():
            raise gdb.GdbError(f"heap: unknown command '{argument.split()[0]}'; 'help heap' lists the commands")
        if _target_kind(gdb.selected_inferior()) is None:
            raise gdb.GdbError(NO_TARGET_MESSAGE)
        gdb.write(_take_string(_lib.hs_help(None)))


class HeapSubcommand(gdb.Command):
    """One command of heapscope's command table; its help is the engine's."""

    def __init__(self, name):
        super().__init__("heap " + name, gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)
        self._name = name

    def invoke(self, argument, from_tty):
        self.dont_repeat()
        if _asks_for_help(argument):
            gdb.write(_take_string(_lib.hs_help(self._name.encode())))
            return
        gdb.write(_sessions.run(f"{self._name} {argument}", from_tty))


def _command_table():
    lines = _take_string(_lib.hs_commands()).splitlines()
    return [tuple(line.split("\t", 1)) for line in lines if "\t" in line]


def _register_commands():
    HeapCommand()
    if _lib is None:
        return
    for name, description in _command_table():
        help_text = _take_string(_lib.hs_help(name.encode())).strip() or description
        subcommand = type(f"HeapSubcommand_{name}", (HeapSubcommand,), {"__doc__": help_text})
        subcommand(name)


# The events after which a session no longer describes the target (the Python module's sessions too).
INVALIDATING_EVENTS = ("cont", "exited", "memory_changed", "register_changed", "new_objfile", "clear_objfiles")


def connect_invalidating_events(callback):
    for registry in INVALIDATING_EVENTS:
        events = getattr(gdb.events, registry, None)
        if events is not None:
            events.connect(callback)


def _connect_events():
    connect_invalidating_events(_sessions.invalidate)


_register_commands()
_connect_events()
