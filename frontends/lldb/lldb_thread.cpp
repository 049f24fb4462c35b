#include "frontends/lldb/lldb_thread.h"

#include <chrono>
#include <stdexcept>

namespace heapscope::lldb_plugin {

void LldbThread::call(const std::function<void()>& fn) {
  if (std::this_thread::get_id() == owner_) {
    fn();
    return;
  }
  Request request;
  request.fn = &fn;
  std::unique_lock lock(mutex_);
  if (!serving_) throw std::logic_error("heapscope: an LLDB call from a thread outside a running heap command");
  pending_.push_back(&request);
  changed_.notify_all();
  changed_.wait(lock, [&] { return request.done; });
  if (request.error) std::rethrow_exception(request.error);
}

void LldbThread::run_serving(const std::function<void()>& work, const std::function<void()>& idle) {
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
  for (;;) {
    std::unique_lock lock(mutex_);
    const auto ready = [&] { return work_finished_ || !pending_.empty(); };
    if (!changed_.wait_for(lock, std::chrono::milliseconds(50), ready)) {
      lock.unlock();
      if (idle) idle();
      continue;
    }
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

}  // namespace heapscope::lldb_plugin
