#include "base/serving_thread.h"

#include <stdexcept>

namespace heapscope {

void ServingThread::call(const std::function<void()>& fn) {
  if (std::this_thread::get_id() == owner_) {
    fn();
    return;
  }
  Request request;
  request.fn = &fn;
  std::unique_lock lock(mutex_);
  if (!serving_) throw std::logic_error("heapscope: a debugger call from a thread outside a running command");
  pending_.push_back(&request);
  changed_.notify_all();
  changed_.wait(lock, [&] { return request.done; });
  if (request.error) std::rethrow_exception(request.error);
}

void ServingThread::run_serving(const std::function<void()>& work, const std::function<void()>& idle) {
  {
    std::lock_guard lock(mutex_);
    serving_ = true;
    work_finished_ = false;
  }
  std::exception_ptr work_error;
  std::thread worker;
  try {
    worker = std::thread([&] {
      try {
        work();
      } catch (...) {
        work_error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      work_finished_ = true;
      changed_.notify_all();
    });
  } catch (...) {  // no thread to be had: nobody will call, so stop serving
    std::lock_guard lock(mutex_);
    serving_ = false;
    throw;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_idle = Clock::now() + kIdleInterval;
  for (;;) {
    // Idle work is due every interval even while calls keep coming (a live process's memory reads).
    if (Clock::now() >= next_idle) {
      if (idle) idle();
      next_idle = Clock::now() + kIdleInterval;
    }
    std::unique_lock lock(mutex_);
    const auto ready = [&] { return work_finished_ || !pending_.empty(); };
    if (!changed_.wait_until(lock, next_idle, ready)) continue;
    if (pending_.empty()) break;  // the work is over and asked for nothing more
    Request* request = pending_.front();
    pending_.pop_front();
    lock.unlock();
    try {
      (*request->fn)();
    } catch (...) {
      request->error = std::current_exception();
    }
    lock.lock();
    request->done = true;
    changed_.notify_all();
  }
  worker.join();
  {
    std::lock_guard lock(mutex_);
    serving_ = false;
  }
  if (work_error) std::rethrow_exception(work_error);
}

}  // namespace heapscope
