#include "runtime/tcmalloc/tcmalloc_allocator.h"

#include "base/phase_timer.h"
#include "runtime/tcmalloc/tcmalloc_heap.h"
#include "runtime/tcmalloc/tcmalloc_runtime.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::tcmalloc {

namespace {

constexpr AllocatorFunctions<Runtime> kTcmalloc{
    .name = "tcmalloc",
    .walk = walk_heap,
    // gperftools keeps a stack per sampled allocation (a span of its own whose `objects` is a StackTrace)
    // only where it is built with sampling: libtcmalloc_minimal, what Debian's programs link, is built with
    // NO_TCMALLOC_SAMPLES and records none, whatever TCMALLOC_SAMPLE_PARAMETER says.
    .samples = [](const Image&, const Runtime& rt) {
      return no_allocation_stacks(
          "tcmalloc", rt.full_library
                          ? "gperftools' full tcmalloc keeps stacks of sampled allocations (TCMALLOC_SAMPLE_PARAMETER), "
                            "which heapscope does not read yet"
                          : "libtcmalloc_minimal is built without sampling (NO_TCMALLOC_SAMPLES) and records no "
                            "allocation stacks, whatever TCMALLOC_SAMPLE_PARAMETER says");
    },
};

class TcmallocPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "tcmalloc (gperftools)"; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                           const MallocProvider& provider, std::string* why_not) const override {
    PhaseTimer timer("walk: locate tcmalloc");
    const Module* module = claimed_provider(*this, "tcmalloc", provider, symbols, why_not);
    if (!module) return nullptr;
    std::optional<Runtime> runtime = locate_runtime(image, symbols, *module, why_not);
    if (!runtime) return nullptr;
    // Only the full library has the heap profiler.
    runtime->full_library = symbols.address_of(*module, "HeapProfilerStart").has_value();
    return located_allocator(image, std::move(*runtime), kTcmalloc);
  }

  bool claims(const MallocProvider& provider, const SymbolIndex& symbols) const override {
    return provider.module && symbols.address_of(*provider.module, kPageheapLockSymbol);
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const TcmallocPlugin plugin;
  return plugin;
}

}  // namespace heapscope::tcmalloc
