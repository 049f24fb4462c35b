// Session: one process image under analysis and the products derived from it — the allocator, its heap,
// the C library's threads, roots, the block index, the pointer graph, leak verdicts, call stacks, block
// names and retention — each computed once, on first use, from the products it names, and shared by every
// command run against the session. Frontends create a Session over their Image; a debugger frontend makes
// a new one whenever the process has run since the last.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "frames/unwind.h"
#include "heap/heap_check.h"
#include "heap/heap_model.h"
#include "image/image.h"
#include "model/block_index.h"
#include "model/leak_verdicts.h"
#include "model/provenance.h"
#include "model/reference_graph.h"
#include "model/retention.h"
#include "model/roots.h"
#include "runtime/allocator.h"
#include "runtime/libc_runtime.h"
#include "session/index_cache.h"
#include "session/snapshot_store.h"
#include "symbols/symbol_index.h"
#include "types/block_types.h"
#include "types/coroutine_frames.h"
#include "types/dwarf_typing.h"

namespace heapscope {

class Session;

struct SessionOptions {
  SymbolSearchOptions symbols;
  // Named heap snapshots (`snapshot save`), shared by the Sessions of one target so that they outlive
  // each stop's Session; a Session given none makes its own.
  std::shared_ptr<SnapshotStore> snapshots;
  // What snapshot reports call this session's current state (the CLI: the core's file name); empty: "now".
  std::string state_name;
  // The allocator plug-ins to ask, in order; empty: the built-in ones (runtime/builtin/).
  std::vector<const AllocatorPlugin*> allocators;
  // How this frontend opens another core of the same program, for the commands over a series of cores
  // (`diff OLD`, `evolution CORE…`, `report --earlier CORE`); unset, they say this frontend cannot.
  // frontends/common's core_opener() makes one.
  std::function<std::unique_ptr<Session>(const std::string& core, std::string* error)> open_core;
  // Told the name of each product as its computation starts ("walk", "roots", …), the phase names the
  // session's Progress shows too: a way for tests to see that each is computed once.
  std::function<void(std::string_view product)> on_product;
  // Where the heap, graph and verdicts of this core are saved for the next process (session/index_cache.h);
  // null: computed here, saved nowhere. The CLI sets it for a core file unless told --no-cache.
  std::shared_ptr<IndexCache> index_cache;
  // The interior-pointer idioms that make a block reachable (model/interior_idioms.h): memcheck's
  // --leak-check-heuristics, all by default.
  IdiomSet leak_idioms = kAllIdioms;
};

// Thrown when an analysis cannot produce anything useful (e.g. no heap in the image); commands turn it into
// a clear error message.
class AnalysisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Block names: symbol typing, coroutine frames, DWARF typing from roots, then the namers of leaked blocks
// (types/leak_naming.h), computed together; each type id keeps the evidence that named it.
struct BlockNames {
  BlockTypes types;
  std::unique_ptr<DwarfTypes> dwarf;
};

class Session {
 public:
  Session(std::shared_ptr<const Image> image, SessionOptions options);
  ~Session();

  const Image& image() const { return *image_; }
  const SymbolIndex& symbols() const { return symbols_; }
  const SessionOptions& options() const { return options_; }
  SnapshotStore& snapshots() const { return *options_.snapshots; }

