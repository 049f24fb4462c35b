#include "runtime/glibc/glibc_allocator.h"

#include <fmt/format.h>

#include "base/phase_timer.h"
#include "runtime/glibc/glibc_heap.h"
#include "runtime/glibc/glibc_runtime.h"
#include "runtime/glibc/glibc_trim.h"
#include "runtime/glibc/glibc_verify.h"
#include "runtime/glibc/sites_recorder.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::glibc {

namespace {

constexpr AllocatorFunctions<Runtime> kGlibc{
    .name = "glibc",
    .walk = walk_heap,
    .verify = verify_heap,
    .arena_trim = [](const HeapModel& model, std::size_t arena, std::size_t max_blockers,
                     std::uint64_t page_bytes) -> std::optional<ArenaTrim> {
      return glibc::arena_trim(model, arena, model.trim, max_blockers, page_bytes);
    },
    // glibc records no allocation stacks; heapscope's recorder, preloaded, keeps them in the process.
    .samples = [](const Image& image, const Runtime&) { return read_sites_recorder(image); },
};

class GlibcPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "glibc malloc"; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                           const MallocProvider& provider, std::string* why_not) const override {
    PhaseTimer timer("walk: locate glibc");
    // An interposed allocator (LD_PRELOAD'ed jemalloc, say) serves malloc although libc's arenas exist: told
    // before they are looked for (libc's symbols, its relocations), which also_holds_memory does once.
    if (const Module* libc = libc_of(image); libc && provider.module && provider.module != libc) {
      *why_not = fmt::format("{} serves malloc, not {}", provider.name(), libc->name());
      return nullptr;
    }
    std::optional<Runtime> runtime = locate_runtime(image, symbols, why_not);
    if (!runtime) return nullptr;
    return located_allocator(image, std::move(*runtime), kGlibc);
  }

  // Under an interposed allocator, glibc's arenas still hold what was malloc'ed through glibc (before the
  // interposer was in place, or by __libc_malloc): their system_mem says how much.
  std::optional<std::string> also_holds_memory(const Image& image, const SymbolIndex& symbols) const override {
    std::string why_not;
    const std::optional<Runtime> runtime = locate_runtime(image, symbols, &why_not);
    if (!runtime) return std::nullopt;
    std::vector<std::string> ignored;
    std::uint64_t bytes = 0;
    std::size_t arenas = 0;
    for (Address arena : arena_ring(image, runtime->layout, runtime->main_arena, &ignored)) {
      const std::uint64_t system = image.read_u64(arena + runtime->layout.arena.system_mem).value_or(0);
      bytes += system;
      arenas += system != 0;
    }
    if (bytes == 0) return std::nullopt;
    return fmt::format("glibc's malloc also holds memory: {} bytes in {} arena{}, from blocks malloc'ed through "
                       "glibc (before the allocator that serves malloc took over, or by calls to glibc's malloc "
                       "itself); heapscope walks the heap of the allocator that serves malloc only, so those blocks "
                       "are not shown",
                       bytes, arenas, arenas == 1 ? "" : "s");
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const GlibcPlugin plugin;
  return plugin;
}

}  // namespace heapscope::glibc
