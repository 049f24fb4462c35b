"""A program run on a pseudo-terminal, for the end-to-end tests of what a user at a terminal sees: a
debugger's prompt, Ctrl-C (the terminal turns the byte 0x03 into SIGINT for the foreground process
group, exactly as when a user presses it), and heapscope's progress line (shown only on a terminal)."""

import errno
import os
import pty
import re
import select
import signal
import struct
import termios
import fcntl
import time

# Escape sequences a line editor (LLDB's editline, GDB's readline) or the progress line writes.
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")
# What screen_lines() draws: line ends, carriage returns, escape sequences, and runs of other text.
_SCREEN_TOKENS = re.compile(r"\n|\r|\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|[^\n\r\x1b]+")


class PtyProgram:
    """argv started on a new pseudo-terminal (its controlling terminal; 200 columns) with env. `output`
    holds everything it wrote, escape sequences removed; positions in it are what expect() returns."""

    def __init__(self, argv, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its stdin, stdout, stderr and controlling terminal
            try:
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self._raw = b""
        self.exit_status = None

    @property
    def output(self):
        return _ESCAPES.sub(b"", self._raw).decode("utf-8", errors="replace")

    def screen_lines(self):
        """The lines the terminal shows after everything written so far, as a terminal draws them: a
        carriage return goes back to the line's start, `ESC [ K` erases to the line's end, text overwrites;
        other escape sequences draw nothing."""
        lines, line, column = [], [], 0
        for token in _SCREEN_TOKENS.finditer(self._raw.decode("utf-8", errors="replace")):
            text = token.group()
            if text == "\n":
                lines.append("".join(line).rstrip())
                line, column = [], 0
            elif text == "\r":
                column = 0
            elif text == "\x1b[K":
                del line[column:]
            elif not text.startswith("\x1b"):
                for char in text:
                    line[column:column + 1] = [char]
                    column += 1
        return lines + ["".join(line).rstrip()]

    def _read(self, timeout):
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError as e:  # EIO: the program closed the terminal (it exited)
            if e.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self._reap(block=True)
            return None
        self._raw += data
        return True

    def expect(self, pattern, timeout, start=0):
        """Waits until `pattern` (a regex) matches output from `start` on; returns the match (its end() is
        a position in output). Fails with the output so far after `timeout` seconds or when the program
        ended without printing it."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.output, start)
            if match:
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout} s; output:\n{self.output[-4000:]}")
            if self._read(left) is None:
                match = regex.search(self.output, start)
                if match:
                    return match
                raise AssertionError(f"the program ended (status {self.exit_status}) without printing "
                                     f"{pattern!r}; output:\n{self.output[-4000:]}")

    def send(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def interrupt(self):
        """Ctrl-C, as typed: the terminal sends SIGINT to its foreground process group."""
        self.send(b"\x03")

    def wait(self, timeout):
        """The exit status (as subprocess gives it: negative for a signal) once the program ends; reads
        its output meanwhile. Fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.exit_status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the program did not end within {timeout} s; output:\n{self.output[-4000:]}")
            if self._read(min(left, 0.05)) is False:
                self._reap(block=False)
        return self.exit_status

    def _reap(self, block):
        if self.exit_status is not None:
            return
        pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        if pid == self.pid:
            self.exit_status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def close(self):
        if self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reap(block=True)
        os.close(self.fd)
