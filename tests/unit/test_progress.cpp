// Progress (base/progress.h): the throttle, the phases, the interrupt from inside a loop and from a
// thread pool's worker, and a product interrupted in a Session keeping nothing while finished ones stay.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/progress.h"

using namespace heapscope;
using namespace std::chrono_literals;

TEST_CASE("progress: silent before its delay, then the innermost phase and its fraction, then cleared") {
  Progress progress;
  std::vector<ProgressStatus> shown;
  progress.set_display([&](const ProgressStatus& s) { shown.push_back(s); }, 200ms);
  progress.begin();
  ProgressScope current(&progress);
  {
    PhaseScope walk(progress, "walk");
    progress_total(100);
    progress_step(10);
    CHECK(shown.empty());  // within the delay
    std::this_thread::sleep_for(250ms);
    progress_step(40);
    REQUIRE(shown.size() == 1);
    CHECK(shown.back().phase == "walk");
    CHECK(shown.back().fraction == Approx(0.5));
    CHECK(shown.back().text() == "heapscope: walk 50%");
    {
      PhaseScope nested(progress, "roots");  // a new phase is shown at once, its fraction unknown
      REQUIRE(shown.size() == 2);
      CHECK(shown.back().phase == "roots");
      CHECK(shown.back().fraction < 0);
      CHECK(shown.back().text() == "heapscope: roots ...");
    }
    std::this_thread::sleep_for(Progress::kDisplayInterval + 10ms);
    progress_step(10);  // back in the walk, with its own counts
    CHECK(shown.back().phase == "walk");
    CHECK(shown.back().fraction == Approx(0.6));
  }
  progress.end();
  CHECK(shown.back().done);
}

TEST_CASE("progress: quiet for a command that asked for no display, and nothing to clear") {
  Progress progress;
  int calls = 0;
  progress.set_display([&](const ProgressStatus&) { ++calls; }, 0ms);
  progress.begin(/*show=*/false);
  PhaseScope phase(progress, "scan");
  progress.check(/*at_once=*/true);
  progress.end();
  CHECK(calls == 0);
}

TEST_CASE("progress: a stop requested by the check is thrown from the next step, even on a worker thread") {
  Progress progress;
  std::atomic<bool> stop{false};
  progress.set_interrupt_check([&] { return stop.load(); });
  progress.begin();
  ProgressScope current(&progress);
  PhaseScope phase(progress, "scan");
  progress_total(1000);
  CHECK_NOTHROW(progress_step(1));
  stop = true;
  ThreadErrors errors;
  std::atomic<int> steps{0};
  std::thread worker([&] {
    errors.run([&] {
      for (;;) {  // a loop with no test of its own: the step throws
        progress_step(1);
        ++steps;
        std::this_thread::sleep_for(1ms);
      }
    });
  });
  worker.join();
  CHECK_THROWS_AS(errors.rethrow(), Interrupted);
  CHECK(steps < 200);  // stopped within the poll interval (50 ms), with a margin
  CHECK(progress.stop_requested());
  progress.end();
  stop = false;
  progress.begin();  // the next command starts afresh
  CHECK_FALSE(progress.stop_requested());
  CHECK_NOTHROW(progress.check(/*at_once=*/true));
}

TEST_CASE("progress: loops outside a computation (no current Progress) neither report nor throw") {
  CHECK(current_progress() == nullptr);
  CHECK_NOTHROW(progress_total(10));
  CHECK_NOTHROW(progress_step(10));
  CHECK_NOTHROW(progress_check());
}
