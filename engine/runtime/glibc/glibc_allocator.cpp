#include "runtime/glibc/glibc_allocator.h"

#include <fmt/format.h>

#include "base/phase_timer.h"
#include "runtime/glibc/glibc_heap.h"
#include "runtime/glibc/glibc_runtime.h"
#include "runtime/glibc/glibc_trim.h"
#include "runtime/glibc/glibc_verify.h"

namespace heapscope::glibc {

namespace {

class GlibcAllocator final : public LocatedAllocator {
 public:
  GlibcAllocator(const Image& image, Runtime runtime) : image_(image), runtime_(std::move(runtime)) {}

  std::string name() const override { return "glibc"; }
  std::optional<HeapModel> walk(std::string*) const override { return walk_heap(image_, runtime_); }
  std::optional<HeapVerification> verify(const HeapModel& model) const override {
    return verify_heap(image_, runtime_, model);
  }
  std::optional<ArenaTrim> arena_trim(const HeapModel& model, std::size_t arena, std::size_t max_blockers,
                                      std::uint64_t page_bytes) const override {
    return glibc::arena_trim(model, arena, model.trim, max_blockers, page_bytes);
  }

 private:
  const Image& image_;
  const Runtime runtime_;
};

class GlibcPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "glibc malloc"; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                           const MallocProvider& provider, std::string* why_not) const override {
    PhaseTimer timer("walk: locate glibc");
    std::optional<Runtime> runtime = locate_runtime(image, symbols, why_not);
    if (!runtime) return nullptr;
    // An interposed allocator (LD_PRELOAD'ed jemalloc, say) serves malloc although libc's arenas exist.
    if (provider.module && provider.module != runtime->libc) {
      *why_not = fmt::format("{} serves malloc, not {}", provider.name(), runtime->libc->name());
      return nullptr;
    }
    return std::make_unique<GlibcAllocator>(image, std::move(*runtime));
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const GlibcPlugin plugin;
  return plugin;
}

}  // namespace heapscope::glibc
