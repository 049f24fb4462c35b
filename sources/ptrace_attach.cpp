#include "sources/ptrace_attach.h"

#include <dirent.h>
#include <elf.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "image/x86_vector_state.h"

namespace heapscope {

namespace {

// <linux/ptrace.h> value; glibc's <sys/ptrace.h> lacks it and the two headers conflict.
constexpr int kPtraceEventStop = 128;
// A thread that keeps spawning threads must not keep us listing /proc/PID/task forever.
constexpr int kMaxTaskListings = 1000;

static_assert(sizeof(user_regs_struct) == sizeof(ThreadState::regs),
              "ThreadState::regs follows user_regs_struct, register for register");

// The XSAVE area (ymm0-15), or failing that the FXSAVE area (xmm0-15), of a stopped thread; none when
// the kernel gives neither (then pointers held only there are not seen, as before vector registers were
// read). Large enough for every XSAVE component the kernel may copy out (AMX tiles included).
VectorRegisters read_vector_registers(int tid) {
  constexpr std::size_t kXsaveBufferSize = 16 * 1024;
  VectorRegisters out;
  std::vector<std::byte> xsave(kXsaveBufferSize);
  iovec io{xsave.data(), xsave.size()};
  if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &io) == 0 &&
      decode_xsave(std::span(xsave.data(), io.iov_len), out, nullptr))
    return out;
  user_fpregs_struct fpregs;
  if (ptrace(PTRACE_GETFPREGS, tid, nullptr, &fpregs) == 0)
    decode_fxsave(std::as_bytes(std::span(&fpregs, 1)), out, nullptr);
  return out;
}

std::string status_field(int pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      const auto value = line.find_first_not_of(" \t", field.size() + 1);
      return value == std::string::npos ? "" : line.substr(value);
    }
  return "";
}

std::string process_name(int pid) {
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(in, name);
  return name.empty() ? "?" : name;
}

// Why the kernel may have said EPERM, and what to do about it.
std::string permission_hint() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (!(in >> scope)) scope = 0;  // no Yama
  if (scope >= 3) return "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): nobody may trace processes";
  if (geteuid() == 0)
    return "even root may not trace it here (a container without CAP_SYS_PTRACE, a process of another user "
           "namespace, or a security module forbids it)";
  if (scope == 2) return "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope), so only root may trace it";
  if (scope == 1)
    return "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope), so only its ancestors may trace it: run "
           "heapscope as root, or have the program call prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)";
  return "run heapscope as root or as the process's user";
}

std::string already_traced_error(int pid, int tracer) {
  return fmt::format("process {} is already traced by process {} ({}), a debugger most likely: detach it first, or "
                     "run the heap commands inside that debugger",
                     pid, tracer, process_name(tracer));
}

std::set<int> list_tasks(int pid) {
  std::set<int> tids;
  DIR* dir = opendir(fmt::format("/proc/{}/task", pid).c_str());
  if (!dir) return tids;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long tid = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && tid > 0) tids.insert(static_cast<int>(tid));
  }
  closedir(dir);
  return tids;
}

}  // namespace

std::unique_ptr<StoppedProcess> StoppedProcess::stop(int pid, std::string* error) {
  auto fail = [&](std::string why) -> std::unique_ptr<StoppedProcess> {
    if (error) *error = std::move(why);
    return nullptr;
  };
  if (pid <= 0) return fail(fmt::format("{} is not a process id", pid));
  if (pid == getpid()) return fail("heapscope cannot attach to itself");
  if (access(fmt::format("/proc/{}", pid).c_str(), F_OK) != 0)
    return fail(fmt::format("there is no process with pid {}", pid));
  if (status_field(pid, "State").rfind("Z", 0) == 0)
    return fail(fmt::format("process {} is a zombie (it has exited; its parent has not collected it yet): there is "
                            "no memory left to read",
                            pid));
  const int tracer = std::atoi(status_field(pid, "TracerPid").c_str());
  if (tracer != 0) return fail(already_traced_error(pid, tracer));

  std::unique_ptr<StoppedProcess> process(new StoppedProcess(pid));
  if (!process->attach_all(error)) return nullptr;  // the destructor detaches what was attached
  return process;
}

StoppedProcess::~StoppedProcess() { detach(); }

