// tracemalloc's traces as allocation sites (CPython 3.9 to 3.13). A process run with tracemalloc on
// (PYTHONTRACEMALLOC=N, -X tracemalloc, tracemalloc.start()) keeps, for every block the interpreter
// allocated since, a trace: the block's address → {size, traceback}, the traceback being the file and line of
// each of the allocating Python frames, innermost first (N of them, 1 by default). tracemalloc reads them
// only in the running process; heapscope reads them from the core as well.
// The table is found by structure (Debian's python3 is stripped, and 3.9-3.11 keep it in a static): the
// interpreter's data points to each of tracemalloc's hash tables (_Py_hashtable_t: nentries, nbuckets,
// buckets, get_entry, hash, compare, ...), which it creates at start-up whether it traces or not; the
// traces' hashes pointers with _Py_hashtable_hash_ptr (exported) and its entries {next, hash, key, value}
// hold traces, whose tracebacks ({hash, u16 nframe, u16 total_nframe, packed {filename, u32 line}[]}) name
// their files with str objects. The tables of other domains than the interpreter's own (a C extension's
// PyTraceMalloc_Track) are not read.
#pragma once

#include <functional>
#include <optional>

#include "heap/allocation_samples.h"
#include "image/image.h"
#include "runtime/module_data.h"
#include "symbols/symbol_index.h"

namespace heapscope::cpython {

// Where to look: the interpreter's writable data, the address of its _Py_hashtable_hash_ptr (0: not
// found, and nothing is read), and of the int that says whether tracemalloc traces (its config's
// `tracing`: in _Py_tracemalloc_config to 3.11, in _PyRuntime from 3.12; 0: unknown).
struct TracemallocPlace {
  const Module* module = nullptr;  // the interpreter
  WritableRanges data;
  Address hash_ptr_function = 0;
  Address tracing_flag = 0;
  int minor = 0;
};

// The place of the interpreter in `module` whose writable data is `data`.
TracemallocPlace tracemalloc_place(const SymbolIndex& symbols, const Module& module, WritableRanges data, int minor);

AllocationSamples tracemalloc_samples(const Image& image, const TracemallocPlace& place);

// tracemalloc's own blocks in the traces' table, for the scan and for their names: the table, its buckets,
// and per trace its entry ({next, hash, key, value}: the key, a traced block's address, is no reference),
// the trace ({size, traceback}) and its traceback; and the entries of the interpreter's other hash tables
// its data points to (tracemalloc's tracebacks and file names, 3.12's interned strings: the hash and
// compare functions the interpreter's), whose blocks end after their four words. Nothing when the
// traces' table is not found.
struct TracemallocBlocks {
  Address table = 0, buckets = 0;
  std::vector<Address> entries, traces, tracebacks;  // tracebacks: distinct
  std::vector<Address> other_tables, other_entries;
};
std::optional<TracemallocBlocks> tracemalloc_blocks(const Image& image, const TracemallocPlace& place);

}  // namespace heapscope::cpython
