#include "runtime/mimalloc/mimalloc_allocator.h"

#include "base/phase_timer.h"
#include "runtime/mimalloc/mimalloc_heap.h"
#include "runtime/mimalloc/mimalloc_runtime.h"

namespace heapscope::mimalloc {

namespace {

class MimallocAllocator final : public LocatedAllocator {
 public:
  MimallocAllocator(const Image& image, Runtime runtime) : image_(image), runtime_(std::move(runtime)) {}

  std::string name() const override { return "mimalloc"; }
  std::optional<HeapModel> walk(std::string*) const override { return walk_heap(image_, runtime_); }
  // The walk's checks again, recorded as findings.
  std::optional<HeapVerification> verify(const HeapModel&) const override { return verify_heap(image_, runtime_); }

  AllocationSamples allocation_samples(const HeapModel&) const override {
    AllocationSamples s;
    s.source = "mimalloc";
    s.how_to_enable = "mimalloc keeps no allocation stacks; heapscope's recorder samples glibc's malloc only";
    return s;
  }

 private:
  const Image& image_;
  const Runtime runtime_;
};

class MimallocPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "mimalloc"; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                           const MallocProvider& provider, std::string* why_not) const override {
    PhaseTimer timer("walk: locate mimalloc");
    const Module* module = claimed_provider(*this, "mimalloc", provider, symbols, why_not);
    if (!module) return nullptr;
    std::optional<Runtime> runtime = locate_runtime(image, symbols, *module, why_not);
    if (!runtime) return nullptr;
    return std::make_unique<MimallocAllocator>(image, std::move(*runtime));
  }

  bool claims(const MallocProvider& provider, const SymbolIndex& symbols) const override {
    return provider.module && is_mimalloc(*provider.module, symbols);
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const MimallocPlugin plugin;
  return plugin;
}

}  // namespace heapscope::mimalloc
