// The allocator boundary. Each allocator is a plug-in that decides itself whether it serves the process
// (as LLDB's plug-ins do), and once located walks its heap into the allocator-neutral HeapModel. Nothing
// above the runtime layer names a particular allocator: a new one is a new plug-in in runtime/<allocator>/
// and one line in runtime/builtin/builtin_runtimes.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heap/allocation_samples.h"
#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "heap/trim_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

// The module whose `malloc` the process calls: the first module in symbol lookup order that defines it.
// `module` is null when no module's symbols say (a stripped static executable, say).
struct MallocProvider {
  const Module* module = nullptr;
  std::string name() const { return module ? std::string(module->name()) : std::string(); }
};
MallocProvider find_malloc_provider(const Image& image, const SymbolIndex& symbols);

// One allocator found in one image: located once, then asked for its heap and its own checks.
class LocatedAllocator {
 public:
  virtual ~LocatedAllocator() = default;
  virtual std::string name() const = 0;  // "glibc"
  // The walk: null with *error when nothing could be walked; otherwise a model whose warnings say what
  // could not be (damaged chunks, unreadable memory), with `complete` false then.
  virtual std::optional<HeapModel> walk(std::string* error) const = 0;
  // Checks of the allocator's own structures (`verify`), over the model walk() gave; nothing (the
  // default) when the allocator has no such checks.
  virtual std::optional<HeapVerification> verify(const HeapModel&) const { return std::nullopt; }
  // What the allocator's own trimming would give back from arena `arena` of the model, with at most
  // `max_blockers` blockers; nothing (the default) when the allocator has no trimming rules heapscope knows.
  virtual std::optional<ArenaTrim> arena_trim(const HeapModel&, std::size_t /*arena*/, std::size_t /*max_blockers*/,
                                              std::uint64_t /*page_bytes*/) const {
    return std::nullopt;
  }
  // The allocation stacks the allocator keeps of sampled blocks of the model (its heap profiling): read
  // only when a command asks where blocks were allocated. The default: this allocator keeps none that
  // heapscope can read (`supported` false).
  virtual AllocationSamples allocation_samples(const HeapModel&) const { return {}; }
  // For an allocator whose heap lives beside malloc's (AllocatorPlugin::beside_malloc): whether `arena` of
  // a model that holds both heaps is its own.
  virtual bool owns_arena(const ArenaInfo& /*arena*/) const { return false; }
};

class AllocatorPlugin {
 public:
  virtual ~AllocatorPlugin() = default;
  virtual std::string_view name() const = 0;  // "glibc malloc"
  // Its allocator in `image`, or null with *why_not saying why this plug-in does not apply. `provider`
  // is the module that serves malloc, when symbols tell.
  virtual std::unique_ptr<LocatedAllocator> locate(const Image& image, const SymbolIndex& symbols,
                                                   const MallocProvider& provider, std::string* why_not) const = 0;
  // Whether `provider` is this plug-in's allocator by its symbols alone: when such a plug-in cannot locate
  // its structures, its reason is the error, not "unsupported allocator".
  virtual bool claims(const MallocProvider& provider, const SymbolIndex& symbols) const {
    (void)provider;
    (void)symbols;
    return false;
  }
  // When another plug-in's allocator serves malloc: one sentence saying that this plug-in's allocator still
  // holds memory in the image (glibc's arenas keep what was malloc'ed before an interposer took over), or
  // nothing when it holds none or cannot tell. Such memory is reported, not walked.
  virtual std::optional<std::string> also_holds_memory(const Image& image, const SymbolIndex& symbols) const {
    (void)image;
    (void)symbols;
    return std::nullopt;
  }
  // Whether this allocator's heap lives beside whatever serves malloc rather than serving it (a garbage
  // collector's, Boehm GC's): located in addition to malloc's allocator, its blocks and arenas join the
  // same model, after malloc's, and its checks run on its own arenas (LocatedAllocator::owns_arena).
  virtual bool beside_malloc() const { return false; }
};

// For a plug-in whose allocator serves malloc from a module of its own (an interposer such as tcmalloc or
// jemalloc): that module, when symbols say which module serves malloc and `plugin` claims it; null with
// *why_not otherwise ("libc.so.6 serves malloc, and it is not jemalloc").
const Module* claimed_provider(const AllocatorPlugin& plugin, std::string_view allocator, const MallocProvider& provider,
                               const SymbolIndex& symbols, std::string* why_not);

// The first of `plugins` whose allocator is in the image (with every beside_malloc plug-in whose heap is there
// too: one LocatedAllocator over both, named "glibc + Boehm GC", whose model holds both). When none is, *error says why: the reason of a
// plug-in that claims the module serving malloc, else which module serves malloc and that no plug-in walks
// it ("unsupported allocator: …"), or why each plug-in declined. With `others`, what the other plug-ins'
// allocators still hold in the image (also_holds_memory) is added there.
std::unique_ptr<LocatedAllocator> locate_allocator(const Image& image, const SymbolIndex& symbols,
                                                   const std::vector<const AllocatorPlugin*>& plugins,
                                                   std::string* error, std::vector<std::string>* others = nullptr);

}  // namespace heapscope
