// The allocation stacks heapscope's own recorder (libheapscope_sites.so, recorder/) kept in a glibc
// program: glibc's malloc records none, so a program started with the recorder preloaded carries a table
// of its sampled blocks and their stacks in an anonymous mapping (recorder/sites_table.h). It is found by
// its magic at a mapping's start — no symbols needed, so a stripped program's core has it too — and read
// with every index and count checked against the table's own bounds: the table is read from a process
// that may have been stopped mid-update, or a core that is damaged.
#pragma once

#include "heap/allocation_samples.h"
#include "image/image.h"

namespace heapscope {

// What to tell a user whose glibc program runs without the recorder.
inline constexpr const char* kSitesRecorderHowTo =
    "start the program with `heapscope record -- PROGRAM` (or LD_PRELOAD=/usr/local/lib/heapscope/"
    "libheapscope_sites.so; HEAPSCOPE_SAMPLE_BYTES=1 samples every allocation)";
inline constexpr const char* kSitesRecorderSampleAll =
    "`heapscope record --every 1 -- PROGRAM` samples every allocation (HEAPSCOPE_SAMPLE_BYTES=1 with the library "
    "preloaded)";

// The recorder's samples in `image`. `supported` is always true (the recorder can be used with any glibc
// program); `enabled` is true when the table or the recorder's library is found, false otherwise.
AllocationSamples read_sites_recorder(const Image& image);

}  // namespace heapscope
