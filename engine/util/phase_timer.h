// Phase timing for benchmarks: with HEAPSCOPE_TIMING=1 in the environment, each analysis phase prints
// "heapscope: phase <name> <seconds> s" to stderr when it ends. Silent otherwise.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace heapscope {

class PhaseTimer {
 public:
  explicit PhaseTimer(const char* name) : name_(name), start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    static const bool enabled = std::getenv("HEAPSCOPE_TIMING") != nullptr;
    if (!enabled) return;
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    std::fprintf(stderr, "heapscope: phase %s %.3f s\n", name_, d.count());
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace heapscope
