#include "base/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace heapscope {

namespace {

thread_local Progress* t_current = nullptr;

}  // namespace

std::string ProgressStatus::text() const {
  std::string line = "heapscope: " + (phase.empty() ? std::string("working") : phase);
  if (fraction >= 0) {
    const int percent = static_cast<int>(std::floor(std::min(fraction, 1.0) * 100));
    line += " " + std::to_string(percent) + "%";
  } else {
    line += " ...";
  }
  return line;
}

std::chrono::milliseconds Progress::default_delay() {
  static const std::chrono::milliseconds delay = [] {
    const char* text = std::getenv("HEAPSCOPE_PROGRESS_DELAY_MS");
    if (!text || !*text) return kDefaultDelay;
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    return *end == '\0' && ms >= 0 && ms <= 60000 ? std::chrono::milliseconds(ms) : kDefaultDelay;
  }();
  return delay;
}

void Progress::set_display(Display display, std::chrono::milliseconds delay) {
  std::lock_guard lock(mutex_);
  display_ = std::move(display);
  delay_ = delay;
}

void Progress::set_interrupt_check(std::function<bool()> check) {
  std::lock_guard lock(mutex_);
  check_ = std::move(check);
}

void Progress::begin(bool show) {
  std::lock_guard lock(mutex_);
  show_ = show;
  shown_ = false;
  started_ = Clock::now();
  last_display_ = {};
  stop_ = false;
  next_poll_ = 0;
}

void Progress::end() {
  std::lock_guard lock(mutex_);
  if (shown_ && display_) {
    ProgressStatus status;
    status.done = true;
    try {
      display_(status);
    } catch (...) {  // a display that fails only loses its line
    }
  }
  shown_ = false;
  show_ = false;
}

void Progress::check(bool at_once) {
  const Clock::time_point now = Clock::now();
  if (at_once || now.time_since_epoch().count() >= next_poll_.load(std::memory_order_relaxed)) poll(now);
  if (stop_requested()) throw Interrupted();
}

void Progress::set_total(std::uint64_t units) {
  total_ = units;
  done_ = 0;
}

void Progress::step(std::uint64_t units) {
  done_.fetch_add(units, std::memory_order_relaxed);
  check();
}

void Progress::push_phase(std::string_view name) {
  std::lock_guard lock(mutex_);
  if (!phases_.empty()) {
    phases_.back().total = total_;
    phases_.back().done = done_;
  }
  phases_.push_back({std::string(name), 0, 0});
  total_ = 0;
  done_ = 0;
  show_locked(Clock::now());  // a new phase is news: shown at once (past the delay)
}

void Progress::pop_phase() {
  std::lock_guard lock(mutex_);
  if (phases_.empty()) return;
  phases_.pop_back();
  total_ = phases_.empty() ? 0 : phases_.back().total;
  done_ = phases_.empty() ? 0 : phases_.back().done;
}

// One thread at a time asks the frontend; the others go on working (they see the stop at their next step).
void Progress::poll(Clock::time_point now) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  next_poll_ = (now + kPollInterval).time_since_epoch().count();
  if (check_) {
    bool stop = false;
    try {
      stop = check_();
    } catch (...) {
      stop = true;  // a check that cannot answer cannot let the command go on unstoppably
    }
    if (stop) stop_ = true;
  }
  if (now - last_display_ >= kDisplayInterval) show_locked(now);
}

void Progress::show_locked(Clock::time_point now) {
  if (!show_ || !display_ || stop_ || now - started_ < delay_) return;
  ProgressStatus status;
  if (!phases_.empty()) status.phase = phases_.back().name;
  const std::uint64_t total = total_, done = done_;
  if (total > 0) status.fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  last_display_ = now;
  shown_ = true;
  try {
    display_(status);
  } catch (...) {
  }
}

Progress* current_progress() { return t_current; }

ProgressScope::ProgressScope(Progress* progress) : previous_(t_current) { t_current = progress; }

ProgressScope::~ProgressScope() { t_current = previous_; }

}  // namespace heapscope
