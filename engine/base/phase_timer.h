// Phase timing for benchmarks: with HEAPSCOPE_TIMING=1 in the environment, each analysis phase prints
// "heapscope: phase <name> <seconds> s" to stderr when it ends. Silent otherwise. A phase's time is its
// own: while a nested phase runs on the same thread (a session product computing what it depends on),
// the outer one's clock stops, so the printed phases add up to the whole. HEAPSCOPE_TIMING=memory also
// prints the process's anonymous RSS as each phase ends (what the products hold; the mmapped core's pages
// are not anonymous), for the memory figures of the benchmarks.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

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
    static const char* const setting = std::getenv("HEAPSCOPE_TIMING");
    if (!setting) return;
    // On a terminal, over the progress line that may be there (base/progress.h), not after it.
    static const char* const clear_line = ::isatty(STDERR_FILENO) ? "\r\033[K" : "";
    static const bool memory = std::string_view(setting) == "memory";
    if (memory)
      std::fprintf(stderr, "%sheapscope: phase %s %.3f s, anon RSS %.1f MiB\n", clear_line, name_, own_.count(),
                   anonymous_rss_kib() / 1024.0);
    else
      std::fprintf(stderr, "%sheapscope: phase %s %.3f s\n", clear_line, name_, own_.count());
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
  static long anonymous_rss_kib() {
    long kib = -1;
    if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "RssAnon: %ld kB", &kib) == 1) break;
      std::fclose(f);
    }
    return kib;
  }

  const char* name_;
  PhaseTimer* parent_;
  Clock::time_point start_;
  std::chrono::duration<double> own_{0};
};

}  // namespace heapscope
