#include "runtime/cpython/pymalloc_allocator.h"

#include "runtime/cpython/pymalloc_heap.h"

namespace heapscope::pymalloc {

namespace {

class PymallocAllocator final : public LocatedAllocator {
 public:
  PymallocAllocator(const Image& image, Runtime runtime) : image_(image), runtime_(std::move(runtime)) {}

  std::string name() const override { return "pymalloc"; }
  std::optional<HeapModel> walk(std::string*) const override { return walk_heap(image_, runtime_); }
  std::optional<HeapVerification> verify(const HeapModel&) const override { return verify_heap(image_, runtime_); }
  bool owns_arena(const ArenaInfo& arena) const override {
    return !runtime_.pools.empty() && arena.address == runtime_.pools.front().address;
  }

 private:
  const Image& image_;
  const Runtime runtime_;
};

class PymallocPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "pymalloc"; }
  bool beside_malloc() const override { return true; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols, const MallocProvider&,
                                           std::string* why_not) const override {
    std::optional<Runtime> runtime = locate_runtime(image, symbols, why_not);
    if (!runtime) return nullptr;
    return std::make_unique<PymallocAllocator>(image, std::move(*runtime));
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const PymallocPlugin plugin;
  return plugin;
}

}  // namespace heapscope::pymalloc
