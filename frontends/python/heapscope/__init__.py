"""heapscope as a library: leaks and heap retention of C and C++ programs, from Python.

A Session is one process image — a core file (`heapscope.open`), a running process heapscope stops while
you look (`heapscope.attach`), or, inside GDB or LLDB, the debugger's current target
(`heapscope.current`) — with everything derived from it computed once and kept for the following calls.

    import heapscope
    with heapscope.open("core.1234") as s:
        s.run("top -n 5")                    # the dict `heapscope top core.1234 -n 5 --json` prints
        blocks = s.blocks(state="used")      # numpy columns: address, size, state, type_id, site_id
        s.retainers(0x5581e2a4c2b0, paths=3)

Every command of the CLI works through `Session.run`, with the CLI's options; the other methods are
shorthands for one command each and return its JSON as a dict (docs/json.md), except `blocks`, which
returns columns. Errors are `heapscope.Error` (the CLI's message); Ctrl-C stops a long call and raises
KeyboardInterrupt, and what the session had finished is kept; `progress=callable` receives
`(line, fraction, done)` while a call runs longer than a second.
"""

import json
import os
import re

# numpy first: the columns are numpy arrays (and LLDB's `script` loses what a command prints while numpy
# is first imported, so it is imported with heapscope, not during a later call).
try:
    import numpy
except ImportError as _missing:
    import sys as _sys
    raise ImportError(f"heapscope needs numpy (Debian's python3-numpy), which this Python ({_sys.version.split()[0]}, "
                      f"prefix {_sys.prefix}) cannot import: {_missing}. heapscope is built for Debian's "
                      f"/usr/bin/python3; inside LLDB, whose Python takes its prefix from the first python3 on PATH, "
                      f"put /usr/bin before another Python's directory (pyenv, a venv)") from None

from . import _heapscope

__all__ = ["Error", "Session", "Blocks", "open", "attach", "current", "commands", "help"]

Error = _heapscope.Error
Error.__doc__ = "A heapscope failure: the message the CLI would print (a bad core, an address in no block, ...)."

_UNKNOWN_TYPE = re.compile(r"unknown \((\d+) bytes\)")


def _option_value(words, names):
    """The value of the last of options `names` among `words` (`--format json` or `--format=json`), or None."""
    value = None
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(name + "="):
                value = word[len(name) + 1:]
    return value


def _command_words(command):
    """A command line's words, with --json added when it names no output of its own, and whether its
    output is JSON (then run() returns it parsed): not with --format text|html|dot|svg, --html, -o FILE or help."""
    words = _heapscope.split_command(command) if isinstance(command, str) else [str(w) for w in command]
    if not words:
        raise ValueError("no command given; heapscope.commands() lists them")
    if words[0] in ("help", "--help", "-h") or any(w in ("--help", "-h") for w in words[1:]):
        return words, False
    if _option_value(words[1:], ("-o", "--output")) is not None:
        return words, False
    output_format = _option_value(words[1:], ("--format",))
    if output_format is not None:
        return words, output_format == "json"
    if "--html" in words[1:]:
        return words, False
    return (words if "--json" in words[1:] else words + ["--json"]), True


def _target_options(exe=None, sysroot=None, debug_dirs=None, debuginfod=True, debug_files=True,
                    leak_check_heuristics=None):
    """The CLI's target options as words (frontends/common/target_options.h)."""
    words = []
    if exe:
        words += ["--exe", os.fspath(exe)]
    if sysroot:
        words += ["--sysroot", os.fspath(sysroot)]
    for directory in debug_dirs or ():
        words += ["--debug-dir", os.fspath(directory)]
    if not debuginfod:
        words.append("--no-debuginfod")
    if not debug_files:
        words.append("--no-debug-files")
    if leak_check_heuristics is not None:
        words += ["--leak-check-heuristics", leak_check_heuristics]
    return words


def _address(addr):
    """An address argument as the commands take it: an int, or a string ("0x55…")."""
    if isinstance(addr, int):
        if addr < 0:
            raise ValueError(f"an address is not negative: {addr}")
        return hex(addr)
    return str(addr)


