// Allocation stacks an allocator keeps of its own sampled blocks (jemalloc's heap profiling, tcmalloc's
// sampled spans; an interpreter's recorder, tracemalloc, of every block it traced), read raw from the image: which block, the return addresses of the allocating call, the
// size asked for. An allocator plug-in fills it (LocatedAllocator::allocation_samples); the session's
// provenance product (model/provenance.h) matches the blocks and symbolizes the stacks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image/image.h"

namespace heapscope {

// A frame of a stack an interpreter recorded as source locations (tracemalloc's traceback: no addresses).
struct SourceFrame {
  std::string function;  // empty when the recorder keeps none (tracemalloc keeps files and lines only)
  std::string file;
  std::uint32_t line = 0;
};

struct AllocationSample {
  Address block = 0;              // the user pointer of the sampled block
  std::uint64_t requested = 0;    // bytes the program asked for; 0 when not recorded
  std::uint64_t time_ns = 0;      // when it was allocated (the allocator's clock); 0 when not recorded
  std::uint32_t stack = 0;        // index into AllocationSamples::stacks (source_stacks when it has any)
};

struct AllocationSamples {
  // Whether this allocator can keep allocation stacks at all (false: heapscope knows no way it records
  // them; nothing else below is meaningful then).
  bool supported = false;
  std::string source;  // "jemalloc heap profiling (prof)"
  // Whether sampling was on in the process; nullopt when the image does not say (its switch was not found).
  std::optional<bool> enabled;
  // The mean number of bytes allocated between two samples (jemalloc: 2^lg_prof_sample); 1: every
  // allocation is sampled. nullopt when unknown: then counts cannot be estimated.
  std::optional<std::uint64_t> mean_interval;
  // How to turn sampling on for this allocator, for a process started anew ("MALLOC_CONF=prof:true"), and
  // how to sample every allocation (what a small heap sampled at the default rate needs); empty when the
  // first says it.
  std::string how_to_enable;
  std::string how_to_sample_all;
  // Arenas of another allocator in the same model (a collector's beside malloc's), whose blocks these
  // samples never cover, and why they have no sites.
  std::vector<std::uint16_t> other_arenas;
  std::string other_arenas_why;
  std::vector<std::vector<Address>> stacks;  // distinct stacks, innermost return address first
  // Distinct stacks as the interpreter's own recorder keeps them (innermost first), in place of `stacks`.
  std::vector<std::vector<SourceFrame>> source_stacks;
  std::vector<AllocationSample> samples;     // in address order
  std::vector<std::string> warnings;
};

}  // namespace heapscope
