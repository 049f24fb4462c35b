// Provenance: where the blocks of the heap were allocated, as far as the allocator itself recorded it
// (heap profiling's sampled stacks, heap/allocation_samples.h). Each sampled block is matched to the walk's
// block at its address and its stack symbolized once per distinct stack; blocks are tallied per site (one
// distinct stack). When not every allocation was sampled, each sampled block stands for the unsampled
// ones the way jeprof counts them: a block of s bytes, sampled with probability 1 - exp(-s/R) at a mean
// interval of R bytes, counts 1/(1 - exp(-s/R)) times. Unsampled blocks have no site; nothing is guessed.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwarf/dwarf_files.h"
#include "frames/unwind.h"
#include "heap/allocation_samples.h"
#include "heap/heap_model.h"
#include "model/block_index.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct AllocationSite {
  // The program's frames, innermost first: the stack without the allocator's own frames (its profiling
  // and malloc's), symbolized.
  std::vector<Frame> frames;
  std::vector<Address> stack;  // every return address as the allocator recorded it
  std::size_t allocator_frames = 0;  // how many of `stack` lead into the program's frames
  std::uint64_t blocks = 0, bytes = 0;  // sampled blocks of the heap with this stack (usable bytes)
  double estimated_blocks = 0, estimated_bytes = 0;  // what they stand for (equal to the above when exact)
  // "cache_entry() at sites.c:31", or the raw pc of the innermost frame when none of the program's is known.
  std::string label() const;
};

struct SampledBlock {
  BlockId block = 0;
  std::uint32_t site = 0;  // index into Provenance::sites
  std::uint64_t requested = 0;
  std::uint64_t time_ns = 0;
};

struct Provenance {
  bool supported = false;  // the allocator can record allocation stacks (AllocationSamples::supported)
  std::string source;
  std::optional<bool> enabled;
  std::optional<std::uint64_t> mean_interval;  // bytes; 1: every allocation sampled
  std::string how_to_enable;
  std::string how_to_sample_all;
  std::vector<std::uint16_t> other_arenas;  // AllocationSamples::other_arenas
  std::string other_arenas_why;
  std::vector<AllocationSite> sites;  // most estimated bytes first
  std::vector<SampledBlock> blocks;   // by block id
  std::uint64_t unmatched = 0;        // samples at no allocated block of the walk
  std::vector<std::string> warnings;

  bool exact() const { return mean_interval == 1; }
  // Sites are present: sampling was on (or is not known to be off) and at least one block has a site.
  bool present() const { return !blocks.empty(); }
  const SampledBlock* of(BlockId b) const;
};

// The unsampling weight of one sampled block of `bytes` bytes at a mean sampling interval of `interval`
// bytes (jeprof's): 1 when every allocation is sampled.
double unsampling_weight(std::uint64_t bytes, std::uint64_t interval);

// `index` may be null when `samples` holds none. `allocator_module` is the module serving malloc (its leading frames are the allocator's), or null.
Provenance build_provenance(const Image& image, const SymbolIndex& symbols, const DwarfFiles& dwarf,
                            const HeapModel& heap, const BlockIndex* index, const Module* allocator_module,
                            AllocationSamples samples);

}  // namespace heapscope