  // The products. Those that need the heap throw AnalysisError when there is none (and say why: an
  // allocator no plug-in walks, say).
  const LocatedAllocator& allocator();    // which allocator serves malloc, located
  const HeapModel& heap();                // its walk
  const LibcThreads& libc_threads();      // the C library's thread descriptors, exited threads included
  const RootSet& roots();
  const BlockIndex& block_index();        // address → allocated block, for every product that needs one
  // A runtime's fixed object headers (CPython's PyGC_Head), when the image runs one heapscope knows.
  const std::optional<ObjectHeaders>& object_headers();
  const ReferenceGraph& graph();          // pointer scan of blocks and roots
  const LeakVerdicts& verdicts();
  const HeapVerification& verification(); // the allocator's checks of its own structures (`verify`)
  // Where sampled blocks were allocated, from the allocator's own heap profiling (model/provenance.h):
  // read only by the commands that show sites; without sampling in the process, nothing is walked.
  const Provenance& provenance();
  // Call stacks of every thread (indexed like Image::threads()); needs no heap, never throws for a bad stack.
  const std::vector<std::vector<Frame>>& frames();
  const CoroutineFrames& coroutines();    // C++20 coroutine frames on the heap and their awaiters
  // The DWARF type index of each module, built on first use and shared by every naming of the session.
  const DwarfIndexes& dwarf_indexes() const { return *dwarf_indexes_; }
  const BlockNames& names();              // every block's name and DWARF type
  const BlockTypes& types() { return names().types; }
  const DwarfTypes& dwarf_types() { return *names().dwarf; }
  // The names of `blocks` and of the blocks that lead to them (their ancestors in the graph): what names()
  // gives them, computed over that part of the heap alone — what a command about one block needs. Once
  // names() is computed or saved in the index cache, that; otherwise kept for the last few sets of blocks
  // asked about. (So are leak_names() and reachable_names().)
  const BlockNames& names_for(std::span<const BlockId> blocks);
  // The names of the leaked blocks: what names() gives them, computed over the leaked blocks alone (no
  // reachable block points to a leak, so they are closed under predecessors) — what `leaks` needs, at
  // the cost of the leaks rather than of the heap. Once names() is computed, that.
  const BlockNames& leak_names();
  // The names of the reachable blocks: what names() gives them, without the namers of leaked blocks
  // (nothing reachable is reached through a leak) — what `top` needs, whose every row and suspect is
  // reachable. Once names() is computed, that.
  const BlockNames& reachable_names();
  // The pointers that hold what they point to (model/retention_edges.h): what a block's retained size by
  // removal counts (the dominator tree finds the borrowed ones itself: FirstReach::owned).
  const RetentionEdges& retention_edges();
  const Retention& retention();           // dominator tree and retained sizes (from the index cache when saved)
  // The dominator tree when it is at hand: built already by a command at this stop, or saved in the index
  // cache the graph came from (loading it costs little); null otherwise.
  const Retention* retention_if_at_hand();
  // Per module, whether its static data or TLS points to a block (types/dwarf_typing.h), once the roots and
  // the block index are computed; nullopt before (it never waits for them).
  std::optional<std::vector<bool>> modules_pointing_to_blocks_if_ready();

  // Computes the products `a` and `b` ask for on two threads at once (what they share first: each is
  // computed once, by whichever asks first), for commands that need two costly products independent of
  // each other (`top`: every block's name, and the dominator tree). Rethrows the first error.
  void compute_side_by_side(const std::function<void()>& a, const std::function<void()>& b);

  // Work a later step will need, started early on a thread of its own beside what the caller computes
  // meanwhile (top builds the DWARF indexes and unwinds the stacks while the heap is walked): fn(stop) runs
  // like compute_side_by_side's second thread, reporting to a Progress shown nowhere that stops when the
  // session's does. What it throws is dropped: the step that needs the product meets the same error
  // computing it. Destroying the handle sets `stop` and waits for the thread: fn sees `stop`, and the
  // loops below it that check their progress stop too (they throw Interrupted, which is dropped).
  class Ahead {
   public:
    Ahead(Session& session, std::function<void(const std::atomic<bool>& stop)> fn);
    ~Ahead();
    Ahead(const Ahead&) = delete;
    Ahead& operator=(const Ahead&) = delete;

   private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
  };

