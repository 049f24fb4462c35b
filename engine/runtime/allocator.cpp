#include "runtime/allocator.h"

#include <fmt/format.h>

#include <algorithm>

#include "recorder/sites_table.h"

namespace heapscope {

namespace {

// heapscope's recorder defines malloc only to sample calls on their way to the next definition (glibc's):
// it holds no memory of its own.
bool forwards_malloc(const Module& m) { return m.name() == HS_SITES_LIBRARY; }

template <typename T, typename Less>
void append_sorted(std::vector<T>& into, const std::vector<T>& more, Less less) {
  into.insert(into.end(), more.begin(), more.end());
  std::stable_sort(into.begin(), into.end(), less);
}

// `more` (a heap beside malloc's) joins `into`: its arenas after into's, its blocks merged in address order.
void merge_heap(HeapModel& into, HeapModel more) {
  const auto arena_base = static_cast<std::uint16_t>(into.arenas.size());
  BlockArray blocks(into.blocks.size() + more.blocks.size());
  const Block* a = into.blocks.begin();
  const Block* b = more.blocks.begin();
  while (a != into.blocks.end() || b != more.blocks.end()) {
    if (b == more.blocks.end() || (a != into.blocks.end() && a->chunk < b->chunk)) {
      blocks.push_back(*a++);
      continue;
    }
    Block moved = *b++;
    if (moved.arena != Block::kNoArena) moved.arena = static_cast<std::uint16_t>(moved.arena + arena_base);
    blocks.push_back(moved);
  }
  into.blocks = std::move(blocks);
  for (ArenaInfo& arena : more.arenas) into.arenas.push_back(std::move(arena));
  const auto by_start = [](const HeapSegment& x, const HeapSegment& y) { return x.start < y.start; };
  append_sorted(into.metadata, more.metadata, by_start);
  append_sorted(into.reserved, more.reserved, by_start);
  append_sorted(into.not_roots, more.not_roots, by_start);
  for (InterpreterFrame& f : more.interpreter_frames) into.interpreter_frames.push_back(std::move(f));
  into.discovery.insert(into.discovery.end(), more.discovery.begin(), more.discovery.end());
  into.warnings.insert(into.warnings.end(), more.warnings.begin(), more.warnings.end());
  into.figures.insert(into.figures.end(), more.figures.begin(), more.figures.end());
  into.size_classes.insert(into.size_classes.end(), more.size_classes.begin(), more.size_classes.end());
  into.free_pages.insert(into.free_pages.end(), more.free_pages.begin(), more.free_pages.end());
  for (int s = 0; s < kBlockStateCount; ++s)
    if (into.state_labels[s].empty()) into.state_labels[s] = more.state_labels[s];
  into.allocator = fmt::format("{} + {}", into.allocator, more.allocator);
  into.version = fmt::format("{}{}", into.version.empty() ? "" : into.version + " + ",
                             more.version.empty() ? "unknown" : more.version);
  into.complete = into.complete && more.complete;
  if (more.collector) {
    into.collector = std::move(more.collector);
    into.collector->arena = static_cast<std::uint16_t>(into.collector->arena + arena_base);
  }
}

// The blocks and arenas of `model` that `owned` picks (by arena index; mmapped blocks belong to malloc's
// allocator), as a model of their own, arenas renumbered: what one allocator's checks run over.
HeapModel part_of(const HeapModel& model, const std::vector<bool>& owned, bool mallocs) {
  HeapModel part;
  part.allocator = model.allocator;
  part.version = model.version;
  part.trim = model.trim;
  part.mallinfo = model.mallinfo;
  part.state_labels = model.state_labels;
  part.metadata = model.metadata;
  part.reserved = model.reserved;
  std::vector<std::uint16_t> renumbered(model.arenas.size(), Block::kNoArena);
  for (std::size_t i = 0; i < model.arenas.size(); ++i)
    if (owned[i] != mallocs) {
      renumbered[i] = static_cast<std::uint16_t>(part.arenas.size());
      part.arenas.push_back(model.arenas[i]);
    }
  for (const Block& b : model.blocks) {
    if (b.arena == Block::kNoArena) {
      if (mallocs) part.blocks.push_back(b);
    } else if (renumbered[b.arena] != Block::kNoArena) {
      Block kept = b;
      kept.arena = renumbered[b.arena];
      part.blocks.push_back(kept);
    }
  }
  return part;
}

void add_verification(HeapVerification& into, HeapVerification more) {
  into.findings.insert(into.findings.end(), std::make_move_iterator(more.findings.begin()),
                       std::make_move_iterator(more.findings.end()));
  into.findings_dropped += more.findings_dropped;
  into.checked.arenas += more.checked.arenas;
  into.checked.heaps += more.checked.heaps;
  into.checked.chunks += more.checked.chunks;
  into.checked.bin_entries += more.checked.bin_entries;
  into.checked.fastbin_entries += more.checked.fastbin_entries;
  into.checked.tcaches += more.checked.tcaches;
  into.checked.tcache_entries += more.checked.tcache_entries;
  into.notes.insert(into.notes.end(), more.notes.begin(), more.notes.end());
  into.checked_in_own_words.insert(into.checked_in_own_words.end(), more.checked_in_own_words.begin(), more.checked_in_own_words.end());
}

// Malloc's allocator and the heaps that live beside it (a collector's), walked into one model.
class CombinedAllocator final : public LocatedAllocator {
 public:
  CombinedAllocator(std::unique_ptr<LocatedAllocator> malloc, std::vector<std::unique_ptr<LocatedAllocator>> beside)
      : malloc_(std::move(malloc)), beside_(std::move(beside)) {}

