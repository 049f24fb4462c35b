// Session: one process image under analysis, with everything derived from it computed once, on first
// use, and shared by every command run against it (the heap walk now; roots and the graph later).
// Frontends create a Session over their Image and run commands against it; a debugger frontend makes a
// new Session whenever the process has run since the last one.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/heap_snapshot.h"
#include "analysis/leak_verdicts.h"
#include "analysis/retention.h"
#include "frames/unwind.h"
#include "graph/reference_graph.h"
#include "graph/roots.h"
#include "heap/heap_model.h"
#include "types/block_types.h"
#include "types/coroutine_frames.h"
#include "types/dwarf_typing.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct SessionOptions {
  SymbolSearchOptions symbols;
  // Named heap snapshots (`snapshot save`), shared by the Sessions of one target so that they outlive
  // each stop's Session; a Session given none makes its own.
  std::shared_ptr<SnapshotStore> snapshots;
  // What snapshot reports call this session's current state (the CLI: the core's file name); empty: "now".
  std::string state_name;
};

// Thrown when an analysis cannot produce anything useful (e.g. no glibc heap in the image); commands
// turn it into a clear error message.
class AnalysisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Session {
 public:
  Session(std::shared_ptr<const Image> image, SessionOptions options);

  const Image& image() const { return *image_; }
  const SymbolIndex& symbols() const { return symbols_; }
  const SessionOptions& options() const { return options_; }
  SnapshotStore& snapshots() const { return *options_.snapshots; }

  // Each layer is computed on first use and kept; all throw AnalysisError when there is no heap.
  const HeapModel& heap();                // the allocator walk
  const RootSet& roots();
  const ReferenceGraph& graph();          // pointer scan of blocks and roots
  const LeakVerdicts& verdicts();
  const BlockTypes& types();              // symbol typing, coroutine frames, then DWARF typing
  const DwarfTypes& dwarf_types();        // each block's DWARF type (computed with types())
  const CoroutineFrames& coroutines();   // C++20 coroutine frames on the heap and their awaiters
  const Retention& retention();          // dominator tree and retained sizes
  // Call stacks of every thread (indexed like Image::threads()); needs no heap, never throws for a bad stack.
  const std::vector<std::vector<Frame>>& frames();

  // Turns an address argument into an address. The default reads numbers (0x hex or decimal); a
  // debugger frontend installs its own expression evaluator. Throws AnalysisError on bad input.
  // Lets a frontend stop a long analysis (Ctrl-C in a debugger): checked before every phase; when it
  // returns true the phase throws AnalysisError("interrupted") and nothing half-done is kept.
  void set_interrupt_check(std::function<bool()> check) { interrupted_ = std::move(check); }

  using AddressEvaluator = std::function<Address(const std::string&)>;
  void set_address_evaluator(AddressEvaluator evaluator) { evaluate_ = std::move(evaluator); }
  Address evaluate_address(const std::string& text) const;

  // Everything a user should know about: image, symbol and heap warnings, without duplicates.
  std::vector<std::string> warnings() const;

 private:
  std::shared_ptr<const Image> image_;
  SessionOptions options_;
  SymbolIndex symbols_;
  std::recursive_mutex mutex_;
  std::optional<HeapModel> heap_;
  std::string heap_error_;
  std::optional<RootSet> roots_;
  std::unique_ptr<ReferenceGraph> graph_;
  std::optional<LeakVerdicts> verdicts_;
  std::optional<BlockTypes> types_;
  std::optional<CoroutineFrames> coroutines_;
  std::unique_ptr<DwarfTypes> dwarf_types_;
  std::unique_ptr<Retention> retention_;
  std::optional<std::vector<std::vector<Frame>>> frames_;
  std::vector<std::string> frame_warnings_;
  AddressEvaluator evaluate_;
  std::function<bool()> interrupted_;
  void check_interrupted() const;
};

}  // namespace heapscope
