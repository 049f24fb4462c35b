#include "session/session.h"

#include <algorithm>

#include "heap/glibc/glibc_heap.h"
#include "util/phase_timer.h"

namespace heapscope {

Session::Session(std::shared_ptr<const Image> image, SessionOptions options)
    : image_(std::move(image)), options_(std::move(options)), symbols_(*image_, options_.symbols) {
  if (!options_.snapshots) options_.snapshots = std::make_shared<SnapshotStore>();
}

const HeapModel& Session::heap() {
  std::lock_guard lock(mutex_);
  if (!heap_ && heap_error_.empty()) {
    std::string error;
    check_interrupted();
    PhaseTimer timer("walk");
    heap_ = glibc::walk_heap(*image_, symbols_, &error);
    if (!heap_) heap_error_ = error.empty() ? "no heap found" : error;
  }
  if (!heap_) throw AnalysisError(heap_error_);
  return *heap_;
}

const RootSet& Session::roots() {
  std::lock_guard lock(mutex_);
  if (!roots_) {
    const HeapModel& h = heap();
    check_interrupted();
    PhaseTimer timer("roots");
    roots_ = collect_roots(*image_, h, symbols_);
  }
  return *roots_;
}

const ReferenceGraph& Session::graph() {
  std::lock_guard lock(mutex_);
  if (!graph_) {
    const HeapModel& h = heap();
    const RootSet& r = roots();
    check_interrupted();
    PhaseTimer timer("index+scan");
    graph_ = std::make_unique<ReferenceGraph>(*image_, h, r);
  }
  return *graph_;
}

const LeakVerdicts& Session::verdicts() {
  std::lock_guard lock(mutex_);
  if (!verdicts_) {
    const ReferenceGraph& g = graph();
    check_interrupted();
    PhaseTimer timer("reachability");
    verdicts_ = compute_verdicts(g, heap());
  }
  return *verdicts_;
}

const BlockTypes& Session::types() {
  std::lock_guard lock(mutex_);
  if (!types_) {
    const HeapModel& h = heap();
    const RootSet& r = roots();
    check_interrupted();
    PhaseTimer timer("types");
    BlockTypes types = infer_types(*image_, symbols_, h, r);
    type_coroutine_frames(types, coroutines());
    PhaseTimer dwarf_timer("dwarf types");
    auto dwarf = std::make_unique<DwarfTypes>(*image_, symbols_);
    type_blocks_from_dwarf(*image_, symbols_, h, &frames(), types, *dwarf);
    dwarf_types_ = std::move(dwarf);
    types_ = std::move(types);
  }
  return *types_;
}

const DwarfTypes& Session::dwarf_types() {
  std::lock_guard lock(mutex_);
  types();
  return *dwarf_types_;
}

const CoroutineFrames& Session::coroutines() {
  std::lock_guard lock(mutex_);
  if (!coroutines_) {
    const HeapModel& h = heap();
    check_interrupted();
    PhaseTimer timer("coroutines");
    coroutines_ = find_coroutine_frames(*image_, symbols_, h);
  }
  return *coroutines_;
}

const Retention& Session::retention() {
  std::lock_guard lock(mutex_);
  if (!retention_) {
    const ReferenceGraph& g = graph();
    const RootSet& r = roots();
    const auto& f = frames();
    check_interrupted();
    PhaseTimer timer("dominators");
    retention_ = std::make_unique<Retention>(*image_, symbols_, heap(), r, g, &f);
  }
  return *retention_;
}

const std::vector<std::vector<Frame>>& Session::frames() {
  std::lock_guard lock(mutex_);
  if (!frames_) {
    check_interrupted();
    PhaseTimer timer("frames");
    frames_ = unwind_threads(*image_, symbols_, &frame_warnings_);
  }
  return *frames_;
}

void Session::check_interrupted() const {
  if (interrupted_ && interrupted_()) throw AnalysisError("interrupted");
}

Address Session::evaluate_address(const std::string& text) const {
  if (evaluate_) return evaluate_(text);
  try {
    std::size_t used = 0;
    const Address a = std::stoull(text, &used, 0);
    if (used == text.size()) return a;
  } catch (const std::exception&) {
  }
  throw AnalysisError("'" + text + "' is not an address (use 0x-prefixed hex or decimal)");
}

std::vector<std::string> Session::warnings() const {
  std::vector<std::string> all = image_->warnings();
  const auto& sym = symbols_.warnings();
  all.insert(all.end(), sym.begin(), sym.end());
  if (heap_) all.insert(all.end(), heap_->warnings.begin(), heap_->warnings.end());
  if (roots_) all.insert(all.end(), roots_->warnings.begin(), roots_->warnings.end());
  if (coroutines_) all.insert(all.end(), coroutines_->warnings.begin(), coroutines_->warnings.end());
  all.insert(all.end(), frame_warnings_.begin(), frame_warnings_.end());
  std::vector<std::string> unique;
  for (auto& w : all)
    if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(std::move(w));
  return unique;
}

}  // namespace heapscope