class Blocks:
    """Blocks as columns (numpy arrays, one entry per block, in address order): what `blocks` lists.

    address and size (usable bytes; numpy uint64), state (uint8, an index into state_names), and for a
    selection by leak verdict verdict (uint8, into verdict_names) and possibly (bool) arrive with the
    selection, in about the time of `summary`. chunk and chunk_size (uint64), type_id (uint32, into types;
    0 is "unknown") and site_id (int32, into sites; -1: not sampled) are computed on first use: naming
    the heap costs what `histogram` costs. `ids` are the blocks' indices in the session's heap.
    """

    def __init__(self, session, columns, progress):
        self._session = session
        self._progress = progress
        self.matched = columns["matched"]
        self.ids = columns["ids"]
        self.address = columns["address"]
        self.size = columns["size"]
        self.state = columns["state"]
        self.state_names = _heapscope.state_names()
        self.warnings = columns["warnings"]
        self.verdict = self.possibly = self.verdict_names = None
        if "verdict" in columns:
            self.verdict = columns["verdict"]
            self.verdict_names = columns["verdict_names"]
            self.possibly = columns["possibly"].astype(bool)
        self._types = self._sites = self._chunks = None

    def __len__(self):
        return len(self.address)

    def _typed(self):
        if self._types is None:
            self._types = self._session.types(self.ids, self._progress)
        return self._types

    def _sited(self):
        if self._sites is None:
            self._sites = self._session.sites(self.ids, self._progress)
        return self._sites

    @property
    def chunk(self):
        """Per block, where its chunk starts (the malloc header 16 bytes before a glibc block's address)."""
        if self._chunks is None:
            self._chunks = self._session.chunks(self.ids)
        return self._chunks[0]

    @property
    def chunk_size(self):
        """Per block, its chunk's bytes, header included (what `blocks` calls chunk_size)."""
        self.chunk  # pylint: disable=pointless-statement
        return self._chunks[1]

    @property
    def type_id(self):
        """Per block, an index into `types` (0: unknown)."""
        return self._typed()[0]

    @property
    def types(self):
        """The type names, as histogram and leaks name them; types[0] is "" (unknown)."""
        return self._typed()[1]

    @property
    def type_namings(self):
        """Per entry of `types`, the evidence behind the name (dwarf, vtable, content, ...)."""
        return self._typed()[2]

    @property
    def site_id(self):
        """Per block, an index into `sites` (its allocation site), or -1 when the allocator did not sample it."""
        return self._sited()[0]

    @property
    def sites(self):
        """The allocation sites' labels ("cache_entry() at sites.c:31"), as histogram --by site names them."""
        return self._sited()[1]

    def where_state(self, name):
        """A boolean mask of the blocks in state `name` (in_use, mmapped, free, tcache, fastbin, top)."""
        return self.state == self.state_names.index(name)

    def where_type(self, name):
        """A boolean mask of the blocks of type `name`, spelt as `blocks`, `histogram` and `leaks` spell it
        (an untyped block's is "unknown (N bytes)", N its usable size)."""
        unknown = _UNKNOWN_TYPE.fullmatch(name)
        if unknown:
            return (self.type_id == 0) & (self.size == int(unknown.group(1))) & self.allocated()
        if name not in self.types[1:]:
            return numpy.zeros(len(self), dtype=bool)
        return self.type_id == self.types.index(name, 1)

    def allocated(self):
        """A boolean mask of the allocated blocks (in_use, mmapped)."""
        return (self.state == self.state_names.index("in_use")) | (self.state == self.state_names.index("mmapped"))

    def __repr__(self):
        return f"<heapscope.Blocks: {len(self)} blocks of {self.matched} matched>"