bool StoppedProcess::attach_all(std::string* error) {
  for (int listing = 0; listing < kMaxTaskListings; ++listing) {
    bool found_new = false;
    if (!seize_new_threads(&found_new, error)) return false;
    if (!found_new) break;
  }
  if (tracees_.empty()) {
    if (error) *error = fmt::format("process {} exited while heapscope attached to it", pid_);
    return false;
  }
  // Threads that exited between seizing and stopping are gone from the list; the rest are stopped.
  for (const Tracee& t : tracees_) {
    user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0) continue;  // exited meanwhile
    ThreadState thread;
    thread.tid = static_cast<std::uint32_t>(t.tid);
    std::memcpy(thread.regs.data(), &regs, sizeof regs);
    thread.vector = read_vector_registers(t.tid);
    threads_.push_back(std::move(thread));
  }
  std::stable_sort(threads_.begin(), threads_.end(), [this](const ThreadState& a, const ThreadState& b) {
    return (a.tid == static_cast<std::uint32_t>(pid_)) > (b.tid == static_cast<std::uint32_t>(pid_));
  });
  return true;
}

// One pass over /proc/PID/task: seizes and stops every thread not seen yet.
bool StoppedProcess::seize_new_threads(bool* found_new, std::string* error) {
  for (int tid : list_tasks(pid_)) {
    if (std::any_of(tracees_.begin(), tracees_.end(), [tid](const Tracee& t) { return t.tid == tid; })) continue;
    *found_new = true;
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
      const int err = errno;
      if (err == ESRCH) continue;  // the thread exited since the listing
      const int tracer = std::atoi(status_field(pid_, "TracerPid").c_str());
      if (error) {
        if (tracer != 0 && tracer != getpid())
          *error = already_traced_error(pid_, tracer);
        else if (err == EPERM || err == EACCES)
          *error = fmt::format("permission denied attaching to process {} ({}): {}", pid_, process_name(pid_),
                               permission_hint());
        else
          *error = fmt::format("cannot attach to thread {} of process {}: {}", tid, pid_, std::strerror(err));
      }
      return false;
    }
    Tracee tracee;
    tracee.tid = tid;
    if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0 || !wait_for_stop(tracee)) {
      ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
      continue;  // it exited
    }
    tracees_.push_back(tracee);
  }
  return true;
}

// Waits until the thread is in a ptrace stop; false when it exited instead.
bool StoppedProcess::wait_for_stop(Tracee& tracee) {
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(tracee.tid, &status, __WALL);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return false;
    if (!WIFSTOPPED(status)) continue;
    const int event = status >> 16;
    if (event == kPtraceEventStop) return true;  // our interrupt, or a group stop of a stopped process
    // A signal reached the thread before our interrupt: it is stopped now (signal-delivery stop), and
    // the signal must still be delivered when we let go.
    if (event == 0) tracee.pending_signal = WSTOPSIG(status);
    return true;
  }
}

void StoppedProcess::detach() {
  for (const Tracee& t : tracees_)
    ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(t.pending_signal)));
  tracees_.clear();
}

bool run_with_process_stopped(int pid, const std::function<void(const std::vector<ThreadState>&)>& work,
                              std::string* error) {
  // Blocked here before the work thread starts, so that it and every thread it starts inherit the
  // block: these signals then reach only the sigtimedwait below, on the tracer thread, which alone may
  // detach.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);
  struct RestoreMask {
    sigset_t mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};

  std::unique_ptr<StoppedProcess> process = StoppedProcess::stop(pid, error);
  if (!process) return false;

  std::atomic<bool> finished{false};
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      work(process->threads());
    } catch (...) {
      failure = std::current_exception();
    }
    finished.store(true, std::memory_order_release);
  });
  const timespec poll_interval{0, 20 * 1000 * 1000};
  while (!finished.load(std::memory_order_acquire)) {
    const int sig = sigtimedwait(&stop_signals, nullptr, &poll_interval);
    if (sig > 0) {
      process->detach();
      // On a terminal, over the progress line that may be there.
      std::fprintf(stderr, "%sheapscope: interrupted (%s); process %d was detached and runs on\n",
                   ::isatty(STDERR_FILENO) ? "\r\033[K" : "", strsignal(sig), pid);
      std::_Exit(128 + sig);  // the worker is still inside the analysis: no orderly shutdown for it
    }
  }
  worker.join();
  process->detach();
  if (failure) std::rethrow_exception(failure);
  return true;
}

}  // namespace heapscope
