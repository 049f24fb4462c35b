#include "runtime/tcmalloc/tcmalloc_allocator.h"

#include "base/phase_timer.h"
#include "runtime/tcmalloc/tcmalloc_heap.h"
#include "runtime/tcmalloc/tcmalloc_runtime.h"

namespace heapscope::tcmalloc {

namespace {

class TcmallocAllocator final : public LocatedAllocator {
 public:
  TcmallocAllocator(const Image& image, Runtime runtime) : image_(image), runtime_(std::move(runtime)) {}

  std::string name() const override { return "tcmalloc"; }
  std::optional<HeapModel> walk(std::string*) const override { return walk_heap(image_, runtime_); }

 private:
  const Image& image_;
  const Runtime runtime_;
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
    return std::make_unique<TcmallocAllocator>(image, std::move(*runtime));
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
