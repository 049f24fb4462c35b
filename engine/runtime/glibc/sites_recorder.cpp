#include "runtime/glibc/sites_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "recorder/sites_table.h"

namespace heapscope {

namespace {

bool recorder_loaded(const Image& image) {
  return std::any_of(image.modules().begin(), image.modules().end(),
                     [](const Module& m) { return m.name() == HS_SITES_LIBRARY; });
}

// The table's header at the start of a writable anonymous mapping; nullopt when there is none.
std::optional<std::pair<Address, hs_sites_header>> find_table(const Image& image) {
  for (const MemoryRegion& r : image.regions()) {
    if (!r.readable || !r.writable || !r.backing_path.empty() || r.size() < sizeof(hs_sites_header)) continue;
    char magic[sizeof hs_sites_header::magic];
    if (image.read(r.start, magic, sizeof magic) != sizeof magic ||
        std::memcmp(magic, HS_SITES_MAGIC, sizeof magic) != 0)
      continue;
    hs_sites_header header;
    if (image.read(r.start, &header, sizeof header) != sizeof header) continue;
    // A table bigger than its mapping is damaged: its counts must not size what heapscope reads.
    if (header.mapping_bytes > r.size()) header.mapping_bytes = 0;
    return std::pair{r.start, header};
  }
  return std::nullopt;
}

bool power_of_two(std::uint64_t n) { return n && (n & (n - 1)) == 0; }

// Why the header cannot be read as version 1's, or empty when it can.
std::string header_problem(const hs_sites_header& h) {
  if (h.version != HS_SITES_VERSION) return fmt::format("its version is {}, heapscope reads {}", h.version, HS_SITES_VERSION);
  const bool sizes_agree =
      h.header_bytes == sizeof(hs_sites_header) && h.max_frames == HS_SITES_MAX_FRAMES &&
      power_of_two(h.sample_slots) && power_of_two(h.stack_slots) && h.stack_slots <= HS_SITES_NO_STACK &&
      // Bounded before they are multiplied: a damaged count must not wrap the checks below.
      h.sample_slots <= h.mapping_bytes / sizeof(hs_sites_sample) &&
      h.stack_slots <= h.mapping_bytes / sizeof(hs_sites_stack) &&
      h.samples_offset >= sizeof(hs_sites_header) &&
      h.samples_offset + h.sample_slots * sizeof(hs_sites_sample) <= h.stacks_offset &&
      h.stacks_offset + h.stack_slots * sizeof(hs_sites_stack) <= h.mapping_bytes && h.mean_interval > 0;
  return sizes_agree ? "" : "its sizes and offsets do not agree";
}

}  // namespace

AllocationSamples read_sites_recorder(const Image& image) {
  AllocationSamples out;
  out.supported = true;
  out.source = "heapscope's recorder (libheapscope_sites.so)";
  out.how_to_enable = kSitesRecorderHowTo;
  out.how_to_sample_all = kSitesRecorderSampleAll;
  const auto found = find_table(image);
  if (!found) {
    // Loaded but no table: nothing was sampled yet (the table is made at the first sample).
    out.enabled = recorder_loaded(image);
    return out;
  }
  // Named, not bound: clang 14 cannot capture structured bindings in the lambda below.
  const Address at = found->first;
  const hs_sites_header& h = found->second;
  out.enabled = true;
  if (const std::string problem = header_problem(h); !problem.empty()) {
    out.warnings.push_back(fmt::format("the allocation-site table at {:#x} is not read: {}", at, problem));
    return out;
  }
  out.mean_interval = h.mean_interval;
  if (h.samples_dropped)
    out.warnings.push_back(fmt::format(
        "the recorder's table was full: {} of {} samples were dropped (HEAPSCOPE_SITES_SLOTS sets its size)",
        h.samples_dropped, h.samples_taken));
  if (h.stacks_dropped)
    out.warnings.push_back(fmt::format("sampled blocks without a stack: {} (the recorder's stack table was full)",
                                       h.stacks_dropped));
  std::vector<hs_sites_sample> slots(h.sample_slots);
  const std::size_t sample_bytes = slots.size() * sizeof(hs_sites_sample);
  if (image.read(at + h.samples_offset, slots.data(), sample_bytes) != sample_bytes) {
    out.warnings.push_back(fmt::format("the allocation-site table at {:#x} cannot be read whole", at));
    return out;
  }
  // Stacks are read as the samples name them, each once.
  std::unordered_map<std::uint32_t, std::uint32_t> stack_of_slot;
  std::uint64_t bad_stacks = 0;
  auto stack_index = [&](std::uint32_t slot) -> std::optional<std::uint32_t> {
    if (slot >= h.stack_slots) return std::nullopt;
    if (const auto it = stack_of_slot.find(slot); it != stack_of_slot.end()) return it->second;
    hs_sites_stack stack;
    const Address where = at + h.stacks_offset + std::uint64_t{slot} * sizeof stack;
    if (image.read(where, &stack, sizeof stack) != sizeof stack || stack.hash == 0 || stack.depth == 0 ||
        stack.depth > HS_SITES_MAX_FRAMES)
      return std::nullopt;
    const auto index = static_cast<std::uint32_t>(out.stacks.size());
    out.stacks.emplace_back(stack.frames, stack.frames + stack.depth);
    stack_of_slot.emplace(slot, index);
    return index;
  };
  for (const hs_sites_sample& s : slots) {
    if (s.hidden_address == HS_SITES_EMPTY) continue;
    const std::optional<std::uint32_t> stack = stack_index(s.stack);
    if (!stack) {
      ++bad_stacks;
      continue;
    }
    out.samples.push_back({~s.hidden_address, s.requested, h.start_time_ns + s.time_ns, *stack});
  }
  if (bad_stacks > h.stacks_dropped)
    out.warnings.push_back(fmt::format("samples of the allocation-site table that name no readable stack: {}",
                                       bad_stacks - h.stacks_dropped));
  std::sort(out.samples.begin(), out.samples.end(),
            [](const AllocationSample& a, const AllocationSample& b) { return a.block < b.block; });
  return out;
}

}  // namespace heapscope
