#include "model/provenance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "base/phase_timer.h"
#include "base/progress.h"

namespace heapscope {

namespace {

// The allocation functions whose callers are the program: C's, C++'s, and the allocators' own names for
// them (jemalloc's je_ and *allocx, tcmalloc's tc_).
bool is_allocation_entry(std::string_view function) {
  if (function.rfind("operator new", 0) == 0) return true;
  const auto paren = function.find('(');
  std::string_view name = function.substr(0, paren);
  for (const std::string_view prefix : {"je_", "tc_"})
    if (name.rfind(prefix, 0) == 0) name.remove_prefix(prefix.size());
  for (const std::string_view entry : {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
                                       "memalign", "valloc", "pvalloc", "mallocx", "rallocx", "xallocx", "strdup",
                                       "strndup", "__libc_malloc", "__libc_calloc", "__libc_realloc"})
    if (name == entry) return true;
  return false;
}

// How many of `frames` (innermost first) are the allocator's: up to the outermost allocation entry point
// (operator new calls malloc), else the leading frames in the allocator's own module.
std::size_t allocator_frame_count(const std::vector<Frame>& frames, const Image& image, const Module* allocator) {
  for (std::size_t i = frames.size(); i-- > 0;)
    if (is_allocation_entry(frames[i].function)) return i + 1;
  std::size_t n = 0;
  while (allocator && n < frames.size() && image.module_at(frames[n].pc) == allocator) ++n;
  return n == frames.size() ? 0 : n;
}

// Whether a block the walk has starts at `at` though it is not allocated: a sampled block freed since,
// cached by a thread (its extent keeps the stale profiling context until it is handed out again).
bool freed_block_at(const HeapModel& heap, Address at) {
  const Block* first = heap.blocks.begin();
  const Block* last = first + heap.blocks.size();
  const Block* it = std::partition_point(first, last, [at](const Block& b) { return b.address() < at; });
  return it != last && it->address() == at && !is_allocated(it->state);
}

// A site from return addresses: symbolized, the allocator's own frames cut off.
AllocationSite native_site(const Image& image, const SymbolIndex& symbols, const DwarfFiles& dwarf,
                           const Module* allocator_module, const std::vector<Address>& stack) {
  AllocationSite made;
  made.stack = stack;
  made.frames = symbolize_return_addresses(image, symbols, dwarf, made.stack);
  made.allocator_frames = allocator_frame_count(made.frames, image, allocator_module);
  made.frames.erase(made.frames.begin(), made.frames.begin() + static_cast<std::ptrdiff_t>(made.allocator_frames));
  return made;
}

// A site from an interpreter's source locations: its frames as they are.
AllocationSite source_site(const std::vector<SourceFrame>& stack) {
  AllocationSite made;
  for (const SourceFrame& f : stack) {
    Frame frame;
    frame.function = f.function;
    frame.file = f.file;
    frame.line = static_cast<int>(f.line);
    made.frames.push_back(std::move(frame));
  }
  return made;
}

}  // namespace

std::string AllocationSite::label() const {
  if (!frames.empty()) return frames.front().describe();
  return stack.empty() ? std::string("(no frames)") : fmt::format("0x{:x}", stack.front());
}

const SampledBlock* Provenance::of(BlockId b) const {
  const auto it = std::lower_bound(blocks.begin(), blocks.end(), b,
                                   [](const SampledBlock& s, BlockId id) { return s.block < id; });
  return it != blocks.end() && it->block == b ? &*it : nullptr;
}

double unsampling_weight(std::uint64_t bytes, std::uint64_t interval) {
  if (interval <= 1 || bytes == 0) return 1.0;
  return 1.0 / -std::expm1(-static_cast<double>(bytes) / static_cast<double>(interval));
}

Provenance build_provenance(const Image& image, const SymbolIndex& symbols, const DwarfFiles& dwarf,
                            const HeapModel& heap, const BlockIndex* index, const Module* allocator_module,
                            AllocationSamples samples) {
  PhaseTimer timer("provenance");
  Provenance p;
  p.supported = samples.supported;
  p.source = std::move(samples.source);
  p.enabled = samples.enabled;
  p.mean_interval = samples.mean_interval;
  p.how_to_enable = std::move(samples.how_to_enable);
  p.how_to_sample_all = std::move(samples.how_to_sample_all);
  p.other_arenas = std::move(samples.other_arenas);
  p.other_arenas_why = std::move(samples.other_arenas_why);
  p.warnings = std::move(samples.warnings);
  // Only the stacks some block of the walk has become sites, in the order first met.
  const bool source = !samples.source_stacks.empty();
  const std::size_t stack_count = source ? samples.source_stacks.size() : samples.stacks.size();
  std::vector<std::uint32_t> site_of_stack(stack_count, ~std::uint32_t{0});
  for (const AllocationSample& s : samples.samples) {
    const BlockId b = index->starting_at(s.block);
    if (b == kNoBlock || s.stack >= stack_count) {
      if (!freed_block_at(heap, s.block)) ++p.unmatched;
      continue;
    }
    std::uint32_t& site = site_of_stack[s.stack];
    if (site == ~std::uint32_t{0}) {
      progress_check();
      site = static_cast<std::uint32_t>(p.sites.size());
      p.sites.push_back(source ? source_site(samples.source_stacks[s.stack])
                               : native_site(image, symbols, dwarf, allocator_module, samples.stacks[s.stack]));
    }
    AllocationSite& a = p.sites[site];
    const std::uint64_t bytes = heap.blocks[b].usable_size();
    const double weight = unsampling_weight(bytes, p.mean_interval.value_or(1));
    ++a.blocks;
    a.bytes += bytes;
    a.estimated_blocks += weight;
    a.estimated_bytes += weight * static_cast<double>(bytes);
    p.blocks.push_back({b, site, s.requested, s.time_ns});
  }
  if (p.unmatched)
    p.warnings.push_back(fmt::format("{} sampled allocation{} at no allocated block of the walk; left out", p.unmatched,
                                     p.unmatched == 1 ? " lies" : "s lie"));
  // Most bytes first; the blocks keep their sites' new indexes.
  std::vector<std::uint32_t> order(p.sites.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return p.sites[a].estimated_bytes > p.sites[b].estimated_bytes;
  });
  std::vector<std::uint32_t> rank(order.size());
  std::vector<AllocationSite> sorted;
  sorted.reserve(order.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = i;
    sorted.push_back(std::move(p.sites[order[i]]));
  }
  p.sites = std::move(sorted);
  for (SampledBlock& s : p.blocks) s.site = rank[s.site];
  std::sort(p.blocks.begin(), p.blocks.end(), [](const SampledBlock& a, const SampledBlock& b) { return a.block < b.block; });
  return p;
}

}  // namespace heapscope