  std::string name() const override {
    std::string out = malloc_->name();
    for (const auto& b : beside_) out += " + " + b->name();
    return out;
  }

  std::optional<HeapModel> walk(std::string* error) const override {
    std::optional<HeapModel> model = malloc_->walk(error);
    if (!model) return model;
    for (const auto& b : beside_) {
      std::string why;
      if (std::optional<HeapModel> more = b->walk(&why)) merge_heap(*model, std::move(*more));
      else model->warnings.push_back(fmt::format("{}'s heap is not walked: {}", b->name(), why));
    }
    return model;
  }

  std::optional<HeapVerification> verify(const HeapModel& model) const override {
    const std::vector<bool> owned = owned_arenas(model);
    std::optional<HeapVerification> out = malloc_->verify(part_of(model, owned, true));
    if (!out) {
      out.emplace();
      out->notes.push_back(malloc_->name() + " has no checks of its own structures");
    }
    for (const auto& b : beside_) {
      std::vector<bool> its(model.arenas.size());
      for (std::size_t i = 0; i < its.size(); ++i) its[i] = b->owns_arena(model.arenas[i]);
      if (std::optional<HeapVerification> more = b->verify(part_of(model, its, false)))
        add_verification(*out, std::move(*more));
    }
    return out;
  }

  std::optional<ArenaTrim> arena_trim(const HeapModel& model, std::size_t arena, std::size_t max_blockers,
                                      std::uint64_t page_bytes) const override {
    for (const auto& b : beside_)
      if (b->owns_arena(model.arenas[arena])) return std::nullopt;
    return malloc_->arena_trim(model, arena, max_blockers, page_bytes);  // malloc's arenas come first
  }

  // malloc's, unless a runtime beside it keeps sites of every heap (an interpreter's recorder, tracemalloc,
  // traces what it allocates through malloc as well as its own pools) and malloc's keep none: then the
  // runtime's. Blocks of a heap beside malloc's that no recorder covers are said to have no site.
  AllocationSamples allocation_samples(const HeapModel& model) const override {
    AllocationSamples samples = malloc_->allocation_samples(model);
    const bool malloc_records = samples.enabled.value_or(false) || !samples.samples.empty();
    std::string owners;  // "Boehm GC's", "Boehm GC's or pymalloc's"
    for (const auto& b : beside_) {
      if (!malloc_records) {  // only then are its own read (tracemalloc's: every trace)
        AllocationSamples own = b->allocation_samples(model);
        if (own.supported) {
          samples = std::move(own);  // its blocks are covered: none is another's
          continue;
        }
      }
      bool owns = false;
      for (std::size_t i = 0; i < model.arenas.size(); ++i)
        if (b->owns_arena(model.arenas[i])) {
          samples.other_arenas.push_back(static_cast<std::uint16_t>(i));
          owns = true;
        }
      if (owns) owners += (owners.empty() ? "" : " or ") + b->name() + "'s";
    }
    if (!samples.other_arenas.empty())
      samples.other_arenas_why = fmt::format("no allocation site: the block is {}, which keeps no allocation stacks "
                                             "heapscope can read ({} covers {}'s blocks only)",
                                             owners, samples.source.empty() ? "allocation sampling" : samples.source,
                                             malloc_->name());
    return samples;
  }

 private:
  std::vector<bool> owned_arenas(const HeapModel& model) const {
    std::vector<bool> owned(model.arenas.size(), false);
    for (std::size_t i = 0; i < owned.size(); ++i)
      for (const auto& b : beside_) owned[i] = owned[i] || b->owns_arena(model.arenas[i]);
    return owned;
  }

  std::unique_ptr<LocatedAllocator> malloc_;
  std::vector<std::unique_ptr<LocatedAllocator>> beside_;
};

// Every beside_malloc plug-in whose heap is in the image; a collector that is there but cannot be walked
// is said in `others`.
std::vector<std::unique_ptr<LocatedAllocator>> locate_beside(const Image& image, const SymbolIndex& symbols,
                                                             const std::vector<const AllocatorPlugin*>& plugins,
                                                             const MallocProvider& provider) {
  std::vector<std::unique_ptr<LocatedAllocator>> found;
  for (const AllocatorPlugin* plugin : plugins) {
    if (!plugin->beside_malloc()) continue;
    std::string why_not;
    if (auto located = plugin->locate(image, symbols, provider, &why_not)) found.push_back(std::move(located));
  }
  return found;
}

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
    if (plugin->beside_malloc()) continue;
    std::string why_not;
    if (auto located = plugin->locate(image, symbols, provider, &why_not)) {
      std::vector<std::unique_ptr<LocatedAllocator>> beside = locate_beside(image, symbols, plugins, provider);
      if (others)
        for (const AllocatorPlugin* other : plugins)
          if (other != plugin)
            if (auto held = other->also_holds_memory(image, symbols)) others->push_back(std::move(*held));
      if (beside.empty()) return located;
      return std::make_unique<CombinedAllocator>(std::move(located), std::move(beside));
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
  for (const AllocatorPlugin* plugin : plugins)
    if (!plugin->beside_malloc()) names.emplace_back(plugin->name());
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
