// ServingThread: every call into a debugger's API from one thread, the one that runs the command.
//
// The engine works on several threads at once (heaps are walked and the pointer scan runs in parallel),
// but a debugger's API may only be used from the thread that runs the command: LLDB's SB calls take the
// target's API mutex, which the command's own thread may already hold, and GDB's Python (the C API's
// callbacks) belongs to GDB's main thread. So the command's thread runs the analysis on a worker thread
// and meanwhile serves the worker's calls one at a time (memory reads, expression evaluation), and every
// kIdleInterval runs an `idle` function of its own (to notice Ctrl-C and show progress). On the command's
// thread itself a call simply runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace heapscope {

class ServingThread {
 public:
  static constexpr std::chrono::milliseconds kIdleInterval{50};

  // The calling thread becomes the one that talks to the debugger.
  ServingThread() : owner_(std::this_thread::get_id()) {}
  ServingThread(const ServingThread&) = delete;
  ServingThread& operator=(const ServingThread&) = delete;

  // Runs fn on the serving thread and returns once it has run (exceptions travel back to the caller).
  // From another thread it waits until the serving thread serves it; outside run_serving() nobody would,
  // so it throws instead of waiting.
  void call(const std::function<void()>& fn);

  // On the serving thread: runs work on a new thread and serves its call()s until it returns. Rethrows
  // what work threw. `idle`, when given, runs on the serving thread every kIdleInterval, busy or not.
  void run_serving(const std::function<void()>& work, const std::function<void()>& idle = {});

  // Makes the current thread the serving thread (a later command may run on another thread than the one
  // that created the session).
  void adopt_current_thread() { owner_ = std::this_thread::get_id(); }

 private:
  struct Request {
    const std::function<void()>* fn = nullptr;
    std::exception_ptr error;
    bool done = false;
  };

  std::thread::id owner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Request*> pending_;
  bool serving_ = false;
  bool work_finished_ = false;
};

}  // namespace heapscope
