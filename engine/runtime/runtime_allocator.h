// The LocatedAllocator every allocator plug-in returns once it has located its allocator: the allocator's
// walk, checks, trimming rules, allocation samples and arena ownership as functions of the image and the
// runtime the plug-in located. Each plug-in gives the functions its allocator has (a walk always); what it
// leaves out is LocatedAllocator's default (no checks, no trimming rules, no samples, no arena of its own).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/allocator.h"

namespace heapscope {

template <class Runtime>
struct AllocatorFunctions {
  std::string_view name;
  HeapModel (*walk)(const Image&, const Runtime&) = nullptr;
  HeapVerification (*verify)(const Image&, const Runtime&, const HeapModel&) = nullptr;
  std::optional<ArenaTrim> (*arena_trim)(const HeapModel&, std::size_t arena, std::size_t max_blockers,
                                         std::uint64_t page_bytes) = nullptr;
  AllocationSamples (*samples)(const Image&, const Runtime&) = nullptr;
  bool (*owns_arena)(const Runtime&, const ArenaInfo&) = nullptr;
};

// What an allocator that keeps no allocation stacks heapscope reads says of them: `source` names it, `why`
// says so and what would.
inline AllocationSamples no_allocation_stacks(std::string source, std::string why) {
  AllocationSamples s;
  s.source = std::move(source);
  s.how_to_enable = std::move(why);
  return s;
}

template <class Runtime>
class RuntimeAllocator final : public LocatedAllocator {
 public:
  // `functions` has static storage (a plug-in's constant).
  RuntimeAllocator(const Image& image, Runtime runtime, const AllocatorFunctions<Runtime>& functions)
      : image_(image), runtime_(std::move(runtime)), f_(functions) {}

  std::string name() const override { return std::string(f_.name); }
  std::optional<HeapModel> walk(std::string*) const override { return f_.walk(image_, runtime_); }
  std::optional<HeapVerification> verify(const HeapModel& model) const override {
    if (!f_.verify) return std::nullopt;
    return f_.verify(image_, runtime_, model);
  }
  std::optional<ArenaTrim> arena_trim(const HeapModel& model, std::size_t arena, std::size_t max_blockers,
                                      std::uint64_t page_bytes) const override {
    return f_.arena_trim ? f_.arena_trim(model, arena, max_blockers, page_bytes) : std::nullopt;
  }
  AllocationSamples allocation_samples(const HeapModel&) const override {
    return f_.samples ? f_.samples(image_, runtime_) : AllocationSamples{};
  }
  bool owns_arena(const ArenaInfo& arena) const override { return f_.owns_arena && f_.owns_arena(runtime_, arena); }

 private:
  const Image& image_;
  const Runtime runtime_;
  const AllocatorFunctions<Runtime>& f_;
};

template <class Runtime>
std::unique_ptr<LocatedAllocator> located_allocator(const Image& image, Runtime runtime,
                                                    const AllocatorFunctions<Runtime>& functions) {
  return std::make_unique<RuntimeAllocator<Runtime>>(image, std::move(runtime), functions);
}

}  // namespace heapscope
