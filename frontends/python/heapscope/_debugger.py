"""The Session of a debugger's current target (heapscope.current()), shared by the GDB and LLDB adapters.

Commands go through the debugger's own `heap` command, so they run on the session the user's `heap`
commands use — the same products computed once per stop, the same snapshots, the debugger's Ctrl-C and
expressions as address arguments (`s.retainers("node->next")`). Columns (`blocks`) need the engine's
data rather than a rendered report: they come from a session of this module opened over the same target
(the core file, or the stopped process's memory and the registers the debugger shows), kept until the
target changes.
"""

import json
import os
import shlex

from . import Error, Session, Blocks, _command_words


class DebuggerSession(Session):
    """A Session whose commands are the debugger's `heap` commands. `run(...)` raises Error with the
    debugger's message, and KeyboardInterrupt when Ctrl-C stopped the command."""

    def __init__(self, execute, open_engine, key, current_key):
        super().__init__(None)
        self._execute = execute          # words -> the heap command's output, raising Error
        self._open_engine = open_engine  # () -> an engine session over the same target
        self._current_key = current_key  # () -> the key of what the debugger holds now
        self.key = key
        self._closed = False

    def _check_current(self):
        """A session kept after the process ran (or another core was loaded) must not answer for the new
        state: the debugger's `heap` command would."""
        if not self._closed:
            try:
                self._closed = self._current_key() != self.key
            except Error:
                self._closed = True
        if self._closed:
            self.close()
            raise Error("the target has changed since heapscope.current() gave this session; ask it again")

    def run(self, command, progress=None):
        del progress  # the debugger shows its own progress line
        self._check_current()
        words, as_json = _command_words(command)
        output = self._execute(words)
        return json.loads(output) if as_json else output

    def blocks(self, state="used", type=None, min_size=0, limit=0, progress=None):  # pylint: disable=redefined-builtin
        self._check_current()
        if self._engine is None:
            self._engine = self._open_engine()
        return Session.blocks(self, state, type, min_size, limit, progress)

    def save_index(self):
        return False

    def close(self):
        if self._engine is not None and not self._engine.closed:
            self._engine.close()
        self._engine = None
        self._closed = True

    @property
    def closed(self):
        return self._closed


def frontend_candidates(variable, in_build_tree, installed_name):
    """Where a debugger frontend of this build may be: $variable alone when it is set, else its place in the
    build tree (relative to the package's folder there), then where cmake --install put it."""
    configured = os.environ.get(variable)
    if configured:
        yield configured
        return
    here = os.path.dirname(os.path.realpath(__file__))
    yield os.path.join(here, "..", "..", *in_build_tree)
    try:
        from . import _installed  # written by cmake --install
        yield getattr(_installed, installed_name)
    except ImportError:
        pass


def interrupted(message):
    """Whether a heap command's error says Ctrl-C stopped it."""
    return ": interrupted" in message


def command_line(words):
    """Words as one `heap` command's argument string, quoted as split_command reads it back."""
    return " ".join(shlex.quote(w) for w in words)


__all__ = ["DebuggerSession", "Blocks", "frontend_candidates", "interrupted", "command_line"]
