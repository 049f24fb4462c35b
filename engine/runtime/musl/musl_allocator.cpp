#include "runtime/musl/musl_allocator.h"

#include <fmt/format.h>

#include "base/phase_timer.h"
#include "runtime/musl/musl_heap.h"
#include "runtime/musl/musl_runtime.h"
#include "runtime/runtime_allocator.h"

namespace heapscope::musl {

namespace {

constexpr AllocatorFunctions<Runtime> kMusl{
    .name = "musl",
    .walk = walk_heap,
    // The walk's checks again, recorded as findings.
    .verify = [](const Image& image, const Runtime& rt, const HeapModel&) { return verify_heap(image, rt); },
    .samples = [](const Image&, const Runtime&) {
      return no_allocation_stacks(
          "musl", "musl's malloc keeps no allocation stacks; heapscope's recorder samples glibc's malloc only");
    },
};

// Whether the program is a static one (no dynamic linker) or runs under musl's dynamic linker: where a
// stripped program's heap may be musl's though no symbol says so.
bool may_be_musl(const Image& image, const SymbolIndex& symbols) {
  for (const Module& m : image.modules())
    if (!m.is_main_executable && m.name() != "[vdso]" && m.name() != "linux-vdso.so.1" && !is_musl(m, symbols))
      return false;
  return true;
}

class MuslPlugin final : public AllocatorPlugin {
 public:
  std::string_view name() const override { return "musl malloc"; }

  std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                           const MallocProvider& provider, std::string* why_not) const override {
    PhaseTimer timer("walk: locate musl's malloc");
    const Module* module = provider.module;
    if (module && !is_musl(*module, symbols)) {
      *why_not = fmt::format("{} serves malloc, and it is not musl", module->name());
      return nullptr;
    }
    if (module && uses_simple_malloc(*module, symbols)) {
      *why_not = "the program is linked with musl's simple bump allocator in mallocng's place (__simple_malloc, "
                 "which musl links into a static program that never calls free): it keeps no record of its blocks, "
                 "so there is no heap to walk";
      return nullptr;
    }
    if (!module && !may_be_musl(image, symbols)) {
      *why_not = "no module is musl";
      return nullptr;
    }
    std::optional<Runtime> runtime = locate_runtime(image, symbols, module, why_not);
    if (!runtime) return nullptr;
    return located_allocator(image, std::move(*runtime), kMusl);
  }

  bool claims(const MallocProvider& provider, const SymbolIndex& symbols) const override {
    return provider.module && is_musl(*provider.module, symbols);
  }
};

}  // namespace

const AllocatorPlugin& allocator_plugin() {
  static const MuslPlugin plugin;
  return plugin;
}

}  // namespace heapscope::musl
