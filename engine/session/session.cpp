#include "session/session.h"

#include <algorithm>

#include "heap/glibc/glibc_heap.h"

namespace heapscope {

Session::Session(std::shared_ptr<const Image> image, SessionOptions options)
    : image_(std::move(image)), options_(std::move(options)), symbols_(*image_, options_.symbols) {}

const HeapModel& Session::heap() {
  std::lock_guard lock(mutex_);
  if (!heap_ && heap_error_.empty()) {
    std::string error;
    heap_ = glibc::walk_heap(*image_, symbols_, &error);
    if (!heap_) heap_error_ = error.empty() ? "no heap found" : error;
  }
  if (!heap_) throw AnalysisError(heap_error_);
  return *heap_;
}

std::vector<std::string> Session::warnings() const {
  std::vector<std::string> all = image_->warnings();
  const auto& sym = symbols_.warnings();
  all.insert(all.end(), sym.begin(), sym.end());
  if (heap_) all.insert(all.end(), heap_->warnings.begin(), heap_->warnings.end());
  std::vector<std::string> unique;
  for (auto& w : all)
    if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(std::move(w));
  return unique;
}

}  // namespace heapscope
