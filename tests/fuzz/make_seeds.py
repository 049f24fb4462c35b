#!/usr/bin/env python3
"""Writes the committed seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/) from a build tree:
- core_file: a real gdb core of leak_shapes (captured by the e2e tests into BUILD/tests/e2e-work), laid
  out with its notes first and last, every memory segment clipped to 256 bytes: all of its notes (threads,
  mappings, auxv), every segment header, a few KB in all; and the notes-last one compressed in each format
  heapscope opens (zstd, lz4, xz, gzip: by the tools of those names);
- elf_symbols: small real modules of the fixtures: a C debug file with types, a C++ program, a library;
- heap_walk: the hand-made arena's own bytes (fuzz_replay_heap_walk --write-seed).
Usage: tests/fuzz/make_seeds.py BUILD_DIR"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from core_layout import relaid  # noqa: E402

SEGMENT_BYTES = 256
ELF_SEEDS = ("tests/fixtures/typed_c-debug/typed_c.debug", "tests/fixtures/retention/retention_tree",
             "tests/fixtures/leaks/libleak_anchor.so")


def main(build):
    corpus = os.path.join(HERE, "corpus")
    with open(os.path.join(build, "tests", "e2e-work", "leaks-leak_shapes.core"), "rb") as f:
        core = f.read()
    for notes_first, name in ((True, "leak_shapes-notes-first"), (False, "leak_shapes-notes-last")):
        with open(os.path.join(corpus, "core_file", name), "wb") as f:
            f.write(relaid(core, notes_first=notes_first, segment_bytes=SEGMENT_BYTES))
    last = os.path.join(corpus, "core_file", "leak_shapes-notes-last")
    for tool, arguments, suffix in (("zstd", ["-q", "-c"], "zstd"), ("lz4", ["-q", "-c"], "lz4"),
                                    ("xz", ["-c"], "xz"), ("gzip", ["-c", "-n"], "gzip")):
        with open(last, "rb") as source, open(f"{last}-{suffix}", "wb") as sink:
            subprocess.run([tool, *arguments], stdin=source, stdout=sink, check=True)
    for path in ELF_SEEDS:
        shutil.copyfile(os.path.join(build, path), os.path.join(corpus, "elf_symbols", os.path.basename(path)))
    subprocess.run([os.path.join(build, "tests", "fuzz", "fuzz_replay_heap_walk"), "--write-seed",
                    os.path.join(corpus, "heap_walk", "synthetic-arena")], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
