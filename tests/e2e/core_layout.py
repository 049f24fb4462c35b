"""ELF64 cores rewritten, for tests of damaged cores and for the fuzz seeds: the program headers read, and
a core laid out again with its notes first (as the kernel writes them; gdb writes them last) or last, and
its memory segments optionally clipped to a few bytes each (a small core that is still a real one)."""

import struct

PT_LOAD, PT_NOTE = 1, 4
ELF_HEADER_SIZE, PROGRAM_HEADER_SIZE = 64, 56


def program_headers(core):
    """[type, flags, offset, vaddr, paddr, filesz, memsz, align] of each program header."""
    table, = struct.unpack_from("<Q", core, 0x20)
    entry_size, count = struct.unpack_from("<HH", core, 0x36)
    return [list(struct.unpack_from("<IIQQQQQQ", core, table + i * entry_size)) for i in range(count)]


def relaid(core, notes_first=True, segment_bytes=None):
    """The core laid out again: header, program headers, then the notes and each PT_LOAD's bytes (in
    address order), the notes first or last. segment_bytes clips every PT_LOAD's file bytes (its memory
    size stays: the rest reads as left out of the core) and packs them without page alignment. No section headers: a core needs
    none below 65535 segments."""
    headers = program_headers(core)
    header = bytearray(core[:ELF_HEADER_SIZE])
    struct.pack_into("<Q", header, 0x20, ELF_HEADER_SIZE)  # e_phoff
    struct.pack_into("<Q", header, 0x28, 0)                # e_shoff
    struct.pack_into("<HHH", header, 0x3A, 0, 0, 0)        # e_shentsize, e_shnum, e_shstrndx
    body = bytearray()
    start = ELF_HEADER_SIZE + len(headers) * PROGRAM_HEADER_SIZE
    for h in sorted(headers, key=lambda h: ((h[0] == PT_NOTE) != notes_first, h[3])):
        if h[0] == PT_LOAD and segment_bytes is not None:
            h[5] = min(h[5], segment_bytes)
        if h[5] == 0:
            continue
        if h[0] != PT_NOTE and segment_bytes is None:  # page-aligned like a real core, unless kept small
            body += bytes(-(start + len(body)) % 4096)
        offset = start + len(body)
        body += core[h[2]:h[2] + h[5]]
        h[2] = offset
    return bytes(header) + b"".join(struct.pack("<IIQQQQQQ", *h) for h in headers) + bytes(body)
