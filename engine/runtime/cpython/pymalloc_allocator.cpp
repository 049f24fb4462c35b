#include "runtime/cpython/pymalloc_allocator.h"

#include "runtime/cpython/pymalloc_heap.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::pymalloc {

namespace {

constexpr AllocatorFunctions<Runtime> kPymalloc{
    .name = "pymalloc",
    .walk = walk_heap,
    .verify = [](const Image& image, const Runtime& rt, const HeapModel&) { return verify_heap(image, rt); },
    .samples = [](const Image& image, const Runtime& rt) { return cpython::tracemalloc_samples(image, rt.tracemalloc); },
    .owns_arena = [](const Runtime& rt, const ArenaInfo& arena) {
      return !rt.pools.empty() && arena.address == rt.pools.front().address;
    },
};

class PymallocPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "pymalloc"; }
  bool beside_malloc() const override { return true; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols, const MallocProvider&,
                                           std::string* why_not) const override {
    std::optional<Runtime> runtime = locate_runtime(image, symbols, why_not);
    if (!runtime) return nullptr;
    return located_allocator(image, std::move(*runtime), kPymalloc);
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const PymallocPlugin plugin;
  return plugin;
}

}  // namespace heapscope::pymalloc
