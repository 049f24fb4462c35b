#include "session/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "base/phase_timer.h"
#include "base/workers.h"
#include "image/address_literal.h"
#include "model/graph_closure.h"
#include "runtime/builtin/builtin_runtimes.h"
#include "session/block_names_json.h"
#include "types/leak_naming.h"
#include "types/runtime_naming.h"

namespace heapscope {

namespace {

// An image cut short before the process's modules (a core that lost its notes and the dynamic linker's
// list): the allocator plug-ins' reasons would guess at a whole process ("is this a glibc program?"),
// where the reason is what the image lost, which its damage() says first.
bool image_without_modules(const Image& image) { return image.modules().empty() && !image.damage().empty(); }
constexpr const char* kNoModulesToLocateAllocator =
    "without the process's modules nothing says which allocator serves malloc or where its structures lie, so "
    "the heap cannot be walked";

template <class T>
struct IsUniquePtr : std::false_type {};
template <class T>
struct IsUniquePtr<std::unique_ptr<T>> : std::true_type {};

}  // namespace

Session::Session(std::shared_ptr<const Image> image, SessionOptions options)
    : image_(std::move(image)),
      options_(std::move(options)),
      symbols_(*image_, options_.symbols),
      dwarf_files_(std::make_shared<const DwarfFiles>(*image_, symbols_)),
      dwarf_indexes_(std::make_shared<const DwarfIndexes>(dwarf_files_, image_->modules().size())) {
  if (!options_.snapshots) options_.snapshots = std::make_shared<SnapshotStore>();
  if (options_.allocators.empty()) options_.allocators = builtin_allocator_plugins();
}

Session::~Session() = default;

// The one place products are computed: under the product's own lock, after the interrupt check, timed, told
// to the frontend, shown as a phase of the session's Progress (current on this thread while it runs, so
// that long loops below report to it and stop when it says), with the product's own warnings collected.
// `compute` asks for the products it needs first; their time is theirs (PhaseTimer counts nested phases
// apart). An interrupted product keeps neither a value nor an error: the next command computes it again.
template <class T, class Compute>
const T& Session::product(Slot<T>& slot, const char* name, Compute&& compute) {
  std::lock_guard lock(slot.mutex);
  if (!slot.value && slot.error.empty()) {
    check_interrupted();
    if (options_.on_product) {
      std::lock_guard told(on_product_mutex_);
      options_.on_product(name);
    }
    Progress& progress = progress_here();
    ProgressScope current(&progress);
    PhaseScope phase(progress, name);
    PhaseTimer timer(name);
    try {
      if constexpr (IsUniquePtr<std::invoke_result_t<Compute>>::value)
        slot.value = compute();
      else
        slot.value = std::make_unique<T>(compute());
    } catch (const Interrupted&) {
      throw AnalysisError("interrupted");
    } catch (const AnalysisError& e) {
      // Not this product's failure when a stop was requested: the next command retries. A product computed
      // beside the command's thread (Ahead, compute_side_by_side) may learn of the command's stop from a
      // product it needs, which checks the session's Progress, before its own Progress has polled it.
      if (progress.stop_requested() || progress_.stop_requested()) throw;
      slot.error = e.what();
    }
    if constexpr (requires(const T& t) { t.warnings; })
      if (slot.value) add_warnings(slot.value->warnings);
  }
  if (!slot.value) throw AnalysisError(slot.error);
  return *slot.value;
}

template <class T>
const T* Session::computed(Slot<T>& slot) {
  std::lock_guard lock(slot.mutex);
  return slot.value.get();
}

const LocatedAllocator& Session::allocator() {
  return product(allocator_, "locate allocator", [&] {
    std::string error;
    std::vector<std::string> others;
    std::unique_ptr<LocatedAllocator> located =
        locate_allocator(*image_, symbols_, options_.allocators, &error, &others);
    if (!located) throw AnalysisError(image_without_modules(*image_) ? kNoModulesToLocateAllocator : error);
    add_warnings(others);
    return located;
  });
}

const HeapModel& Session::heap() {
  return product(heap_, "walk", [&] {
    const LocatedAllocator& located = allocator();
    if (std::unique_ptr<HeapModel> cached = heap_from_cache()) return cached;
    std::string error;
    std::optional<HeapModel> model = located.walk(&error);
    if (!model) throw AnalysisError(error.empty() ? "no heap found" : error);
    return std::make_unique<HeapModel>(std::move(*model));
  });
}

std::unique_ptr<HeapModel> Session::heap_from_cache() {
  if (!options_.index_cache) return nullptr;
  cache_key_ = options_.index_cache->key(*image_, options_.symbols, options_.allocators, options_.leak_idioms);
  if (cache_key_.empty()) return nullptr;
  std::string note;
  cached_ = options_.index_cache->load(cache_key_, &note);
  if (cached_) {
    PhaseTimer timer("cache: check");
    std::string why;
    if (!check_heap(*image_, *cached_->heap, &why)) {
      note = options_.index_cache->rejection(cache_key_, why);
      cached_.reset();
    }
  }
  if (!note.empty()) add_warnings({note});
  heap_from_index_ = cached_ != nullptr;
  return cached_ ? std::move(cached_->heap) : nullptr;
}

const LibcThreads& Session::libc_threads() {
  return product(libc_threads_, "libc threads", [&] { return read_libc_threads(*image_, symbols_); });
}

const RootSet& Session::roots() {
  return product(roots_, "roots", [&] {
    const HeapModel& h = heap();
    const LibcThreads& threads = libc_threads();
    LibcFinalizers finalizers = read_libc_finalizers(*image_, h, symbols_, threads);
    add_warnings(finalizers.warnings);
    return collect_roots(*image_, h, threads, std::move(finalizers));
  });
}

const BlockIndex& Session::block_index() {
  if (const BlockIndex* made = computed(block_index_)) return *made;  // even while the scan holds the cache's lock
  // The cache's lock first, as graph() takes it before this product's: the saved page table is taken under it.
  std::lock_guard lock(cache_mutex_);
  const HeapModel& h = heap();  // whether a saved index holds the page table is known once the heap is
  const bool saved = cached_ && !cached_->block_pages.empty();
  return product(block_index_, saved ? "cache: block index" : "block index", [&] {
    if (saved) {
      try {
        return std::make_unique<BlockIndex>(h, std::move(cached_->block_pages), cached_->checks);
      } catch (const std::invalid_argument& e) {
        add_warnings({options_.index_cache->rejection(cache_key_, e.what())});
        saved_pages_refused_ = true;  // the index is written again, with the table made now
        PhaseTimer timer("block index");
        return std::make_unique<BlockIndex>(h);
      }
    }
    return std::make_unique<BlockIndex>(h);
  });
}

const std::optional<ObjectHeaders>& Session::object_headers() {
  if (const std::optional<ObjectHeaders>* made = computed(object_headers_)) return *made;  // as block_index()
  // The cache's lock first, as graph() takes it before this product's: the saved headers are taken under it.
  std::lock_guard lock(cache_mutex_);
  return product(object_headers_, "object headers", [&] {
    if (std::optional<ObjectHeaders> saved = object_headers_from_cache()) return saved;
    const HeapModel& h = heap();
    PhaseTimer timer("object headers: search");  // what a saved index spares (HEAPSCOPE_TIMING tells them apart)
    return find_object_headers(*image_, symbols_, h);
  });
}

// The saved object headers, when the heap came from an index that holds them and a sample of its blocks
// shows the same objects now; nothing otherwise (then they are found again: a pass over every block that
// reads each one's first words, most of a one-block command's time on a CPython heap).
std::optional<ObjectHeaders> Session::object_headers_from_cache() {
  if (!cached_ || !cached_->object_headers) return std::nullopt;
  PhaseTimer timer("cache: object headers");
  std::string why;
  if (check_saved_object_headers(*image_, symbols_, heap(), *cached_->object_headers, &why))
    return std::move(cached_->object_headers);
  refuse_saved(&CachedProducts::object_headers, saved_objects_refused_, why);
  return std::nullopt;
}

const ReferenceGraph& Session::graph() {
  // What the scan (or the saved graph's check) needs, before the cache's lock, which is held throughout:
  // products computed beside the scan (top's names) need these too, and find them made.
  block_index();
  roots();
  object_headers();
  std::lock_guard lock(cache_mutex_);
  if (!graph_.value && graph_.error.empty()) {
    heap();  // whether a saved index holds the graph is known once the heap is
    if (cached_ && !cached_graph_.value && cached_graph_.error.empty()) {
      try {
        product(cached_graph_, "cache: graph", [&] { return graph_from_cache(); });
      } catch (const AnalysisError&) {
        if (progress_here().stop_requested()) throw;  // else: refused, with its warning; scanned below
      }
    }
  }
  if (cached_graph_.value) return *cached_graph_.value;
  return product(graph_, "scan", [&] {
    const BlockIndex& index = block_index();
    const RootSet& r = roots();
    const std::optional<ObjectHeaders>& headers = object_headers();
    return std::make_unique<ReferenceGraph>(*image_, index, r, 0, headers ? &*headers : nullptr);
  });
}

std::unique_ptr<ReferenceGraph> Session::graph_from_cache() {
  const BlockIndex& index = block_index();
  const RootSet& r = roots();
  const std::optional<ObjectHeaders>& headers = object_headers();
  PhaseTimer timer("cache: check");
  std::unique_ptr<ReferenceGraph> g;
  std::string why;
  try {
    g = std::make_unique<ReferenceGraph>(*image_, index, r, std::move(cached_->graph), headers ? &*headers : nullptr);
  } catch (const std::invalid_argument& e) {
    why = e.what();
  }
  if (g && check_graph(*g, cached_->verdicts, &why)) {
    graph_from_cache_ = true;
    return g;
  }
  add_warnings({options_.index_cache->rejection(cache_key_, why)});
  cached_.reset();
  throw AnalysisError(why);
}

const LeakVerdicts& Session::verdicts() {
  std::lock_guard lock(cache_mutex_);
  if (!verdicts_.value) graph();  // saved verdicts are used only with the saved graph
  return product(verdicts_, graph_from_cache_ ? "cache: verdicts" : "reachability", [&] {
    // No block walked in a damaged image or heap leaves nothing to judge: "no leaks" would be a wrong answer.
    if (const HeapModel& h = heap(); h.blocks.empty() && (!h.complete || !image_->damage().empty()))
      throw AnalysisError(fmt::format("0 heap blocks were walked ({}), so nothing can be said of leaks",
                                      h.warnings.empty() ? "the heap's memory could not be read" : h.warnings.front()));
    if (graph_from_cache_) return std::make_unique<LeakVerdicts>(std::move(cached_->verdicts));
    return std::make_unique<LeakVerdicts>(compute_verdicts(graph(), heap(), options_.leak_idioms));
  });
}

bool Session::index_cache_outdated() const {
  std::lock_guard lock(cache_mutex_);
  // Computed here, or its saved block index, dominator tree, names or object headers refused (the rest of
  // the index was good).
  return options_.index_cache && !cache_key_.empty() &&
         ((graph_.value && !graph_from_cache_) ||
          (graph_from_cache_ &&
          (saved_pages_refused_ || saved_retention_refused_ || saved_names_refused_ || saved_objects_refused_)));
}

void Session::save_index_cache() {
  if (!index_cache_outdated()) return;
  // The dominator tree too, when this command did not need it: `retainers`, `top` and the other commands
  // that need it then start from it in a new process. The index is written after the output, so this costs
  // the command nothing.
  // So are the whole heap's names, for the commands about one block (describe, retainers, refs), whose
  // names would otherwise be computed over most of the heap: a reachable block's ancestors are.
  const Retention* r = nullptr;
  const BlockNames* n = nullptr;
  try {
    r = &retention();
  } catch (const AnalysisError&) {
    if (progress_.stop_requested()) throw;  // else: saved without it
  }
  try {
    n = &names();
  } catch (const AnalysisError&) {
    if (progress_.stop_requested()) throw;  // else: saved without them
  }
  const std::optional<ObjectHeaders>& headers = object_headers();
  std::lock_guard lock(cache_mutex_);
  const LeakVerdicts& v = verdicts();
  ProgressScope current(&progress_);
  PhaseScope phase(progress_, "cache: write");
  try {
    options_.index_cache->save(cache_key_, *heap_.value, graph_from_cache_ ? *cached_graph_.value : *graph_.value, v, r,
                               n ? &n->types : nullptr, n ? n->dwarf.get() : nullptr, headers ? &*headers : nullptr);
  } catch (const Interrupted&) {
    throw AnalysisError("interrupted");
  }
}

const HeapVerification& Session::verification() {
  return product(verification_, "verify", [&] {
    const HeapModel& h = heap();
    std::optional<HeapVerification> checked = allocator().verify(h);
    if (!checked) throw AnalysisError(allocator().name() + " has no checks of its own structures");
    return std::move(*checked);
  });
}

const Provenance& Session::provenance() {
  return product(provenance_, "provenance", [&] {
    const HeapModel& h = heap();
    AllocationSamples samples = allocator().allocation_samples(h);
    // Without samples there is nothing to match: no block index is built for them.
    const BlockIndex* index = samples.samples.empty() ? nullptr : &block_index();
    return build_provenance(*image_, symbols_, *dwarf_files_, h, index, find_malloc_provider(*image_, symbols_).module,
                            std::move(samples));
  });
}

const std::vector<std::vector<Frame>>& Session::frames() {
  return product(frames_, "frames", [&] {
    std::vector<std::string> warnings;
    auto frames = unwind_threads(*image_, symbols_, *dwarf_files_, &warnings);
    add_warnings(warnings);
    return frames;
  });
}

const CoroutineFrames& Session::coroutines() {
  return product(coroutines_, "coroutines", [&] { return find_coroutine_frames(*image_, symbols_, heap()); });
}

namespace {

// The names of `blocks` that certain evidence gave (DWARF, a symbol, RTTI); "" for the others.
std::vector<std::string> certain_names(const BlockTypes& types, std::span<const BlockId> blocks) {
  std::vector<std::string> out;
  out.reserve(blocks.size());
  for (const BlockId b : blocks) {
    const Naming n = types.naming(b);
    const bool certain = n == Naming::dwarf || n == Naming::symbol || n == Naming::rtti;
    out.push_back(certain ? types.name_of(types.type_id(b)) : std::string());
  }
  return out;
}

}  // namespace

std::unique_ptr<BlockNames> Session::name_blocks(const NamingScope& scope) {
  const HeapModel& h = heap();
  const BlockIndex& index = block_index();
  const RootSet& r = roots();
  const CoroutineFrames& coroutine_frames = coroutines();
  auto names = std::make_unique<BlockNames>(
      BlockNames{infer_types(*image_, symbols_, h, index, r, scope.within, scope.members), nullptr});
  type_coroutine_frames(names->types, coroutine_frames);
  if (const std::optional<ObjectHeaders>& objects = object_headers())
    name_runtime_objects(names->types, *objects, scope.within, scope.members);
  PhaseTimer dwarf_timer("dwarf types");
  PhaseScope dwarf_phase(progress_here(), "dwarf types");
  names->dwarf = std::make_unique<DwarfTypes>(dwarf_indexes_);
  // The call stacks and the verdicts are asked for only where they are used, so that a second thread
  // (top's) can compute them meanwhile.
  if (scope.from_roots)
    type_blocks_from_dwarf(*image_, symbols_, h, index, r, &frames(), names->types, *names->dwarf, scope.within);
  if (scope.leaks) {
    // The namers of leaks follow pointers from the leaked blocks into the leaked blocks alone, so that what
    // names a reachable block is the roots, whatever leaked (and reachable_names() and leak_names() give
    // each block what this gives it).
    const LeakVerdicts& v = verdicts();
    if (scope.only_leaked) {
      // What a tie of layout inference points to is mostly reachable: named as names() names it.
      const KnownNames known = [this](std::span<const BlockId> blocks) {
        return certain_names(names_for(blocks).types, blocks);
      };
      name_leaked_blocks(*image_, h, index, v, names->types, *names->dwarf, scope.within, scope.members, known);
      return names;
    }
    std::vector<bool> leaked(h.blocks.size(), false);
    std::vector<BlockId> members;
    for (const BlockId b : v.leaked)
      if (!scope.within || (*scope.within)[b]) {
        leaked[b] = true;
        members.push_back(b);
      }
    // The reachable blocks are named from the roots by now (from_roots: this naming covers every block
    // that leads to what it names).
    const KnownNames known = [&](std::span<const BlockId> blocks) { return certain_names(names->types, blocks); };
    name_leaked_blocks(*image_, h, index, v, names->types, *names->dwarf, &leaked, &members,
                       scope.from_roots ? known : KnownNames{});
  }
  return names;
}

const BlockNames& Session::names() {
  return product(names_, "types", [&] {
    if (std::unique_ptr<BlockNames> saved = names_from_cache()) return saved;
    return name_blocks({});
  });
}

// The saved names, when the graph came from the same index and they fit its heap; null otherwise (then
// they are computed, and a warning says why when the saved ones were refused). What could make them wrong
// is in the index's key (the modules' build-ids, heapscope's build, the options) or caught by the checks
// of its heap and graph; what is checked here is that they are whole.
std::unique_ptr<BlockNames> Session::names_from_cache() {
  std::lock_guard lock(cache_mutex_);
  if (!saved_at_hand(&CachedProducts::names)) return nullptr;
  PhaseTimer timer("cache: names");
  auto names = std::make_unique<BlockNames>();
  names->dwarf = std::make_unique<DwarfTypes>(dwarf_indexes_);
  std::string why;
  const CachedProducts::SavedNames& saved = *cached_->names;
  if (names_from_saved(saved.meta, saved.ids, saved.keep, heap().blocks.size(), cached_->checks, names->types,
                       *names->dwarf, &why))
    return names;
  refuse_saved(&CachedProducts::names, saved_names_refused_, why);
  return nullptr;
}

const BlockNames& Session::names_for(std::span<const BlockId> blocks) {
  if (const BlockNames* all = names_if_at_hand()) return *all;
  std::lock_guard lock(parts_mutex_);
  std::vector<BlockId> key(blocks.begin(), blocks.end());
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  // Each part's names hold an id per block of the heap: a debugger session asking about many blocks on
  // one stop keeps the last few, not all (a command asks once, so what it holds stays).
  constexpr std::size_t kPartsKept = 4;
  if (!names_of_parts_.count(key) && names_of_parts_.size() >= kPartsKept) {
    names_of_parts_.erase(parts_asked_.front());
    parts_asked_.erase(parts_asked_.begin());
  }
  if (!names_of_parts_.count(key)) parts_asked_.push_back(key);
  return product(names_of_parts_[key], "types of the blocks asked about", [&] {
    const std::vector<bool> within = ancestors_of(graph(), key);
    return name_blocks({.within = &within});
  });
}

const BlockNames& Session::leak_names() {
  if (const BlockNames* all = names_if_at_hand()) return *all;
  return product(leak_names_, "types of the leaked blocks", [&] {
    const LeakVerdicts& v = verdicts();
    std::vector<bool> leaked(v.verdict.size(), false);
    for (const BlockId b : v.leaked) leaked[b] = true;
    // No root reaches a leak: DWARF typing from the roots (and the call stacks it reads) has nothing to do.
    return name_blocks({.within = &leaked, .from_roots = false, .members = &v.leaked, .only_leaked = true});
  });
}

const BlockNames& Session::reachable_names() {
  if (const BlockNames* all = names_if_at_hand()) return *all;  // the same names for every reachable block
  return product(reachable_names_, "types of the reachable blocks", [&] { return name_blocks({.leaks = false}); });
}

const RetentionEdges& Session::retention_edges() {
  return product(retention_edges_, "dominators: what globals hold", [&] {
    const RootSet& r = roots();
    const ReferenceGraph& g = graph();
    return std::make_unique<RetentionEdges>(g, r);
  });
}

const Retention& Session::retention() {
  return product(retention_, "dominators", [&] {
    if (std::unique_ptr<Retention> saved = retention_from_cache()) return saved;
    const HeapModel& h = heap();
    const RootSet& r = roots();
    const ReferenceGraph& g = graph();
    // The dominator tree's depth-first numbering follows edges forward only; the reverse edges are first
    // asked for after it (a block's predecessors), and are built on a second thread meanwhile (once, for
    // every command that shares them: the tree waits for them there if they are not done).
    std::unique_ptr<Retention> out;
    run_workers(2, [&](unsigned worker) {
      if (worker == 1) {
        if (g.block_count() == 0) return;
        PhaseTimer timer("dominators: reverse edges");
        (void)g.in_edges(0);
        return;
      }
      const auto& f = frames();
      out = std::make_unique<Retention>(*image_, symbols_, h, r, g, &f);
    });
    return out;
  });
}

// The saved dominator tree, when the graph and verdicts came from the same index and it passes its check;
// null otherwise (then it is computed, and a warning says why when the saved one was refused).
std::unique_ptr<Retention> Session::retention_from_cache() {
  std::lock_guard lock(cache_mutex_);
  if (!saved_at_hand(&CachedProducts::retention)) return nullptr;
  const LeakVerdicts& v = verdicts();  // the index's too, then
  PhaseTimer timer("cache: dominators");
  std::string why;
  try {
    auto r = std::make_unique<Retention>(static_cast<std::uint32_t>(heap().blocks.size()), *cached_->retention);
    if (check_retention(*r, v, &why)) return r;
  } catch (const std::invalid_argument& e) {
    why = e.what();
  }
  refuse_saved(&CachedProducts::retention, saved_retention_refused_, why);
  return nullptr;
}

template <class Part>
bool Session::saved_at_hand(std::optional<Part> CachedProducts::*part) {
  heap();
  // Without a saved index nothing is saved: known without the graph, so that what asks (the names) need not
  // wait for the scan.
  if (!heap_from_index_) return false;
  std::lock_guard lock(cache_mutex_);
  graph();  // whether the index's graph was taken is known once the graph is
  return graph_from_cache_ && cached_ && (cached_.get()->*part).has_value();
}

template <class Part>
void Session::refuse_saved(std::optional<Part> CachedProducts::*part, bool& refused, const std::string& why) {
  add_warnings({options_.index_cache->rejection(cache_key_, why)});
  (cached_.get()->*part).reset();
  refused = true;  // the index is written again, with the part computed now
}

template <class T, class Part, class Get>
const T* Session::if_at_hand(Slot<T>& slot, std::optional<Part> CachedProducts::*part, Get get) {
  if (const T* made = computed(slot)) return made;
  return saved_at_hand(part) ? &get() : nullptr;
}

const Retention* Session::retention_if_at_hand() {
  return if_at_hand(retention_, &CachedProducts::retention, [this]() -> const Retention& { return retention(); });
}

std::optional<std::vector<bool>> Session::modules_pointing_to_blocks_if_ready() {
  const RootSet* roots = nullptr;
  const BlockIndex* index = nullptr;
  {
    std::unique_lock roots_lock(roots_.mutex, std::try_to_lock), index_lock(block_index_.mutex, std::try_to_lock);
    if (!roots_lock || !index_lock) return std::nullopt;  // being computed
    roots = roots_.value.get();
    index = block_index_.value.get();
  }
  if (!roots || !index) return std::nullopt;
  return modules_pointing_to_blocks(*image_, *index, *roots, static_tls_blocks(*image_, symbols_));
}

const BlockNames* Session::names_if_at_hand() {
  return if_at_hand(names_, &CachedProducts::names, [this]() -> const BlockNames& { return names(); });
}

void Session::compute_side_by_side(const std::function<void()>& a, const std::function<void()>& b) {
  // The display follows `a`, on this thread; `b` reports to a Progress of its own.
  ProgressScope current(&progress_);  // the workers take the caller's Progress
  run_workers(2, [&](unsigned worker) {
    if (worker == 0) return a();
    run_beside(b);
  });
}

void Session::run_beside(const std::function<void()>& fn, const std::atomic<bool>* stop) {
  // Two phases' counts in one display would make a meaningless percentage: this thread's are shown nowhere.
  Progress beside;
  beside.set_interrupt_check([this, stop] {
    if (stop && *stop) return true;
    try {
      progress_.check();
    } catch (const Interrupted&) {
      return true;
    }
    return false;
  });
  beside.begin(/*show=*/false);
  const std::thread::id me = std::this_thread::get_id();
  {
    std::lock_guard lock(mutex_);
    beside_.push_back({me, &beside});
  }
  struct Done {
    Session& s;
    std::thread::id me;
    ~Done() {
      std::lock_guard lock(s.mutex_);
      std::erase_if(s.beside_, [&](const BesideThread& t) { return t.thread == me; });
    }
  } done{*this, me};
  ProgressScope mine(&beside);
  fn();
}

Session::Ahead::Ahead(Session& session, std::function<void(const std::atomic<bool>& stop)> fn)
    : thread_([this, &session, work = std::move(fn)] {
        try {
          // Stopped, it is interrupted too, within a long step (a big module's DWARF), not only between steps.
          session.run_beside([&] { work(stop_); }, &stop_);
        } catch (...) {
        }
      }) {}

Session::Ahead::~Ahead() {
  stop_ = true;
  thread_.join();
}

Progress& Session::progress_here() {
  std::lock_guard lock(mutex_);
  for (const BesideThread& t : beside_)
    if (t.thread == std::this_thread::get_id()) return *t.progress;
  return progress_;
}

void Session::check_interrupted() {
  try {
    progress_.check(/*at_once=*/true);
  } catch (const Interrupted&) {
    throw AnalysisError("interrupted");
  }
}

void Session::add_warnings(const std::vector<std::string>& more) {
  std::lock_guard lock(mutex_);
  product_warnings_.insert(product_warnings_.end(), more.begin(), more.end());
}

Address Session::evaluate_address(const std::string& text) const {
  if (evaluate_) return evaluate_(text);
  if (const auto a = parse_address_literal(text)) return *a;
  throw AnalysisError("'" + text + "' is not an address (use 0x-prefixed hex or decimal)");
}

std::vector<std::string> Session::warnings() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> all = image_->warnings();
  const auto& sym = symbols_.warnings();
  all.insert(all.end(), sym.begin(), sym.end());
  all.insert(all.end(), product_warnings_.begin(), product_warnings_.end());
  std::vector<std::string> unique;
  for (auto& w : all)
    if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(std::move(w));
  return unique;
}

std::vector<std::string> Session::warnings_with(std::vector<std::string> own) const {
  for (std::string& w : warnings())
    if (std::find(own.begin(), own.end(), w) == own.end()) own.push_back(std::move(w));
  return own;
}

}  // namespace heapscope
