// jemalloc's heap profiling as allocation samples: with MALLOC_CONF=prof:true, jemalloc samples
// allocations (one per 2^lg_prof_sample bytes on average; lg_prof_sample:0 samples all) and keeps, with
// each sampled block's extent, the stack that allocated it (jemalloc_layout.h, ProfLayout). Read only when
// asked; when the image says profiling is off, nothing is walked.
#pragma once

#include "heap/allocation_samples.h"
#include "image/image.h"
#include "runtime/jemalloc/jemalloc_runtime.h"

namespace heapscope::jemalloc {

AllocationSamples read_allocation_samples(const Image& image, const Runtime& rt);

}  // namespace heapscope::jemalloc
