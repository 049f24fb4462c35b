// CPython's small-object allocator (pymalloc, obmalloc.c; 3.8 and later, 64-bit), walked as a heap beside
// malloc's. Requests of up to 512 bytes are served from pools: pages of 4 KiB (3.8, 3.9) or 16 KiB (3.10+
// with its radix tree) carved into slots of one size class (16-byte steps), inside arenas mmap'ed
// anonymously. Every pool starts with a 48-byte header,
//   { count; freeblock; nextpool; prevpool; uint arenaindex, szidx, nextoffset, maxnextoffset }
// whose sizes say the pool's size (maxnextoffset + slot size) and how far it has been carved (nextoffset);
// its free slots are the list from freeblock. The pools are found by that header alone (Debian's python3
// is stripped: its arena table and used-pool lists are static), each checked: a pool-aligned address, a
// size class, offsets that fit the class and the pool, a count no larger than the carved slots, and — for
// a partly used pool — the neighbours of the used-pool list pointing back to it. A slot is in use when
// carved and not on the free list; the tail never carved is free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "runtime/cpython/cpython_tracemalloc.h"
#include "symbols/symbol_index.h"

namespace heapscope::pymalloc {

// One pool, as its header says.
struct Pool {
  Address address = 0;
  std::uint32_t count = 0;          // slots in use, by the header
  Address freeblock = 0;
  std::uint32_t arena_index = 0;
  std::uint32_t size_class = 0;     // szidx: slots of 16 * (szidx + 1) bytes
  std::uint32_t next_offset = 0;    // where the next never-used slot starts
  std::uint32_t pool_bytes = 0;     // 4096 or 16384
  std::uint64_t slot_bytes() const { return 16 * (std::uint64_t{size_class} + 1); }
};

struct Runtime {
  const Module* module = nullptr;  // the interpreter (python3.11, libpython3.12.so.1.0)
  std::string version;             // "3.11" from the module's name; empty when it does not say
  std::vector<Pool> pools;         // in address order
  std::vector<HeapSegment> not_roots;  // the interpreter's words that are no references (cpython_roots.h)
  std::vector<InterpreterFrame> frames;  // its threads' frames (cpython_frames.h)
  cpython::TracemallocPlace tracemalloc;  // where its traces are looked for (cpython_tracemalloc.h)
};

// Every pymalloc pool in the image's anonymous writable memory; nothing with *why_not when none is (no
// interpreter, or PYTHONMALLOC=malloc).
std::optional<Runtime> locate_runtime(const Image& image, const SymbolIndex& symbols, std::string* why_not);

HeapModel walk_heap(const Image& image, const Runtime& rt);

// The walk again, every problem it meets recorded as a finding.
HeapVerification verify_heap(const Image& image, const Runtime& rt);

}  // namespace heapscope::pymalloc
