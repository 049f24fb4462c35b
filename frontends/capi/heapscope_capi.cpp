// The C API over the engine: sessions over a core or a stopped live process, and command lines run
// through the command table (engine/commands/command_line.h). Every entry point catches everything:
// no C++ exception may unwind into a C or Python caller.
#include "heapscope_capi.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "base/serving_thread.h"
#include "commands/command_line.h"
#include "sources/elf_core_image.h"
#include "sources/live_process_image.h"
#include "frontends/common/cache_settings.h"
#include "frontends/common/target_keys.h"
#include "frontends/common/target_options.h"

using namespace heapscope;

struct hs_session {
  std::unique_ptr<Session> session;
};

namespace {

static_assert(HS_REGISTER_COUNT == static_cast<int>(Reg::count));
static_assert(HS_FS_BASE == static_cast<int>(Reg::fs_base) && HS_RIP == static_cast<int>(Reg::rip) &&
              HS_GS == static_cast<int>(Reg::gs));

char* copy_string(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void set_string(char** where, const std::string& text) {
  if (where) *where = copy_string(text);
}

void clear(char** where) {
  if (where) *where = nullptr;
}

// The CLI's target options (frontends/common/target_options.h), given as one string by a frontend.
bool parse_target_options(const char* text, TargetOptions* options, std::string* error) {
  return !text || parse_target_options(split_command_words(text), options, error);
}

// Installs a frontend's evaluator for one run and removes it afterwards, also when the run throws.
class ScopedEvaluator {
 public:
  ScopedEvaluator(Session& session, hs_evaluate_fn evaluate, void* ctx) : session_(session) {
    if (!evaluate) return;
    session_.set_address_evaluator([evaluate, ctx](const std::string& expression) -> Address {
      std::uint64_t address = 0;
      char* message = nullptr;
      if (evaluate(ctx, expression.c_str(), &address, &message) == 0) return address;
      throw AnalysisError(message && *message ? std::string(message) : "cannot evaluate '" + expression + "'");
    });
  }
  ~ScopedEvaluator() { session_.set_address_evaluator(nullptr); }
  ScopedEvaluator(const ScopedEvaluator&) = delete;
  ScopedEvaluator& operator=(const ScopedEvaluator&) = delete;

 private:
  Session& session_;
};

// A frontend's interrupt check and progress display for one run (with the evaluator, all called on the
// run's serving thread), removed afterwards, also when the run throws.
class ScopedCallbacks {
 public:
  ScopedCallbacks(Session& session, const hs_callbacks& callbacks, ServingThread& serving)
      : session_(session), callbacks_(callbacks) {
    session_.set_interrupt_check([this] { return interrupted_.load(); });
    if (callbacks_.progress)
      session_.progress().set_display([this](const ProgressStatus& status) {
        std::lock_guard lock(mutex_);
        pending_ = status;
        has_pending_ = true;
      });
    if (callbacks_.evaluate) {
      hs_evaluate_fn evaluate = callbacks_.evaluate;
      void* ctx = callbacks_.ctx;
      session_.set_address_evaluator([evaluate, ctx, &serving](const std::string& expression) -> Address {
        std::uint64_t address = 0;
        char* message = nullptr;
        int status = 1;
        serving.call([&] { status = evaluate(ctx, expression.c_str(), &address, &message); });
        if (status == 0) return address;
        throw AnalysisError(message && *message ? std::string(message) : "cannot evaluate '" + expression + "'");
      });
    }
  }
  ~ScopedCallbacks() {
    session_.set_interrupt_check({});
    session_.progress().set_display({});
    session_.set_address_evaluator(nullptr);
  }
  ScopedCallbacks(const ScopedCallbacks&) = delete;
  ScopedCallbacks& operator=(const ScopedCallbacks&) = delete;

  // On the serving thread, every 50 ms and once at the end.
  void serve() {
    if (callbacks_.interrupted && !interrupted_ && callbacks_.interrupted(callbacks_.ctx)) interrupted_ = true;
    ProgressStatus status;
    {
      std::lock_guard lock(mutex_);
      if (!has_pending_) return;
      status = pending_;
      has_pending_ = false;
    }
    const std::string line = status.done ? std::string() : status.text();
    callbacks_.progress(callbacks_.ctx, line.c_str(), status.done ? 1 : 0);
  }
  bool interrupted() const { return interrupted_; }

 private:
  Session& session_;
  hs_callbacks callbacks_;
  std::atomic<bool> interrupted_{false};
  std::mutex mutex_;
  ProgressStatus pending_;
  bool has_pending_ = false;
};

// A session over `image` with the target's options and the snapshot store kept for `target_key`.
hs_session* new_session(std::shared_ptr<const Image> image, const TargetOptions& target, const std::string& target_key) {
  auto session = std::make_unique<hs_session>();
  SessionOptions options = session_options(target);
  options.snapshots = snapshot_store_for(target_key);  // named snapshots outlive each stop's session
  session->session = std::make_unique<Session>(std::move(image), options);
  return session.release();
}

// What hs_run and hs_run_with_callbacks share: checking their arguments, running `run(session, words)`
// (which gives the result and whether Ctrl-C ended it) and turning every failure into an error string,
// since nothing may be thrown across the C boundary.
template <class Run>
int run_guarded(hs_session* session, const char* command_line, char** output, char** error, Run&& run) {
  clear(output);
  clear(error);
  if (!session || !session->session || !command_line) {
    set_string(error, "hs_run needs a session and a command line");
    return 1;
  }
  try {
    const auto [result, interrupted] = run(*session->session, split_command_words(command_line));
    if (result.exit_code != 0) {
      set_string(error, result.error);
      return interrupted ? HS_INTERRUPTED : result.exit_code;
    }
    set_string(output, result.output);
    return 0;
  } catch (const std::bad_alloc&) {
    set_string(error, "out of memory while analysing the image");
  } catch (const std::exception& e) {
    set_string(error, e.what());
  } catch (...) {
    set_string(error, "unexpected failure");
  }
  return 1;
}

}  // namespace

extern "C" {

hs_session* hs_open_core(const char* core, const char* exe_or_null, const char* options_or_null, char** error) {
  clear(error);
  try {
    use_file_caches();
    if (!core || !*core) {
      set_string(error, "no core file given");
      return nullptr;
    }
    TargetOptions target;
    std::string message;
    if (!parse_target_options(options_or_null, &target, &message)) {
      set_string(error, message);
      return nullptr;
    }
    if (exe_or_null && *exe_or_null) target.executable = exe_or_null;
    std::shared_ptr<ElfCoreImage> image = ElfCoreImage::open(core, core_open_options(target), &message);
    if (!image) {
      set_string(error, message);
      return nullptr;
    }
    return new_session(std::move(image), target, core_target_key(core));
  } catch (const std::exception& e) {
    set_string(error, std::string("cannot open the core: ") + e.what());
  } catch (...) {
    set_string(error, "cannot open the core: unexpected failure");
  }
  return nullptr;
}

// hs_vector_registers is VectorRegisters with the C API's own fixed sizes.
static_assert(HS_VECTOR_REGISTER_COUNT == VectorRegisters::kRegisters && HS_VECTOR_LANES == VectorRegisters::kYmmLanes);

static bool copy_vector_registers(const hs_vector_registers& in, VectorRegisters& out, std::string* problem) {
  const bool known = in.lanes_read == 0 || in.lanes_read == static_cast<std::uint32_t>(VectorRegisters::kXmmLanes) ||
                     in.lanes_read == static_cast<std::uint32_t>(VectorRegisters::kYmmLanes);
  if (!known) {
    *problem = fmt::format("hs_vector_registers.lanes_read is {}; it must be 0, 2 or 4", in.lanes_read);
    return false;
  }
  out.lanes_read = static_cast<int>(in.lanes_read);
  for (int r = 0; r < VectorRegisters::kRegisters; ++r)
    std::copy(std::begin(in.lanes[r]), std::end(in.lanes[r]), out.lanes[r].begin());
  return true;
}

hs_session* hs_open_live(int pid, const hs_thread* threads, size_t count, char** error) {
  return hs_open_live_with_options(pid, threads, count, nullptr, error);
}

hs_session* hs_open_live_with_options(int pid, const hs_thread* threads, size_t count, const char* options_or_null,
                                      char** error) {
  return hs_open_live_with_vector_registers(pid, threads, nullptr, count, options_or_null, error);
}

hs_session* hs_open_live_with_vector_registers(int pid, const hs_thread* threads,
                                               const hs_vector_registers* vectors_or_null, size_t count,
                                               const char* options_or_null, char** error) {
  clear(error);
  try {
    use_file_caches();
    TargetOptions target;
    std::string message;
    if (!parse_target_options(options_or_null, &target, &message)) {
      set_string(error, message);
      return nullptr;
    }
    if (count > 0 && !threads) {
      set_string(error, "threads is NULL but count is not 0");
      return nullptr;
    }
    std::vector<ThreadState> states(count);
    for (std::size_t i = 0; i < count; ++i) {
      states[i].tid = threads[i].tid;
      std::copy(std::begin(threads[i].registers), std::end(threads[i].registers), states[i].regs.begin());
      if (vectors_or_null && !copy_vector_registers(vectors_or_null[i], states[i].vector, &message)) {
        set_string(error, fmt::format("thread {} (tid {}): {}", i + 1, threads[i].tid, message));
        return nullptr;
      }
    }
    LiveProcessOptions open_options;
    open_options.executable = target.executable;
    std::shared_ptr<LiveProcessImage> image = LiveProcessImage::open(pid, std::move(states), open_options, &message);
    if (!image) {
      set_string(error, message);
      return nullptr;
    }
    return new_session(std::move(image), target, process_target_key(pid));
  } catch (const std::exception& e) {
    set_string(error, std::string("cannot open the process: ") + e.what());
  } catch (...) {
    set_string(error, "cannot open the process: unexpected failure");
  }
  return nullptr;
}

int hs_run(hs_session* session, const char* command_line, hs_evaluate_fn evaluate, void* ctx, char** output,
           char** error) {
  return run_guarded(session, command_line, output, error, [&](Session& s, const std::vector<std::string>& words) {
    ScopedEvaluator evaluator(s, evaluate, ctx);
    const CommandResult result = execute_command_line(s, words);
    return std::make_pair(result, false);
  });
}

int hs_run_with_callbacks(hs_session* session, const char* command_line, const hs_callbacks* callbacks,
                          char** output, char** error) {
  if (!callbacks) return hs_run(session, command_line, nullptr, nullptr, output, error);
  return run_guarded(session, command_line, output, error, [&](Session& s, const std::vector<std::string>& words) {
    ServingThread serving;
    ScopedCallbacks scoped(s, *callbacks, serving);
    CommandResult result;
    serving.run_serving([&] { result = execute_command_line(s, words); }, [&] { scoped.serve(); });
    scoped.serve();  // the last status: the line cleared
    return std::make_pair(result, scoped.interrupted());
  });
}

char* hs_help(const char* command_or_null) {
  try {
    return copy_string(command_help(command_or_null ? command_or_null : ""));
  } catch (...) {
    return nullptr;
  }
}

char* hs_commands(void) {
  try {
    std::string out;
    for (const CommandEntry& e : command_table()) out += std::string(e.name) + "\t" + e.description + "\n";
    return copy_string(out);
  } catch (...) {
    return nullptr;
  }
}

// hs_thread.registers is heapscope::ThreadState::regs: the C enum must name the same order.
static_assert(HS_REGISTER_COUNT == static_cast<int>(Reg::count));
static_assert(HS_R15 == static_cast<int>(Reg::r15) && HS_RAX == static_cast<int>(Reg::rax) &&
              HS_RDI == static_cast<int>(Reg::rdi) && HS_RIP == static_cast<int>(Reg::rip) &&
              HS_RSP == static_cast<int>(Reg::rsp) && HS_FS_BASE == static_cast<int>(Reg::fs_base) &&
              HS_GS == static_cast<int>(Reg::gs));

char* hs_register_names(void) {
  try {
    std::string out;
    for (int r = 0; r < static_cast<int>(Reg::count); ++r) out += std::string(register_name(static_cast<Reg>(r))) + "\n";
    return copy_string(out);
  } catch (...) {
    return nullptr;
  }
}

void hs_free(char* text) { std::free(text); }

void hs_close(hs_session* session) {
  try {
    delete session;
  } catch (...) {
  }
}

}  // extern "C"
