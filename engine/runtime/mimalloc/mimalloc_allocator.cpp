#include "runtime/mimalloc/mimalloc_allocator.h"

#include "base/phase_timer.h"
#include "runtime/mimalloc/mimalloc_heap.h"
#include "runtime/mimalloc/mimalloc_runtime.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::mimalloc {

namespace {

constexpr AllocatorFunctions<Runtime> kMimalloc{
    .name = "mimalloc",
    .walk = walk_heap,
    // The walk's checks again, recorded as findings.
    .verify = [](const Image& image, const Runtime& rt, const HeapModel&) { return verify_heap(image, rt); },
    .samples = [](const Image&, const Runtime&) {
      return no_allocation_stacks(
          "mimalloc", "mimalloc keeps no allocation stacks; heapscope's recorder samples glibc's malloc only");
    },
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
    return located_allocator(image, std::move(*runtime), kMimalloc);
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