class Session:
    """One process image and what heapscope derived from it. Close it (or use `with`) when done: an
    attached process runs on only then."""

    def __init__(self, engine, progress=None, on_close=None):
        self._engine = engine
        self._progress = progress
        self._on_close = on_close

    # ---- commands ----

    def run(self, command, progress=None):
        """Runs one command line (a string as typed after the core, or a list of words): `run("top -n 5")`.

        Returns the dict its `--json` prints (docs/json.md); with `--format text|html|dot` or `-o FILE` the
        command's output as a string instead. Raises Error, or KeyboardInterrupt on Ctrl-C."""
        words, as_json = _command_words(command)
        output = self._engine.run(words, self._pick(progress))
        return json.loads(output) if as_json else output

    def blocks(self, state="used", type=None, min_size=0, limit=0, progress=None):  # pylint: disable=redefined-builtin
        """The blocks `blocks --state STATE --type T --min-size N --limit N` selects, as columns (Blocks).

        state: used, free, all, a state name, or a leak verdict (leaked, reachable, possibly, direct,
        indirect, cycle)."""
        words = ["--state", state, "--min-size", str(min_size), "--limit", str(limit)]
        if type is not None:
            words += ["--type", type]
        return Blocks(self._engine, self._engine.blocks(words, self._pick(progress)), self._pick(progress))

    def referrers(self, addr, progress=None):
        """What points into the block at `addr`: `refs ADDR`'s dict (its "referrers" list)."""
        return self.run(["refs", _address(addr)], progress)

    def referents(self, addr, progress=None):
        """What the block at `addr` points to: `describe ADDR`'s "pointers" (offset, value, points_to), every
        word of the block that points into an allocated block or a module."""
        return self.describe(addr, bytes=0, fields=0, progress=progress)["pointers"]

    def retainers(self, addr, paths=1, max_depth=None, stack=False, progress=None):
        """Why the block at `addr` is alive: `retainers ADDR --paths N`'s dict."""
        words = ["retainers", _address(addr), "--paths", str(paths)]
        if max_depth is not None:
            words += ["--max-depth", str(max_depth)]
        if stack:
            words.append("--stack")
        return self.run(words, progress)

    def describe(self, addr, bytes=64, fields=32, stack=False, progress=None):  # pylint: disable=redefined-builtin
        """The block at `addr`, its bytes, pointers and DWARF fields: `describe ADDR`'s dict."""
        words = ["describe", _address(addr), "--bytes", str(bytes), "--fields", str(fields)]
        if stack:
            words.append("--stack")
        return self.run(words, progress)

    def snapshot(self, name, progress=None):
        """Saves this heap as snapshot `name` (`snapshot save NAME`) for a later `diff(name)`; snapshots are
        kept per target for the life of the Python process. Returns the saved snapshot's dict."""
        return self.run(["snapshot", "save", name], progress)

    def diff(self, snapshot=None, core=None, count=None, progress=None):
        """What changed since an earlier state: a snapshot saved by `snapshot(name)` (`snapshot diff NAME`),
        or an earlier core of the program (`diff CORE`). Returns the diff's dict: per type and per root,
        then the blocks new since."""
        if (snapshot is None) == (core is None):
            raise ValueError("diff takes one earlier state: snapshot=NAME or core=PATH")
        words = ["snapshot", "diff", snapshot] if core is None else ["diff", os.fspath(core)]
        if count is not None:
            words += ["-n", str(count)]
        return self.run(words, progress)

    # ---- the session ----

    def save_index(self):
        """Writes the core's index cache now when a call computed what it keeps (the CLI writes it after
        each command; here it is written on close). True when it was written."""
        return self._engine.save_index()

    def close(self):
        """Ends the session: an attached process runs on, a core's index cache is written."""
        if self._engine.closed:
            return
        try:
            if not self._engine.attached:
                try:
                    self._engine.save_index()
                except (Error, OSError):
                    pass  # a cache not written costs the next process time, not this one its result
        finally:
            self._engine.close()
            if self._on_close:
                self._on_close(self)

    @property
    def closed(self):
        return self._engine.closed

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def _pick(self, progress):
        return progress if progress is not None else self._progress


def open(core, exe=None, sysroot=None, debug_dirs=None, cache=True, debuginfod=True, debug_files=True,
         leak_check_heuristics=None, progress=None):  # pylint: disable=redefined-builtin
    """A Session over a core file (compressed ones too), opened as `heapscope COMMAND CORE` opens it.

    exe: the program's executable when it is not where the core says; sysroot: a copy of the core's
    machine; debug_dirs: where separate debug files live (default /usr/lib/debug); cache: read and write
    the index cache (docs/usage.md); debuginfod/debug_files False: as --no-debuginfod/--no-debug-files."""
    options = _target_options(exe, sysroot, debug_dirs, debuginfod, debug_files, leak_check_heuristics)
    return Session(_heapscope.open_core(os.fspath(core), options, bool(cache), progress), progress)


_attached = set()


def _detach_all():
    for session in list(_attached):
        session.close()


def attach(pid, exe=None, debug_dirs=None, debuginfod=True, debug_files=True, leak_check_heuristics=None,
           progress=None):
    """Stops the running process `pid` (every thread; nothing is written) and returns its Session, a context
    manager: the process runs on when the `with` block ends, however it ends (or at close(), or when Python
    exits). Close it from the thread that attached."""
    options = _target_options(exe, None, debug_dirs, debuginfod, debug_files, leak_check_heuristics)
    session = Session(_heapscope.attach(int(pid), options), progress, on_close=_attached.discard)
    _attached.add(session)
    return session


def current(progress=None):
    """Inside GDB or LLDB: the Session of the debugger's current target (its core file, or its stopped live
    process), kept until the process runs again, as the `heap` command keeps its own."""
    import sys
    if "gdb" in sys.modules:
        from . import _gdb
        return _gdb.current_session(progress)
    if "lldb" in sys.modules and getattr(sys.modules["lldb"], "debugger", None) is not None:
        from . import _lldb
        return _lldb.current_session(progress)
    raise Error("heapscope.current() is for GDB's and LLDB's Python; elsewhere use heapscope.open(core) or "
                "heapscope.attach(pid)")


def commands():
    """Every command, name → one-line description."""
    return dict(_heapscope.commands())


def help(command=""):  # pylint: disable=redefined-builtin
    """A command's options (the CLI's help text), or the list of commands."""
    return _heapscope.command_help(command)


import atexit  # noqa: E402  (after the functions it names)
atexit.register(_detach_all)
