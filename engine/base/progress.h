// Progress of a long analysis, and the way to stop one: the one progress concept every frontend adapts.
//
// A Session owns a Progress. The frontend gives it a display (what to do with "scan 42%") and an
// interrupt check (has the user pressed Ctrl-C?); the command runner starts and ends it around each
// command (begin/end), quiet for JSON output. While the Session computes a product it names the phase
// (PhaseScope: the product's name, the one `SessionOptions::on_product` is told) and installs the
// Progress as the computing thread's current one (ProgressScope). Long loops below the session — the
// heap walk, the pointer scan, typing, reachability, dominators — declare how much work they have with
// progress_total() and say what they did with progress_step(); a thread pool hands the current Progress
// to its workers (ProgressScope on each) and rethrows what they threw (ThreadErrors).
//
// progress_step() throws Interrupted once the frontend's check has said stop, so a loop never tests for
// it; the Session turns Interrupted into AnalysisError("interrupted") and keeps nothing of the product
// that was interrupted (the products finished before it stay).
//
// Throttling: the check and the display are called at most every kPollInterval, from whichever analysis
// thread gets there first, one call at a time (so they must not care which thread calls them); the
// display is not called at all in a command's first `delay` (short commands show nothing), and once it
// has shown something it is called a last time with done = true when the command ends, to clear it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace heapscope {

// Thrown from inside a computation when the frontend asked to stop it.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

struct ProgressStatus {
  std::string phase;     // the innermost phase running ("walk", "scan", "types", ...)
  double fraction = -1;  // 0..1 where the phase's work is counted; negative: not known
  bool done = false;     // the command is over: remove whatever was shown
  // "heapscope: scan 42%" (or "heapscope: roots ..." when the fraction is not known).
  std::string text() const;
};

class Progress {
 public:
  using Display = std::function<void(const ProgressStatus&)>;
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kDefaultDelay{1000};
  // kDefaultDelay, or HEAPSCOPE_PROGRESS_DELAY_MS (0 to 60000) from the environment: 0 shows the line from a
  // command's start (docs/usage.md; the tests of the progress line use it, commands having got fast).
  static std::chrono::milliseconds default_delay();
  static constexpr std::chrono::milliseconds kPollInterval{50};
  static constexpr std::chrono::milliseconds kDisplayInterval{100};

  Progress() = default;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Both may be empty. Set them between commands, not while one runs.
  void set_display(Display display, std::chrono::milliseconds delay = default_delay());
  void set_interrupt_check(std::function<bool()> check);
  const std::function<bool()>& interrupt_check() const { return check_; }

  // A command starts (its clock starts; a stop requested before is forgotten); show = false keeps the
  // display silent for this command (JSON output). end() clears what was shown; both are called by the
  // command runner (CommandProgress).
  void begin(bool show = true);
  void end();

  // Thread-safe. Polls the check (and maybe the display) when kPollInterval has passed, or at once with
  // `now` (the Session, before each product); throws Interrupted when a stop was requested.
  void check(bool now = false);
  bool stop_requested() const { return stop_.load(std::memory_order_relaxed); }

  // The work of the innermost phase: `units` in all, `units` more done (thread-safe; throws Interrupted).
  void set_total(std::uint64_t units);
  void step(std::uint64_t units);

  // The phases running, innermost last (PhaseScope pushes and pops; each phase keeps its own counts).
  void push_phase(std::string_view name);
  void pop_phase();

 private:
  struct Phase {
    std::string name;
    std::uint64_t total = 0;
    std::uint64_t done = 0;
  };
  void poll(Clock::time_point now);
  void show_locked(Clock::time_point now);

  std::mutex mutex_;  // guards everything below but the atomics
  Display display_;
  std::chrono::milliseconds delay_ = default_delay();
  std::function<bool()> check_;
  std::vector<Phase> phases_;  // the innermost one's counts live in total_/done_ while it runs
  bool show_ = false;
  bool shown_ = false;
  Clock::time_point started_{};
  Clock::time_point last_display_{};
  std::atomic<std::int64_t> next_poll_{0};  // Clock ticks
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> done_{0};
  std::atomic<bool> stop_{false};
};

// The Progress of the computation running on this thread (null outside one).
Progress* current_progress();

// Makes `progress` the current thread's Progress for its lifetime (a Session around a product; a thread
// pool's worker with the Progress of the thread that started it).
class ProgressScope {
 public:
  explicit ProgressScope(Progress* progress);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

 private:
  Progress* previous_;
};

// A named phase for the lifetime of the scope.
class PhaseScope {
 public:
  PhaseScope(Progress& progress, std::string_view name) : progress_(progress) { progress_.push_phase(name); }
  ~PhaseScope() { progress_.pop_phase(); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Progress& progress_;
};

// For loops below the session: no-ops when no Progress is current (unit tests, tools without one).
inline void progress_total(std::uint64_t units) {
  if (Progress* p = current_progress()) p->set_total(units);
}
inline void progress_step(std::uint64_t units) {
  if (Progress* p = current_progress()) p->step(units);
}
inline void progress_check() {
  if (Progress* p = current_progress()) p->check();
}
// A loop over millions of items checks once every kCheckMask + 1 of them: often enough for Ctrl-C to
// answer at once, seldom enough to cost nothing (`if ((i & kCheckMask) == 0) progress_check();`).
inline constexpr std::uint64_t kCheckMask = 0xffff;

// Runs `fn` with the current thread's Progress installed, keeping the first exception it throws for
// rethrow(): a worker of a thread pool (an exception must not leave a std::thread).
class ThreadErrors {
 public:
  ThreadErrors() : progress_(current_progress()) {}
  template <class Fn>
  void run(Fn&& fn) {
    ProgressScope scope(progress_);
    try {
      fn();
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!first_) first_ = std::current_exception();
    }
  }
  // On the thread that joined the workers.
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  Progress* progress_;
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace heapscope