  // Lets a frontend stop a long analysis (Ctrl-C): checked before every product and, through the
  // session's Progress, every 50 ms inside long loops (walk, scan, typing, reachability, dominators), from
  // any analysis thread (so it must be thread-safe and cheap: an atomic flag). When it returns true the
  // product being computed throws AnalysisError("interrupted") and nothing half-done is kept; products
  // finished before stay for the next command.
  void set_interrupt_check(std::function<bool()> check) { progress_.set_interrupt_check(std::move(check)); }
  // Progress of the products being computed (base/progress.h): the frontend sets its display; the command
  // runner begins and ends it around each command.
  Progress& progress() { return progress_; }

  // Turns an address argument into an address. The default reads numbers (0x hex or decimal); a
  // debugger frontend installs its own expression evaluator. Throws AnalysisError on bad input.
  using AddressEvaluator = std::function<Address(const std::string&)>;
  void set_address_evaluator(AddressEvaluator evaluator) { evaluate_ = std::move(evaluator); }
  Address evaluate_address(const std::string& text) const;

  // Saves the heap, the graph (its reverse edges built first) and the verdicts (computed first when no
  // command has) to the options' index cache, when this session scanned the graph itself rather than
  // loading it; the CLI calls it once the command's output is out. Throws std::runtime_error when the
  // index cannot be written and AnalysisError("interrupted") when stopped; no partial file is left.
  void save_index_cache();
  // Whether save_index_cache() has anything to write.
  bool index_cache_outdated() const;

  // Everything a user should know about: the image's and the symbols' warnings, then those of every
  // product computed so far, each once. The command runner puts them on every report.
  std::vector<std::string> warnings() const;
  // A report's own warnings (what the command concluded, first), then the session's not among them.
  std::vector<std::string> warnings_with(std::vector<std::string> own) const;

 private:
  // One product: its value once computed, or the error that computing it gave (kept, so that a heap that
  // cannot be walked is not walked again by the next command).
  // Each has its own lock, so that two products that need nothing of each other can be computed side by
  // side on two threads (compute_side_by_side); one asking for another waits only for that one.
  template <class T>
  struct Slot {
    std::recursive_mutex mutex;
    std::unique_ptr<T> value;
    std::string error;
  };
  template <class T, class Compute>
  const T& product(Slot<T>& slot, const char* name, Compute&& compute);
  // The slot's value when computed already (null otherwise), asking for no other lock than the slot's.
  template <class T>
  const T* computed(Slot<T>& slot);
  void check_interrupted();
  // What a naming covers: the blocks `within` flags (every block when null), which `members`, when given,
  // lists in order; `from_roots`: typed by DWARF from the roots too (false only when `within` holds no
  // reachable block); `leaks`: the leaked blocks named by the namers of leaks too.
  struct NamingScope {
    const std::vector<bool>* within = nullptr;
    bool from_roots = true;
    bool leaks = true;
    const std::vector<BlockId>* members = nullptr;
    bool only_leaked = false;  // `within` is the leaked blocks and `members` their list (leak_names)
  };
  std::unique_ptr<BlockNames> name_blocks(const NamingScope& scope);
  void add_warnings(const std::vector<std::string>& more);
  // names() when some command has computed it or the index cache the graph came from holds them (loading
  // them costs little); null otherwise.
  const BlockNames* names_if_at_hand();
  // The Progress that products computed on this thread report to: the session's, or the second thread's
  // own in compute_side_by_side.
  Progress& progress_here();
  // The index cache's part of heap() and graph(). heap_from_cache: null when there is no saved index or its
  // heap fails the check; graph_from_cache throws AnalysisError when its graph fails the check. Either way
  // the products are then computed as without a cache, and saved again.
  std::unique_ptr<HeapModel> heap_from_cache();
  std::unique_ptr<ReferenceGraph> graph_from_cache();
  std::unique_ptr<Retention> retention_from_cache();  // null when not saved or refused (retention())
  std::unique_ptr<BlockNames> names_from_cache();  // null when not saved or refused (names())
  std::optional<ObjectHeaders> object_headers_from_cache();  // nothing when not saved or refused
  // Whether the graph came from an index that holds this saved part (the dominator tree, the names), not
  // yet refused.
  template <class Part>
  bool saved_at_hand(std::optional<Part> CachedProducts::*part);
  // A product computed already at this stop, or one whose saved part the index the graph came from holds
  // (got by `get`: loading it costs little); null otherwise.
  template <class T, class Part, class Get>
  const T* if_at_hand(Slot<T>& slot, std::optional<Part> CachedProducts::*part, Get get);
  // A saved part that failed its own check: a warning says why, the part is dropped, and `refused` has the
  // index written again with it computed now.
  template <class Part>
  void refuse_saved(std::optional<Part> CachedProducts::*part, bool& refused, const std::string& why);

