// Phase timing for benchmarks: with HEAPSCOPE_TIMING=1 in the environment, each analysis phase prints
// "heapscope: phase <name> <seconds> s" to stderr when it ends. Silent otherwise. A phase's time is its
// own: while a nested phase runs on the same thread (a session product computing what it depends on),
// the outer one's clock stops, so the printed phases add up to the whole.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

namespace heapscope {

class PhaseTimer {
 public:
  explicit PhaseTimer(const char* name) : name_(name), parent_(innermost()) {
    if (parent_) parent_->pause();
    innermost() = this;
    start_ = Clock::now();
  }
  ~PhaseTimer() {
    pause();
    innermost() = parent_;
    if (parent_) parent_->start_ = Clock::now();
    static const bool enabled = std::getenv("HEAPSCOPE_TIMING") != nullptr;
    // On a terminal, over the progress line that may be there (base/progress.h), not after it.
    static const char* const clear_line = ::isatty(STDERR_FILENO) ? "\r\033[K" : "";
    if (enabled) std::fprintf(stderr, "%sheapscope: phase %s %.3f s\n", clear_line, name_, own_.count());
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  static PhaseTimer*& innermost() {
    thread_local PhaseTimer* current = nullptr;
    return current;
  }
  void pause() { own_ += Clock::now() - start_; }

  const char* name_;
  PhaseTimer* parent_;
  Clock::time_point start_;
  std::chrono::duration<double> own_{0};
};

}  // namespace heapscope
