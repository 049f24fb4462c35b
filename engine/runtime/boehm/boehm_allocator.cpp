#include "runtime/boehm/boehm_allocator.h"

#include "base/phase_timer.h"
#include "runtime/boehm/boehm_heap.h"
#include "runtime/boehm/boehm_runtime.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::boehm {

namespace {

constexpr AllocatorFunctions<Runtime> kBoehm{
    .name = "Boehm GC",
    .walk = walk_heap,
    .verify = [](const Image& image, const Runtime& rt, const HeapModel&) { return verify_heap(image, rt); },
    .owns_arena = [](const Runtime& rt, const ArenaInfo& arena) { return arena.address == rt.arrays; },
};

class BoehmPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "Boehm GC"; }
  bool beside_malloc() const override { return true; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols, const MallocProvider&,
                                           std::string* why_not) const override {
    PhaseTimer timer("walk: locate Boehm GC");
    const Module* module = find_collector(image, symbols);
    if (!module) {
      *why_not = "no module exports GC_arrays";
      return nullptr;
    }
    std::optional<Runtime> runtime = locate_runtime(image, symbols, *module, why_not);
    if (!runtime) return nullptr;
    return located_allocator(image, std::move(*runtime), kBoehm);
  }

  // A collector that is loaded but cannot be walked is worth a warning; one never initialised is not.
  std::optional<std::string> also_holds_memory(const Image& image, const SymbolIndex& symbols) const override {
    const Module* module = find_collector(image, symbols);
    if (!module) return std::nullopt;
    std::string why_not;
    if (locate_runtime(image, symbols, *module, &why_not) || why_not.find("never initialised") != std::string::npos)
      return std::nullopt;
    return "Boehm GC's heap is not walked: " + why_not;
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const BoehmPlugin plugin;
  return plugin;
}

}  // namespace heapscope::boehm
