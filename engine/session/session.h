// Session: one process image under analysis, with everything derived from it computed once, on first
// use, and shared by every command run against it (the heap walk now; roots and the graph later).
// Frontends create a Session over their Image and run commands against it; a debugger frontend makes a
// new Session whenever the process has run since the last one.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "heap/heap_model.h"
#include "image/image.h"
#include "symbols/symbol_index.h"

namespace heapscope {

struct SessionOptions {
  SymbolSearchOptions symbols;
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

  // The allocator walk; throws AnalysisError when there is no heap to walk.
  const HeapModel& heap();

  // Everything a user should know about: image, symbol and heap warnings, without duplicates.
  std::vector<std::string> warnings() const;

 private:
  std::shared_ptr<const Image> image_;
  SessionOptions options_;
  SymbolIndex symbols_;
  std::mutex mutex_;
  std::optional<HeapModel> heap_;
  std::string heap_error_;
};

}  // namespace heapscope
