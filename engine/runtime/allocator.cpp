#include "runtime/allocator.h"

#include <fmt/format.h>

#include <algorithm>

#include "recorder/sites_table.h"

namespace heapscope {

namespace {

// heapscope's recorder defines malloc only to sample calls on their way to the next definition (glibc's):
// it holds no memory of its own.
bool forwards_malloc(const Module& m) { return m.name() == HS_SITES_LIBRARY; }

}  // namespace

MallocProvider find_malloc_provider(const Image& image, const SymbolIndex& symbols) {
  // Lookup order: the dynamic linker's list; modules it does not list (a core without link_map) after,
  // the executable first among them.
  std::vector<const Module*> order;
  for (const Module& m : image.modules()) order.push_back(&m);
  std::stable_sort(order.begin(), order.end(), [](const Module* a, const Module* b) {
    if (a->lookup_order != b->lookup_order) return a->lookup_order < b->lookup_order;
    return a->is_main_executable && !b->is_main_executable;
  });
  for (const Module* m : order)
    if (!forwards_malloc(*m) && symbols.address_of(*m, "malloc")) return MallocProvider{m};
  return {};
}

std::unique_ptr<LocatedAllocator> locate_allocator(const Image& image, const SymbolIndex& symbols,
                                                   const std::vector<const AllocatorPlugin*>& plugins,
                                                   std::string* error, std::vector<std::string>* others) {
  const MallocProvider provider = find_malloc_provider(image, symbols);
  std::vector<std::string> declined;
  std::string claimed;  // the reason of the plug-in whose allocator serves malloc, but could not be located
  for (const AllocatorPlugin* plugin : plugins) {
    std::string why_not;
    if (auto located = plugin->locate(image, symbols, provider, &why_not)) {
      if (others)
        for (const AllocatorPlugin* other : plugins)
          if (other != plugin)
            if (auto held = other->also_holds_memory(image, symbols)) others->push_back(std::move(*held));
      return located;
    }
    declined.push_back(fmt::format("{}: {}", plugin->name(), why_not));
    if (claimed.empty() && provider.module && plugin->claims(provider, symbols))
      claimed = fmt::format("{} serves malloc, and it is {}, but {}", provider.name(), plugin->name(), why_not);
  }
  if (!claimed.empty()) {
    *error = claimed;
    return nullptr;
  }
  std::vector<std::string> names;
  for (const AllocatorPlugin* plugin : plugins) names.emplace_back(plugin->name());
  if (provider.module)
    *error = fmt::format("unsupported allocator: {} serves malloc, and heapscope walks {} only", provider.name(),
                         fmt::join(names, ", "));
  else
    *error = declined.size() == 1 ? declined.front() : fmt::format("no heap found ({})", fmt::join(declined, "; "));
  return nullptr;
}

const Module* claimed_provider(const AllocatorPlugin& plugin, std::string_view allocator, const MallocProvider& provider,
                               const SymbolIndex& symbols, std::string* why_not) {
  if (!provider.module) {
    *why_not = "no module's symbols say which one serves malloc";
    return nullptr;
  }
  if (!plugin.claims(provider, symbols)) {
    *why_not = fmt::format("{} serves malloc, and it is not {}", provider.name(), allocator);
    return nullptr;
  }
  return provider.module;
}

}  // namespace heapscope
