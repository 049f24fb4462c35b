// LldbThread: every call into LLDB's SB API from one thread, the one that runs the `heap` command.
//
// The engine reads memory from several threads at once (heaps are walked and the pointer scan runs in
// parallel), but SB calls take the target's API mutex, which the command's own thread may already hold
// (SBCommandInterpreter::HandleCommand locks it around the command when a script or an IDE runs `heap`).
// A worker thread calling LLDB directly could therefore wait forever for a lock its own command holds.
// So the command's thread runs the analysis on a worker thread and meanwhile serves the worker's LLDB
// calls one at a time; on the command's thread itself a call simply runs.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace heapscope::lldb_plugin {

class LldbThread {
 public:
  // The calling thread becomes the one that talks to LLDB.
  LldbThread() : owner_(std::this_thread::get_id()) {}
  LldbThread(const LldbThread&) = delete;
  LldbThread& operator=(const LldbThread&) = delete;

  // Runs fn on the LLDB thread and returns once it has run (exceptions travel back to the caller).
  // From another thread it waits until the LLDB thread serves it; outside run_serving() nobody would,
  // so it throws instead of waiting.
  void call(const std::function<void()>& fn);

  // On the LLDB thread: runs work on a new thread and serves its call()s until it returns. Rethrows
  // what work threw. `idle`, when given, runs on the LLDB thread every 50 ms while nothing needs
  // serving (the plugin uses it to notice Ctrl-C).
  void run_serving(const std::function<void()>& work, const std::function<void()>& idle = {});

  // Makes the current thread the LLDB thread (a later command may run on another thread than the one
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

}  // namespace heapscope::lldb_plugin