  std::shared_ptr<const Image> image_;
  SessionOptions options_;
  SymbolIndex symbols_;
  std::shared_ptr<const DwarfFiles> dwarf_files_;  // one per module, shared by the unwinder and dwarf_indexes_
  std::shared_ptr<const DwarfIndexes> dwarf_indexes_;
  mutable std::mutex mutex_;        // guards product_warnings_ and beside_ (held for no computation)
  struct BesideThread {
    std::thread::id thread;
    Progress* progress = nullptr;
  };
  std::vector<BesideThread> beside_;  // compute_side_by_side's second thread and Ahead's, while they run
  // Runs fn on this thread (a second one) with a Progress of its own, shown nowhere, that stops when the
  // session's does and asks the frontend itself, so that Ctrl-C works while the first thread only waits;
  // and when `stop`, if given, is set.
  void run_beside(const std::function<void()>& fn, const std::atomic<bool>* stop = nullptr);
  std::mutex on_product_mutex_;     // one call of options_.on_product at a time
  std::recursive_mutex parts_mutex_;  // guards names_of_parts_ and parts_asked_
  std::vector<std::string> product_warnings_;
  Slot<LocatedAllocator> allocator_;
  Slot<HeapModel> heap_;
  Slot<LibcThreads> libc_threads_;
  Slot<RootSet> roots_;
  Slot<BlockIndex> block_index_;
  Slot<std::optional<ObjectHeaders>> object_headers_;
  Slot<ReferenceGraph> graph_;         // scanned
  Slot<ReferenceGraph> cached_graph_;  // or from a saved index (graph_from_cache_)
  Slot<LeakVerdicts> verdicts_;
  Slot<HeapVerification> verification_;
  Slot<Provenance> provenance_;
  Slot<std::vector<std::vector<Frame>>> frames_;
  Slot<CoroutineFrames> coroutines_;
  Slot<BlockNames> names_;
  std::map<std::vector<BlockId>, Slot<BlockNames>> names_of_parts_;
  Slot<BlockNames> leak_names_;
  Slot<BlockNames> reachable_names_;
  std::vector<std::vector<BlockId>> parts_asked_;  // names_of_parts_'s keys, oldest first
  Slot<RetentionEdges> retention_edges_;
  Slot<Retention> retention_;
  AddressEvaluator evaluate_;
  Progress progress_;
  // Guards the cache's state below and orders graph() and verdicts() with it (held while they compute:
  // whether the graph comes from the index decides how both are made). What the scan needs is made before
  // it, and block_index() and object_headers() give what is made without this lock, so that a product
  // computed beside the scan (top's names) does not wait for it.
  mutable std::recursive_mutex cache_mutex_;
  std::string cache_key_;                  // this core's key in the index cache; empty: no cache
  std::unique_ptr<CachedProducts> cached_;  // a saved index whose heap was taken, graph not yet checked
  bool graph_from_cache_ = false;
  // Whether heap() took its heap from a saved index: set once, before heap() returns, and never again, so
  // read without the cache's lock (which the scan holds throughout) by products computed beside the scan.
  std::atomic<bool> heap_from_index_{false};
  bool saved_pages_refused_ = false;
  bool saved_retention_refused_ = false;
  bool saved_names_refused_ = false;
  bool saved_objects_refused_ = false;
};

}  // namespace heapscope
