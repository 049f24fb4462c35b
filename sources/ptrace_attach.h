// Stopping a running process for `heapscope attach`, and letting it go again exactly as it was.
//
// Every thread is seized (PTRACE_SEIZE) and stopped (PTRACE_INTERRUPT): no signal is sent, so the
// process cannot observe the stop, and a pending SIGSTOP cannot be left behind. Threads the process
// starts while we attach are caught by listing /proc/PID/task again until no new one appears. Each
// thread's registers are read with PTRACE_GETREGS; nothing is ever written.
//
// Detaching is guaranteed: by the destructor, on any error, and on SIGINT, SIGTERM and SIGHUP while
// the work runs (run_with_process_stopped). Should heapscope die anyway, the kernel detaches its
// tracees and they continue.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"

namespace heapscope {

class StoppedProcess {
 public:
  // Null with a one-sentence *error: no such process, permission denied (with the ptrace_scope hint),
  // already traced by a debugger, or heapscope itself.
  static std::unique_ptr<StoppedProcess> stop(int pid, std::string* error);
  ~StoppedProcess();  // detaches every thread
  StoppedProcess(const StoppedProcess&) = delete;
  StoppedProcess& operator=(const StoppedProcess&) = delete;

  int pid() const { return pid_; }
  // Every stopped thread with its registers (tid order; the main thread first).
  const std::vector<ThreadState>& threads() const { return threads_; }
  // Lets every thread run on, re-delivering any signal that arrived while we attached. Idempotent.
  void detach();

 private:
  struct Tracee {
    int tid = 0;
    int pending_signal = 0;  // a signal whose delivery we intercepted while stopping the thread
  };
  explicit StoppedProcess(int pid) : pid_(pid) {}
  bool attach_all(std::string* error);
  bool seize_new_threads(bool* found_new, std::string* error);
  bool wait_for_stop(Tracee& tracee);

  int pid_;
  std::vector<Tracee> tracees_;
  std::vector<ThreadState> threads_;
};

// Stops `pid`, calls work(threads) on a separate thread while this one (the tracer) watches for
// SIGINT/SIGTERM/SIGHUP, and detaches before returning. On such a signal the process is detached and
// heapscope exits with 128 + the signal number. Exceptions from work are rethrown after detaching.
// Returns false with *error when the process could not be stopped.
bool run_with_process_stopped(int pid, const std::function<void(const std::vector<ThreadState>&)>& work,
                              std::string* error);

}  // namespace heapscope
