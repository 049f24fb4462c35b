"""Real programs on Boehm GC, read by the collector's own rules: what `leaks` calls garbage the next
collection frees, on a core taken while the program waits, against what the program's own collection then
frees (GC_get_free_bytes() before and after GC_gcollect(), which the program prints).

The collector gives back a page when none of its objects survives, so the figure compared is `leaks`'
whole_page_bytes. GC_UNMAP_THRESHOLD=0 keeps the collector from unmapping pages freed at earlier
collections during this one (which would lower GC_get_free_bytes() by what it did not free now). A
conservative collector's verdict also depends on the stacks at the moment it runs, which differ from the
stacks in the core by what the program did in between (reading a line, printing): hence a margin."""

import os
import shutil
import subprocess
import unittest

from heapscope_e2e import heapscope_json, work_dir
from test_attach import take_core

GUILE = "/usr/bin/guile-3.0"
ECL = shutil.which("ecl")
MARGIN = 0.10

# Pairs and strings, most dropped as the loop goes: the garbage made since the collector last ran.
GUILE_PROGRAM = r"""
(use-modules (ice-9 rdelim))
(define (free-bytes) (assq-ref (gc-stats) 'heap-free-size))
(define keep '())
(let loop ((i 0))
  (when (< i 300000)
    (set! keep (cons (make-string 40 #\a) (if (< (random 10) 3) keep '())))
    (loop (+ i 1))))
(display "READY\n") (force-output)
(read-line)
(let* ((before (free-bytes)) (after (begin (gc) (free-bytes))))
  (display "freed ") (display (- after before)) (newline) (force-output))
(read-line)
"""

# A list of 200,000 vectors dropped, 100,000 strings kept; the collector's functions compiled in (ECL
# compiles through the C compiler) before any of it is made.
ECL_PROGRAM = r"""
(defun gc-free-bytes () (ffi:c-inline () () :unsigned-long "GC_get_free_bytes()" :one-liner t))
(defun gc-collect () (ffi:c-inline () () :void "GC_gcollect()" :one-liner t))
(compile 'gc-free-bytes)
(compile 'gc-collect)
(defvar *keep* nil)
(defvar *big* (loop for i below 200000 collect (make-array 8 :initial-element i)))
(loop for i below 100000 do (push (format nil "string number ~D" i) *keep*))
(setf *big* nil)
(format t "~%READY~%")
(finish-output)
(read-line)
(let* ((before (gc-free-bytes)) (after (progn (gc-collect) (gc-free-bytes))))
  (format t "freed ~D~%" (- after before)))
(finish-output)
(read-line)
(ext:quit 0)
"""


def garbage_against_collection(command, name):
    """Runs `command` until READY, takes its core, lets it collect; returns (what it freed, `leaks`' report)."""
    core = os.path.join(work_dir(), name + ".core")
    program = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=dict(os.environ, GC_UNMAP_THRESHOLD="0"))
    try:
        for line in program.stdout:
            if line.strip() == "READY":
                break
        else:
            raise AssertionError(f"{name} ended before READY (exit status {program.wait()})")
        take_core(program.pid, core)
        program.stdin.write("collect\n")
        program.stdin.flush()
        words = program.stdout.readline().split()
        if words[:1] != ["freed"]:
            raise AssertionError(f"{name} printed {words!r}, not what its collection freed")
        program.stdin.write("exit\n")
        program.stdin.close()
        program.wait(timeout=60)
        return int(words[1]), heapscope_json("leaks", core)
    finally:
        if program.poll() is None:
            program.kill()
            program.wait()
        if os.path.exists(core):
            os.remove(core)


class NextCollection:
    COMMAND = None
    NAME = None
    AT_LEAST = 0  # bytes the collection must free for the comparison to mean something

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(work_dir(), cls.NAME + ".program"), "w", encoding="ascii") as f:
            f.write(cls.PROGRAM)
            cls.program_file = f.name
        cls.freed, cls.leaks = garbage_against_collection([*cls.COMMAND, cls.program_file], cls.NAME)

    def test_the_garbage_is_what_the_collection_frees(self):
        self.assertGreater(self.freed, self.AT_LEAST)
        garbage = self.leaks["collectable"]
        self.assertEqual(garbage["collector"], "Boehm GC")
        self.assertLessEqual(abs(garbage["whole_page_bytes"] - self.freed), MARGIN * self.freed,
                             (garbage["whole_page_bytes"], self.freed))


@unittest.skipUnless(os.access(GUILE, os.X_OK), "Guile 3.0 is not installed (apt-get install guile-3.0)")
class GuileNextCollection(NextCollection, unittest.TestCase):
    COMMAND = [GUILE, "--no-auto-compile"]
    NAME = "guile-garbage"
    PROGRAM = GUILE_PROGRAM
    AT_LEAST = 128 * 1024


@unittest.skipUnless(ECL, "ECL is not installed (apt-get install ecl)")
class EclNextCollection(NextCollection, unittest.TestCase):
    COMMAND = [ECL or "ecl", "--norc", "--load"]
    NAME = "ecl-garbage"
    PROGRAM = ECL_PROGRAM
    AT_LEAST = 16 * 1024 * 1024
